"""recall() runs a completion as a session turn, through the same flow as search(), and refuses the scopes memlab does not serve (issue 24)."""

from __future__ import annotations

import pytest

from memlab import GraphRecallResponse, MemoryStack
from memlab.bench.modes import ModesBenchSpec, conversation, converse
from memlab.config import AnalysisConfig
from memlab.exceptions import ValidationError
from memlab.experiments import ModesConversation
from memlab.flows.turn import turn_trace
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
MODES = ("concurrent", "sequential", "off")


def _stack(tmp_path, mode: str) -> MemoryStack:
    return MemoryStack.from_config(fast_config(tmp_path / mode, analysis=AnalysisConfig(search_mode=mode)), clock=FakeClock())


async def _ask(stack: MemoryStack, entry: str, query: str, **kwargs) -> GraphRecallResponse:
    if entry == "recall":
        [answer] = await stack.recall(query, session_id="s", scope="graph", **kwargs)
    else:
        [answer] = await stack.search(query, session_id="s", **kwargs)
    assert isinstance(answer, GraphRecallResponse) and answer.kind == "answer"
    return answer


@pytest.mark.parametrize("mode", MODES)
async def test_a_session_recall_is_the_same_turn_as_a_search_in_every_mode(tmp_path, mode):
    records = {}
    for entry in ("search", "recall"):
        async with _stack(tmp_path / entry, mode) as stack:
            await stack.remember([CURIE, TURING])
            first = await _ask(stack, entry, "Who discovered Polonium?")
            second = await _ask(stack, entry, "And when?")
            record = second.raw["turn"]
            assert record["source"] == entry and record["mode"] == mode
            assert record["history_ids"] == [first.raw["qa_id"]]  # the previous turn is in the prompt's history
            [_, stored] = await stack.session.get_session("s")
            assert stored.qa_id == second.raw["qa_id"] and stored.memify_metadata["turn_source"] == entry
            assert turn_trace(stored.memify_metadata)["phases"] == record["phases"]
            records[entry] = record
    search, recall = records["search"], records["recall"]
    for fact in ("mode", "llm_calls", "effective_query", "rewrite", "answered"):
        assert recall[fact] == search[fact], fact
    assert [p["phase"] for p in recall["phases"]] == [p["phase"] for p in search["phases"]]
    assert {lane for lane, ids in recall["lanes"].items() if ids is not None} == {lane for lane, ids in search["lanes"].items() if ids is not None}


async def test_the_modes_differ_through_recall_as_through_search(tmp_path):
    seen = {}
    for mode in MODES:
        async with _stack(tmp_path, mode) as stack:
            await stack.remember([CURIE, TURING])
            await _ask(stack, "recall", "Who discovered Polonium?")
            seen[mode] = (await _ask(stack, "recall", "And when?")).raw["turn"]
    assert [seen[mode]["llm_calls"]["analysis"] for mode in MODES] == [1, 1, 0]
    assert seen["concurrent"]["rewrite"] and seen["concurrent"]["lanes"]["rewrite"] is not None  # the dual-query lane
    assert seen["sequential"]["rewrite"] is None and seen["sequential"]["effective_query"] != "And when?"  # the analysis' query
    assert seen["off"]["effective_query"] == "And when?" and [p["phase"] for p in seen["off"]["phases"]] == ["history", "answer"]


async def test_a_recall_without_session_is_a_turn_of_the_dataset_default_session_with_its_usage(stack):
    remembered = await stack.remember(CURIE)
    [answer] = await stack.recall("Who discovered Polonium?", datasets=["main_dataset"], query_type="GRAPH_COMPLETION")
    session = f"default_session_{remembered.dataset_id}"
    assert answer.raw["session_id"] == session
    [turn] = await stack.session.get_session(session)
    assert turn.qa_id == answer.raw["qa_id"] and turn.memify_metadata["turn_source"] == "recall"
    record = await stack.usage.get(session)
    assert record is not None and record.dataset_id == remembered.dataset_id
    assert (record.tokens_in, record.tokens_out) == (answer.raw["turn"]["tokens_in"], answer.raw["turn"]["tokens_out"])


async def test_retrieval_only_and_only_context_recalls_store_no_turn_anywhere(stack):
    remembered = await stack.remember(CURIE)
    await stack.recall("Polonium", session_id="s", query_type="CHUNKS")
    await stack.recall("Who discovered Polonium?", session_id="s", only_context=True, scope="graph")
    await stack.recall("Polonium", datasets=["main_dataset"], query_type="CHUNKS")
    assert await stack.session.get_session("s") == []
    assert await stack.session.get_session(f"default_session_{remembered.dataset_id}") == []
    assert [record.session_id for record in (await stack.usage.list_sessions()).items] == []


async def test_a_recall_turn_is_cleaned_by_provenance_when_its_document_is_deleted(stack):
    remembered = await stack.remember([CURIE, TURING])
    answer = await _ask(stack, "recall", "Who discovered Polonium?")
    assert answer.raw["used_node_ids"]
    result = await stack.forget(data_id=remembered.data_ids[0], dataset=remembered.dataset_id)
    cleaned = {qa_id for session in result.cleanup.sessions for qa_id in session.qa_ids}
    assert answer.raw["qa_id"] in cleaned


async def test_the_mode_comparison_runs_through_recall(tmp_path):
    spec = ModesBenchSpec(turns=6, latency_ms=0.0, documents=4, entry="recall")
    documents, turns = conversation(spec)
    async with _stack(tmp_path, "concurrent") as stack:
        await stack.remember(list(documents))
        rows = await converse(stack, turns, search_type=spec.search_type, top_k=spec.top_k, entry="recall")
        stored = await stack.session.get_session("bench-modes")
    assert len(rows) == 6 and all(row["mode"] == "concurrent" for row in rows)
    assert len(stored) == 6 and {entry.memify_metadata["turn_source"] for entry in stored} == {"recall"}
    assert ModesConversation(entry="recall").fingerprint()["entry"] == "recall"
    assert "entry" not in ModesConversation().fingerprint()  # search cells keep their cache keys
    with pytest.raises(ValidationError, match="'chat'"):
        ModesConversation(entry="chat")


@pytest.mark.parametrize("scope", ["tools", "code", ["graph", "tools"], ["session", "code"]])
async def test_the_tools_and_code_scopes_are_refused_before_anything_runs(stack, scope):
    await stack.remember(CURIE)
    with pytest.raises(ValidationError, match=r"scope '(tools|code)' is not served: memlab has no (tool connections|code graph)"):
        await stack.recall("Who discovered Polonium?", session_id="s", scope=scope)
    assert await stack.session.get_session("s") == []
    assert await stack.recall("Polonium", session_id="s", scope=["all", "code"]) is not None  # "all" drops code (SPEC §9.1)
