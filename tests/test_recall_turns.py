"""recall() runs a completion as a session turn, through the same flow as search(), and refuses the scopes memlab does not serve (issue 24)."""

from __future__ import annotations

import pytest

from memlab import GraphRecallResponse, MemoryStack
from memlab.bench.modes import ModesBenchSpec, conversation, converse
from memlab.config import AnalysisConfig
from memlab.exceptions import ValidationError
from memlab.experiments import ModesConversation
from memlab.flows.turn import turn_trace
from memlab.llm import LLMClient
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


class PromptLog(LLMClient):
    """The offline client, keeping the system message of every call."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.systems: list[str] = []

    async def complete(self, messages, **kwargs):
        self.systems.append(next((m["content"] for m in messages if m["role"] == "system"), ""))
        return await super().complete(messages, **kwargs)


@pytest.mark.parametrize("query_type", ["GRAPH_COMPLETION", "RAG_COMPLETION", "HYBRID_COMPLETION"])
async def test_a_system_prompt_replaces_the_answer_instructions_in_a_recall_turn(tmp_path, query_type):
    config = fast_config(tmp_path, analysis=AnalysisConfig(search_mode="off"))
    llm = PromptLog.from_config(config)
    async with MemoryStack.from_config(config, llm=llm) as stack:
        await stack.remember(CURIE)
        llm.systems.clear()
        await stack.recall("Who discovered Polonium?", query_type, session_id="s", system_prompt="Answer like a pirate.")
        assert llm.systems[-1].startswith("Answer like a pirate.")
        await stack.recall("Who discovered Polonium?", query_type, session_id="s")
        assert not llm.systems[-1].startswith("Answer like a pirate.") and "Who discovered Polonium?" in llm.systems[-1]  # the history


async def test_context_profile_picks_the_guidance_the_session_context_source_renders(stack):
    manager = stack.session_manager
    user = str((await stack.users.default()).id)
    for profile, section, content in (("qa", "rules", "Cite the year."), ("agent", "tool_rules", "Retry the search tool once.")):
        await manager.add_context_entry(
            user, {"context_profile": profile, "section": section, "content": content, "confidence": 0.9}, session_id="s"
        )
    [qa] = await stack.recall("search year", session_id="s", scope="session_context")
    [agent] = await stack.recall("search year", session_id="s", scope="session_context", context_profile="agent")
    assert (qa.context_profile, agent.context_profile) == ("qa", "agent")
    assert "Cite the year." in qa.content and "Retry the search tool once." not in qa.content
    assert "Retry the search tool once." in agent.content and "Cite the year." not in agent.content


@pytest.mark.parametrize(
    ("option", "match"),
    [
        ({"node_name": ["Person"]}, r"node_name=\['Person'\] is not implemented: memlab's graph has no node sets"),
        ({"node_name_filter_operator": "AND"}, r"node_name_filter_operator='AND' is not implemented"),
        ({"include_references": True}, r"include_references=True is not implemented"),
        ({"context_profile": "tools"}, r"context_profile must be one of qa, agent, got 'tools'"),
        ({"system_prompt": "  "}, r"system_prompt must be None or non-blank text"),
    ],
)
async def test_recall_options_memlab_does_not_implement_are_refused_before_anything_runs(stack, option, match):
    with pytest.raises(ValidationError, match=match):
        await stack.recall("Who discovered Polonium?", session_id="s", **option)
    assert await stack.session.get_session("s") == []


async def test_a_recall_turn_opens_in_the_turn_inspector_with_its_lanes_and_phases(tmp_path):
    from memlab.widgets import TurnInspector

    async with _stack(tmp_path, "concurrent") as stack:
        await stack.remember([CURIE, TURING])
        await _ask(stack, "recall", "Who discovered Polonium?")
        second = await _ask(stack, "recall", "And when?")
        inspector = TurnInspector(stack, "s", second.raw["qa_id"])
        await inspector.refresh()
        assert inspector.trace["lanes"]["rewrite"] is not None and inspector.trace["phases"] == second.raw["turn"]["phases"]
        assert "And when?" in inspector.facts.value


async def test_a_grid_compares_the_modes_through_recall(tmp_path):
    from memlab.experiments import Grid

    base = fast_config(tmp_path / "base")
    grid = Grid(base, {"analysis.search_mode": ["concurrent", "off"]}, ModesConversation(turns=6, documents=4, entry="recall"))
    frame = await grid.run(progress=False)
    calls = frame[frame["metric"] == "analysis_calls"].set_index("analysis.search_mode")["value"]
    assert calls["concurrent"] > 0 and calls["off"] == 0 and set(frame["status"]) == {"ok"}
