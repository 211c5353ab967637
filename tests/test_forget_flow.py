"""Every delete of permanent memory goes through the one forget flow (memlab.flows.forget).

PermanentMemory only deletes graph, vector and relational data and returns a
ForgetEvent; ForgetFlow.delete calls the SessionCleaner with it and builds the
ForgetResult, for forget(data_id), forget(dataset), forget(memory_only),
datasets.delete_data, datasets.empty_dataset and forget(everything).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from memlab.flows.forget import ForgetFlow
from memlab.graph import PermanentMemory
from memlab.provenance import ForgetEvent, SessionCleaner

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."

ENTRY_POINTS = {
    "forget-data": lambda stack, ids, dry: stack.forget(data_id=ids["curie"], dataset="science", dry_run=dry),
    "delete_data": lambda stack, ids, dry: stack.datasets.delete_data("science", ids["curie"], dry_run=dry),
    "forget-dataset": lambda stack, ids, dry: stack.forget(dataset="science", dry_run=dry),
    "memory_only": lambda stack, ids, dry: stack.forget(dataset="science", memory_only=True, dry_run=dry),
    "empty_dataset": lambda stack, ids, dry: stack.datasets.empty_dataset("science", dry_run=dry),
    "everything": lambda stack, ids, dry: stack.forget(everything=True, dry_run=dry),
}
#: per entry point: (one document?, the dataset id in the result?, its documents in the result?)
SHAPES = {
    "forget-data": (True, False, True),
    "delete_data": (True, False, True),
    "forget-dataset": (False, True, True),
    "memory_only": (False, False, False),
    "empty_dataset": (False, False, True),
    "everything": (False, True, True),
}


def test_permanent_memory_has_no_forget_callback() -> None:
    assert "on_forget" not in inspect.signature(PermanentMemory.__init__).parameters
    for name in ("forget_data", "forget_dataset"):
        assert inspect.signature(getattr(PermanentMemory, name)).return_annotation in (ForgetEvent, "ForgetEvent")


@pytest.fixture
async def science(stack):
    curie = await stack.remember(CURIE, dataset="science")
    turing = await stack.remember(TURING, dataset="science")
    user = str((await stack.users.default()).id)
    graph = await stack.memory.graph(curie.dataset_id)
    cited = {
        "node_ids": [node["id"] for node in graph.nodes() if node["supporters"] == {curie.data_ids[0]}],
        "edge_ids": [edge["id"] for edge in graph.edges() if edge["supporters"] == {curie.data_ids[0]}],
    }
    manager = stack.session_manager
    cites = await manager.add_qa(user, "q", "a", session_id="chat", dataset_id=curie.dataset_id, used_graph_element_ids=cited)
    keeps = await manager.add_qa(user, "q", "a", session_id="chat", dataset_id=curie.dataset_id, used_graph_element_ids=None)
    named = await manager.add_qa(user, "q", "a", session_id=f"default_session_{curie.dataset_id}")
    assert not hasattr(stack.memory, "_on_forget") and not hasattr(stack.memory, "on_forget")
    ids = {"dataset": curie.dataset_id, "curie": curie.data_ids[0], "turing": turing.data_ids[0], "user": user}
    return stack, ids | {"cites": cites, "keeps": keeps, "named": named, "cited": cited}


@pytest.mark.parametrize("dry", [False, True], ids=["real", "dry"])
@pytest.mark.parametrize("how", list(ENTRY_POINTS))
async def test_each_entry_point_deletes_through_the_one_flow(science, monkeypatch, how, dry) -> None:
    stack, ids = science
    steps: list[tuple[str, Any]] = []
    delete, after_forget = ForgetFlow.delete, SessionCleaner.after_forget
    forget_data, forget_dataset = PermanentMemory.forget_data, PermanentMemory.forget_dataset

    async def flow_delete(self, target, **kwargs):
        steps.append(("flow", target.id))
        result = await delete(self, target, **kwargs)
        steps.append(("result", result))
        return result

    async def memory_data(self, *args, **kwargs):
        event = await forget_data(self, *args, **kwargs)
        steps.append(("memory", event))
        return event

    async def memory_dataset(self, *args, **kwargs):
        event = await forget_dataset(self, *args, **kwargs)
        steps.append(("memory", event))
        return event

    async def cleaner(self, event):
        steps.append(("cleaner", event))
        receipt = await after_forget(self, event)
        steps.append(("receipt", receipt))
        return receipt

    monkeypatch.setattr(ForgetFlow, "delete", flow_delete)
    monkeypatch.setattr(PermanentMemory, "forget_data", memory_data)
    monkeypatch.setattr(PermanentMemory, "forget_dataset", memory_dataset)
    monkeypatch.setattr(SessionCleaner, "after_forget", cleaner)

    result = await ENTRY_POINTS[how](stack, ids, dry)

    # the flow runs the memory delete, then the cleaner with the very event memory returned, then builds the result
    assert [kind for kind, _ in steps] == ["flow", "memory", "cleaner", "receipt", "result"]
    (_, target), (_, event), (_, cleaned), (_, receipt), (_, built) = steps
    assert target == ids["dataset"] and cleaned is event
    assert isinstance(event, ForgetEvent) and event.dataset_id == ids["dataset"] and event.dry_run is dry
    one_document, names_dataset, names_documents = SHAPES[how]
    assert event.whole_dataset is not one_document

    # the receipt: the same shape as before the flow orchestrated
    assert result.dry_run is dry
    assert result.data_ids == sorted(event.data_ids) and result.node_ids == sorted(event.node_ids) and result.edge_ids == sorted(event.edge_ids)
    assert result.dataset_ids == ([ids["dataset"]] if names_dataset else [])
    if one_document:
        assert result.data_ids == [ids["curie"]]
        assert set(ids["cited"]["node_ids"]) <= set(result.node_ids)
        assert [(s.session_id, s.qa_ids, s.whole_session) for s in result.cleanup.sessions] == [("chat", [ids["cites"]], False)]
        assert result == built and result.cleanup == receipt
    else:
        assert result.data_ids == (sorted([ids["curie"], ids["turing"]]) if names_documents else [])
        assert {s.session_id: (s.qa_ids, s.whole_session) for s in receipt.sessions} == {
            "chat": ([ids["cites"], ids["keeps"]], True),
            f"default_session_{ids['dataset']}": ([ids["named"]], True),
        }
        if how == "everything":  # the flow adds forget_user's receipt (nothing left of this user's sessions here)
            assert result.model_dump(exclude={"cleanup"}) == built.model_dump(exclude={"cleanup"})
            assert result.cleanup.sessions[: len(receipt.sessions)] == receipt.sessions
        else:
            assert result == built and result.cleanup == receipt
