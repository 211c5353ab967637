"""remember() into the graph, reload, forget(), improve(), permissions, and faults (issue 4)."""

from __future__ import annotations

import json
import uuid

import pytest

from memlab import MemoryStack, PermissionDeniedError, ValidationError
from memlab.config import LLMConfig
from memlab.llm import LLMError
from memlab.testing import fast_config

ALICE = "Marie Curie worked in Paris. Marie Curie discovered Polonium in 1898."
BOB = "Pierre Curie married Marie Curie in 1895. Pierre Curie taught in Paris."


def _names(graph, type_):
    return {node["name"] for node in graph.nodes(type=type_)}


async def test_remember_builds_graph_and_reloads_after_restart(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        result = await stack.remember([ALICE, BOB])
        assert result.status == "completed" and len(result.data_ids) == 2 and result.new_data_ids == result.data_ids
        assert result.chunk_count == 2 and result.node_count > 0 and result.edge_count > 0
        graph = await stack.memory.graph(result.dataset_id)
        assert {"Marie Curie", "Pierre Curie", "Paris"} <= _names(graph, "entity")
        before = graph.to_dict()
        hits = await stack.memory.search(result.dataset_id, "chunks", "Who discovered Polonium?", 1)
        assert graph.node(hits[0][0])["text"] == ALICE
    async with MemoryStack.from_config(fast_config(tmp_path)) as again:
        reloaded = await again.memory.graph(result.dataset_id)
        assert reloaded.to_dict() == before
        assert await again.memory.search(result.dataset_id, "chunks", "Who discovered Polonium?", 1) == hits
        records = await again.datasets.list_data("main_dataset")
        assert sorted(str(record.id) for record in records) == sorted(result.data_ids)


async def test_same_content_is_not_processed_twice(stack):
    first = await stack.remember(ALICE)
    again = await stack.remember([ALICE, BOB])
    assert again.data_ids[0] == first.data_ids[0] and again.new_data_ids == [again.data_ids[1]]
    assert again.chunk_count == 1


async def test_forget_one_document_keeps_shared_elements(stack):
    result = await stack.remember([ALICE, BOB])
    alice_id, bob_id = result.data_ids
    graph = await stack.memory.graph(result.dataset_id)
    polonium = next(node["id"] for node in graph.nodes(type="entity") if node["name"] == "Polonium")
    curie = next(node["id"] for node in graph.nodes(type="entity") if node["name"] == "Marie Curie")

    removed = await stack.forget(data_id=alice_id, dataset="main_dataset")
    assert removed.data_ids == [alice_id]
    assert polonium in removed.node_ids and curie not in removed.node_ids
    graph = await stack.memory.graph(result.dataset_id)
    assert graph.node(polonium) is None and graph.supporters(curie) == frozenset({bob_id})
    for node_id in removed.node_ids:
        assert graph.node(node_id) is None
    assert all(bob_id in graph.supporters(node["id"]) for node in graph.nodes())
    assert [str(r.id) for r in await stack.datasets.list_data("main_dataset")] == [bob_id]
    for hit, _ in await stack.memory.search(result.dataset_id, "chunks", "Polonium", 5):
        assert hit not in removed.node_ids
    with pytest.raises(ValidationError, match="no document"):
        await stack.forget(data_id=alice_id)


async def test_forget_dataset_memory_only_and_everything(stack):
    kept = await stack.remember(ALICE, dataset="kept")
    gone = await stack.remember(BOB, dataset="gone")
    removed = await stack.forget(dataset="gone")
    assert removed.dataset_ids == [gone.dataset_id] and removed.data_ids == gone.data_ids and removed.node_ids
    assert await stack.datasets.get("gone") is None

    memory_only = await stack.forget(dataset="kept", memory_only=True)
    assert memory_only.dataset_ids == [] and memory_only.data_ids == [] and memory_only.node_ids
    assert (await stack.memory.graph(kept.dataset_id)).number_of_nodes() == 0
    assert len(await stack.datasets.list_data("kept")) == 1

    other = await stack.remember(BOB, dataset="other")
    everything = await stack.forget(everything=True)
    assert set(everything.dataset_ids) == {kept.dataset_id, other.dataset_id}
    assert everything.data_ids == sorted(kept.data_ids + other.data_ids)
    assert await stack.datasets.list() == []
    with pytest.raises(ValidationError):
        await stack.forget()
    with pytest.raises(ValidationError):
        await stack.forget(everything=True, dataset="kept")


async def test_datasets_delete_data_and_empty_dataset(stack):
    result = await stack.remember([ALICE, BOB], dataset="docs")
    removed = await stack.datasets.delete_data("docs", result.data_ids[0])
    assert removed.data_ids == [result.data_ids[0]] and removed.node_ids
    emptied = await stack.datasets.empty_dataset("docs")
    assert emptied.data_ids == [result.data_ids[1]]
    assert await stack.datasets.list_data("docs") == [] and await stack.datasets.get("docs") is not None
    assert (await stack.memory.graph(result.dataset_id)).number_of_nodes() == 0


async def test_permissions(stack):
    owner = await stack.users.default()
    other = await stack.users.create("other")
    agent = await stack.users.create("agent", parent_user_id=owner.id)
    result = await stack.remember(ALICE, dataset="private")

    assert not await stack.datasets.can(other, result.dataset_id, "read")
    with pytest.raises(PermissionDeniedError) as denied:
        await stack.datasets.list_data(result.dataset_id, user=other)
    assert "Curie" not in str(denied.value)
    with pytest.raises(PermissionDeniedError):
        await stack.remember(BOB, dataset=result.dataset_id, user=other)
    with pytest.raises(PermissionDeniedError):
        await stack.forget(dataset=result.dataset_id, user=other)
    assert await stack.datasets.list(user=other) == []
    with pytest.raises(PermissionDeniedError):
        await stack.datasets.grant(result.dataset_id, other, "read", by=other)

    assert await stack.datasets.can(agent, result.dataset_id, "write")  # agents act with their parent's rights
    await stack.datasets.grant(result.dataset_id, other, "read")
    assert await stack.datasets.can(other, result.dataset_id, "read")
    assert not await stack.datasets.can(other, result.dataset_id, "write")
    assert [d.id for d in await stack.datasets.list(user=other)] == [result.dataset_id]
    with pytest.raises(ValidationError, match="permission"):
        await stack.datasets.grant(result.dataset_id, other, "admin")
    # a name resolves among the user's own datasets: "private" is a new dataset for `other`
    mine = await stack.remember(BOB, dataset="private", user=other)
    assert mine.dataset_id != result.dataset_id


@pytest.mark.parametrize(
    "bad, match",
    [
        ("", "empty|blank"),
        ("   \n", "empty|blank"),
        ([], "empty"),
        (42, "int"),
        (b"\x00\x01binary", "bytes"),
    ],
)
async def test_bad_input_raises_and_stores_nothing(stack, bad, match):
    with pytest.raises(ValidationError, match=match):
        await stack.remember(bad)
    assert await stack.datasets.get("main_dataset") is None or await stack.datasets.list_data("main_dataset") == []


async def test_files_and_bad_paths(stack, tmp_path):
    from pathlib import Path

    (tmp_path / "notes.md").write_text("# Notes\n\nAda Lovelace wrote the first program in 1843.\n")
    (tmp_path / "people.csv").write_text("name,city\nAlan Turing,London\n")
    (tmp_path / "facts.json").write_text(json.dumps({"scientist": {"name": "Grace Hopper", "year": 1952}}))
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n")
    result = await stack.remember([tmp_path / "notes.md", tmp_path / "people.csv", tmp_path / "facts.json"])
    assert len(result.data_ids) == 3
    graph = await stack.memory.graph(result.dataset_id)
    assert {"Ada Lovelace", "Alan Turing", "Grace Hopper"} <= _names(graph, "entity")
    with pytest.raises(ValidationError, match="image.png"):
        await stack.remember(tmp_path / "image.png")
    with pytest.raises(ValidationError, match="missing.txt"):
        await stack.remember([tmp_path / "notes.md", Path(tmp_path / "missing.txt")])
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    with pytest.raises(ValidationError, match="big.txt"):
        await stack.remember(big)
    assert len(await stack.datasets.list_data("main_dataset")) == 3


async def test_failed_cognify_keeps_previous_graph_and_records_the_error(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        first = await stack.remember(ALICE)
        before = (await stack.memory.graph(first.dataset_id)).to_dict()
    broken = fast_config(tmp_path, llm=LLMConfig(model="memlab-missing-provider/none", api_key="sk-secretsecretsecret123"))
    async with MemoryStack.from_config(broken) as stack:
        with pytest.raises(LLMError) as failure:
            await stack.remember(BOB)
        assert "sk-secretsecretsecret123" not in str(failure.value)
        assert (await stack.memory.graph(first.dataset_id)).to_dict() == before
        assert [str(r.id) for r in await stack.datasets.list_data("main_dataset")] == first.data_ids
        runs = await stack._relational.runs.of_dataset(first.dataset_id)
        last = runs[-1]
        assert (last.pipeline_name, last.status, last.error_class) == ("cognify_pipeline", "errored", "LLMError")
        assert last.error_message and "sk-secretsecretsecret123" not in last.error_message


async def test_improve_bridges_session_turns(stack):
    await stack.session_manager.add_qa((await stack.users.default()).id, "Where did Marie Curie work?", "Marie Curie worked in Paris.", session_id="s1")
    result = await stack.improve(dataset="main_dataset", session_ids=["s1"])
    assert result.status == "completed" and result.turns == 1 and len(result.new_data_ids) == 1
    [record] = await stack.datasets.list_data("main_dataset")
    assert record.tags == ["session:s1"]
    graph = await stack.memory.graph(result.dataset_id)
    assert "Marie Curie" in _names(graph, "entity")
    again = await stack.improve(dataset="main_dataset", session_ids=["s1"])
    assert again.new_data_ids == [] and again.data_ids == result.new_data_ids
    assert (await stack.improve(session_ids=["empty"])).status == "nothing_to_improve"
    with pytest.raises(ValidationError):
        await stack.improve(session_ids="s1")


async def test_remember_in_session_self_improves_in_background(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path, llm=LLMConfig(offline_latency_ms=50))) as stack:
        stored = await stack.remember("Ada Lovelace wrote the first program.", session_id="chat")
        assert stored.status == "session_stored"
        assert await stack.datasets.get("main_dataset") is None or not await stack.datasets.list_data("main_dataset")
        assert await stack.wait_for_background() == 0
        [record] = await stack.datasets.list_data("main_dataset")
        assert record.tags == ["session:chat"]
        await stack.remember("No improvement here.", session_id="quiet", self_improvement=False)
        assert stack.pending_background == 0
    async with MemoryStack.from_config(fast_config(tmp_path)) as reopened:
        assert len(await reopened.datasets.list_data("main_dataset")) == 1


async def test_background_improvement_of_known_turns_writes_no_runs(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        await stack.remember("Ada Lovelace wrote the first program.", session_id="chat")
        assert await stack.wait_for_background() == 0
        dataset = await stack.datasets.get("main_dataset")
        runs = await stack._relational.runs.of_dataset(dataset.id)
        await stack.remember("Ada Lovelace wrote the first program.", session_id="chat")
        assert await stack.wait_for_background() == 0
        assert await stack._relational.runs.of_dataset(dataset.id) == runs
        assert (await stack.improve(session_ids=["chat"])).new_data_ids == []
        assert len(await stack._relational.runs.of_dataset(dataset.id)) == len(runs) + 2


async def test_run_records_and_build_state_match_the_stored_runs(stack):
    store, dataset = stack._relational, await stack.datasets.create("runs")
    assert await store.runs.build_state(dataset.id, "add_pipeline") == (0, False, False, None)
    staged = await store.runs.start(dataset.id, "add_pipeline", 1)
    await store.runs.finish(staged.id, "completed")
    assert await store.runs.build_state(dataset.id, "add_pipeline") == (0, True, False, None)
    for status in ("completed", "errored", "started"):
        stack.clock.advance(1)
        run = await store.runs.start(dataset.id, "cognify_pipeline", 1)
        assert run == (await store.runs.of_dataset(dataset.id))[-1]
        if status != "started":
            await store.runs.finish(run.id, status, error_class="LLMError" if status == "errored" else None)
        stack.clock.advance(1)
        staged = await store.runs.start(dataset.id, "add_pipeline", 1)
        building = [item for item in await store.runs.of_dataset(dataset.id) if item.pipeline_name != "add_pipeline"]
        assert await store.runs.build_state(dataset.id, "add_pipeline") == (0, True, True, building[-1])


async def test_known_hashes_reads_long_lists(stack):
    dataset = await stack.datasets.create("many")
    rows = [(uuid.uuid4(), f"n{i}", None, "txt", f"hash-{i}", 1, f"text {i}") for i in range(250)]
    await stack._relational.data.add(dataset.id, rows)
    await stack._relational.data.add(dataset.id, rows[:3])
    assert await stack._relational.data.count(dataset.id) == 250
    wanted = [f"hash-{i}" for i in range(0, 300, 2)]
    assert await stack._relational.data.known_hashes(dataset.id, wanted) == {row[4]: str(row[0]) for row in rows if row[4] in wanted}


async def test_unknown_dataset_id_is_a_validation_error(stack):
    with pytest.raises(ValidationError, match="does not exist"):
        await stack.remember(ALICE, dataset=uuid.uuid4())


async def test_frames_nearest_and_graph_nodes(stack):
    result = await stack.remember([ALICE, BOB])
    frame = await stack.frames.nearest("Who discovered Polonium?", top_k=2)
    assert list(frame.columns) == ["collection", "rank", "id", "distance", "text", "data_ids"]
    chunks = frame[frame["collection"] == "chunks"]
    assert list(chunks["rank"]) == [1, 2] and chunks.iloc[0]["text"] == ALICE
    assert chunks.iloc[0]["data_ids"] == [result.data_ids[0]]
    assert chunks["distance"].is_monotonic_increasing
    assert set(frame["collection"]) == {"chunks", "triplets"}
    nodes = await stack.frames.graph_nodes(type="entity")
    assert {"Polonium", "Marie Curie"} <= set(nodes["name"])
    outsider = await stack.users.create("outsider")
    with pytest.raises(PermissionDeniedError):
        await stack.frames.nearest("Polonium", dataset=result.dataset_id, user=outsider)


async def test_tagged_documents_get_their_own_collection(stack):
    result = await stack.remember("Deploy checklist: run the migrations, then restart the workers.", tags=["skills"])
    [record] = await stack.datasets.list_data("main_dataset")
    assert record.tags == ["skills"]
    vectors = await stack.memory.vectors(result.dataset_id)
    assert len(vectors.collection("tagged_skills")) == 1
    with pytest.raises(ValidationError, match="tags"):
        await stack.remember("x", tags="skills")


async def test_a_second_process_view_sees_a_regrown_dataset(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as writer, MemoryStack.from_config(fast_config(tmp_path)) as reader:
        first = await writer.remember(ALICE, dataset="docs")
        assert (await reader.memory.graph(first.dataset_id)).number_of_nodes() > 0
        await writer.forget(dataset="docs", memory_only=True)  # snapshot deleted: version numbering restarts
        await writer.remember(BOB, dataset="docs")
        graph = await reader.memory.graph(first.dataset_id)
        assert "Pierre Curie" in _names(graph, "entity") and "Polonium" not in _names(graph, "entity")


async def test_phase_timings_keep_the_one_off_startup_apart(stack):
    first = await stack.remember(["Marie Curie worked in Paris."])
    second = await stack.remember(["Pierre Curie worked in Paris too."])
    for result in (first, second):
        assert set(result.timings_s) == {"startup", "extract", "embed", "write"}
    assert second.timings_s["startup"] < 0.5  # imports and model load happen once per process
