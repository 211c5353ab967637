"""Session turns through ``stack.search`` (issue 6 items 1, 5, 6 and faults): each mode's flow, gating,
every fallback-to-sequential rule, timeout and fail-open, the turn lock, usage per turn, dual-query retrieval."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

import pytest

from memlab import MemoryStack, SearchType, StackConfig, ValidationError
from memlab.flows.turn import SessionTurn, TurnRunner, turn_trace
from memlab.analysis import ConcurrentMode, OffMode, SequentialMode
from memlab.config import AnalysisConfig, CacheConfig, LLMConfig
from memlab.retrievers._base import RetrievalScope
from memlab.retrievers._completion import CompletionRetriever
from memlab.retrievers import get_retriever
from memlab.session._guidance import GUIDANCE_HEADER
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
ELIGIBLE = [SearchType.RAG_COMPLETION, SearchType.GRAPH_COMPLETION, SearchType.HYBRID_COMPLETION, SearchType.TRIPLET_COMPLETION]


def _config(root, *, llm=None, cache=None, **analysis) -> StackConfig:
    extra = {"llm": llm} if llm is not None else {}
    if cache is not None:
        extra["cache"] = cache
    return fast_config(root, analysis=AnalysisConfig(**analysis), **extra)


@asynccontextmanager
async def _stack(root, docs=(CURIE, TURING), **settings):
    async with MemoryStack.from_config(_config(root, **settings), clock=FakeClock()) as stack:
        if docs:
            await stack.remember(list(docs))
        yield stack


async def _turn(stack, query, query_type=SearchType.GRAPH_COMPLETION, session_id="chat", **kwargs):
    [result] = await stack.search(query, query_type, session_id=session_id, **kwargs)
    return result, result.raw["turn"]


async def _context_rows(stack, session_id="chat"):
    user = await stack.users.default()
    return await stack.session_manager.get_context_entries(str(user.id), session_id=session_id)


def test_config_builds_the_modes(tmp_path) -> None:
    for name, cls in {"concurrent": ConcurrentMode, "sequential": SequentialMode, "off": OffMode}.items():
        stack = MemoryStack.from_config(_config(tmp_path, search_mode=name))
        assert type(stack.analysis) is cls and stack.analysis.name == name
    assert type(ConcurrentMode(AnalysisConfig()).fallback()) is SequentialMode


# -- each mode's flow ------------------------------------------------------------------------


async def test_concurrent_flow_dual_query_and_usage(tmp_path) -> None:
    async with _stack(tmp_path) as stack:
        first, record = await _turn(stack, "Who discovered Polonium?")
        assert "Marie Curie" in first.text
        assert (record["mode"], record["requested_mode"], record["fallback_reason"]) == ("concurrent", "concurrent", None)
        assert record["llm_calls"] == {"answer": 1, "analysis": 1} and record["rewrite"] is None  # no prior turn: one lane
        assert record["tokens_in"] > 0 and record["tokens_out"] > 0 and record["answered"] and record["latency_ms"] >= 0
        _, record = await _turn(stack, "And where did she work?")
        assert record["rewrite"].startswith("Prior user: Who discovered Polonium?")
        assert record["rewrite"].endswith("Current user request: And where did she work?")
        assert record["effective_query"] == "And where did she work?"  # the analysis cannot steer this turn
        turns = await stack.session.get_session(session_id="chat")
        assert [turn.question for turn in turns] == ["Who discovered Polonium?", "And where did she work?"]
        assert turns[1].memify_metadata["turn_mode"] == "concurrent" and turns[1].memify_metadata["turn_rewrite"] == record["rewrite"]
        frame = await stack.frames.turns("chat")
        assert list(frame["mode"]) == ["concurrent", "concurrent"] and list(frame["llm_calls"]) == [2, 2]
        assert list(frame["analysis_calls"]) == [1, 1] and (frame["tokens_in"] > 0).all()


@pytest.mark.parametrize("search_type", [SearchType.GRAPH_COMPLETION, SearchType.HYBRID_COMPLETION])
async def test_a_turn_records_its_lanes_verdicts_and_phases(tmp_path, search_type) -> None:
    async with _stack(tmp_path) as stack:
        _, first = await _turn(stack, "Who discovered Polonium?", search_type)
        assert first["lanes"]["rewrite"] is None and first["lanes"]["raw"] == first["lanes"]["merged"] != []
        assert [phase["phase"] for phase in sorted(first["phases"], key=lambda p: p["start_ms"])][0] == "load"
        _, second = await _turn(stack, "And where did she work?", search_type)
        lanes = second["lanes"]
        assert lanes["raw"] and lanes["rewrite"] and set(lanes["merged"]) <= set(lanes["raw"]) | set(lanes["rewrite"])
        assert {"load", "analysis", "apply", "retrieve_raw", "retrieve_rewrite", "merge", "answer"} <= {p["phase"] for p in second["phases"]}
        analysis = next(p for p in second["phases"] if p["phase"] == "analysis")
        answer = next(p for p in second["phases"] if p["phase"] == "answer")
        assert analysis["start_ms"] < answer["start_ms"] + answer["ms"] and all(p["ms"] >= 0 for p in second["phases"])
        assert second["analysis"] is not None and "previous_answer_rating" in second["analysis"]
        [_, stored] = await stack.session.get_session(session_id="chat")
        trace = turn_trace(stored.memify_metadata)
        assert trace == {"lanes": lanes, "analysis": second["analysis"], "phases": second["phases"]}


async def test_sequential_effective_query_drives_retrieval_and_answer(tmp_path) -> None:
    async with _stack(tmp_path / "s", search_mode="sequential") as stack:
        await _turn(stack, "Who discovered Polonium?", SearchType.RAG_COMPLETION)
        answer, record = await _turn(stack, "And when did she discover it?", SearchType.RAG_COMPLETION)
        assert record["mode"] == "sequential" and record["rewrite"] is None
        assert record["effective_query"] == "And when did she discover it? (about: discovered Polonium)"
        assert "1898" in answer.text and record["llm_calls"] == {"answer": 1, "analysis": 1}
        [_, turn] = await stack.session.get_session(session_id="chat")
        assert turn.question == "And when did she discover it?"  # the raw query is stored
    async with _stack(tmp_path / "o", search_mode="off") as stack:
        await _turn(stack, "Who discovered Polonium?", SearchType.RAG_COMPLETION)
        answer, record = await _turn(stack, "And when did she discover it?", SearchType.RAG_COMPLETION)
        assert "1898" not in answer.text and record["effective_query"] == "And when did she discover it?"


async def test_sequential_gating_acknowledges_without_retrieval(tmp_path) -> None:
    async with _stack(tmp_path, search_mode="sequential") as stack:
        first, record = await _turn(stack, "thanks")  # no previous turn: answered
        assert record["answered"] and record["llm_calls"]["answer"] == 1
        await _turn(stack, "Who discovered Polonium?")
        ack, record = await _turn(stack, "thanks")
        assert ack.text == "Got it." and ack.raw["context_ids"] == []
        assert record["answered"] is False and record["llm_calls"] == {"answer": 0, "analysis": 1}
        reply, _ = await _turn(stack, "Always cite the source.")
        assert reply.text == "Got it, I'll keep that in mind."  # the analysis' own reply
        turns = await stack.session.get_session(session_id="chat")
        assert [(turn.question, turn.answer) for turn in turns[2:]] == [("thanks", "Got it."), ("Always cite the source.", reply.text)]
        assert turns[2].used_graph_element_ids is None and turns[2].memify_metadata["turn_answered"] is False


async def test_concurrent_never_gates(tmp_path) -> None:
    async with _stack(tmp_path) as stack:
        await _turn(stack, "Who discovered Polonium?")
        answer, record = await _turn(stack, "thanks")
        assert record["answered"] and record["llm_calls"] == {"answer": 1, "analysis": 1} and answer.text != "Got it."


async def test_off_mode_is_history_only(tmp_path) -> None:
    async with _stack(tmp_path, search_mode="off") as stack:
        await _turn(stack, "Who discovered Polonium?")
        _, record = await _turn(stack, "Always cite the source. And where did she work?")
        assert record["llm_calls"] == {"answer": 1, "analysis": 0} and record["rewrite"] is None and record["guidance_ids"] == []
        assert await _context_rows(stack) == []


async def test_auto_feedback_off_drops_the_call_but_concurrent_keeps_dual_query(tmp_path) -> None:
    async with _stack(tmp_path / "c", auto_feedback=False) as stack:
        await _turn(stack, "Always cite the source.")
        _, record = await _turn(stack, "And where did she work?")
        assert record["mode"] == "concurrent" and record["llm_calls"] == {"answer": 1, "analysis": 0}
        assert record["rewrite"] is not None and record["guidance_ids"] == [] and await _context_rows(stack) == []
    async with _stack(tmp_path / "s", search_mode="sequential", auto_feedback=False) as stack:
        await _turn(stack, "Who discovered Polonium?")
        _, record = await _turn(stack, "thanks")
        assert record["answered"] and record["llm_calls"] == {"answer": 1, "analysis": 0} and record["rewrite"] is None


# -- guidance timing -----------------------------------------------------------------------


async def test_concurrent_guidance_applies_from_the_next_turn(tmp_path) -> None:
    async with _stack(tmp_path) as stack:
        _, record = await _turn(stack, "Always cite the source.")
        assert record["guidance_ids"] == []
        [rule] = [row for row in await _context_rows(stack) if row["kind"] == "context"]
        assert (rule["section"], rule["content"]) == ("rules", "Always cite the source.")
        _, record = await _turn(stack, "Who discovered Polonium?")
        assert record["guidance_ids"] == [rule["id"]]
        turns = await stack.session.get_session(session_id="chat")
        assert turns[0].used_session_context_ids is None and turns[1].used_session_context_ids == [rule["id"]]


async def test_sequential_guidance_applies_in_the_same_turn_and_reaches_the_prompt(tmp_path) -> None:
    async with _stack(tmp_path, search_mode="sequential") as stack:
        prompts = []
        complete = stack.llm.complete

        async def recording(messages, **kwargs):
            prompts.append(messages)
            return await complete(messages, **kwargs)

        stack.llm.complete = recording
        await _turn(stack, "Who described the Turing machine?")
        answer, record = await _turn(stack, "Always cite the source. Who discovered Polonium?")
        [rule] = [row for row in await _context_rows(stack) if row["kind"] == "context"]
        assert record["guidance_ids"] == [rule["id"]] and "Marie Curie" in answer.text
        system = prompts[-1][0]["content"]
        assert GUIDANCE_HEADER in system and "Always cite the source." in system
        assert system.index(GUIDANCE_HEADER) < system.index("Previous conversation:")  # guidance, then history


async def test_harmful_rating_stops_serving_a_rule(tmp_path) -> None:
    async with _stack(tmp_path, search_mode="sequential") as stack:
        await _turn(stack, "Always cite the source.")
        _, record = await _turn(stack, "Who discovered Polonium?")
        [rule_id] = record["guidance_ids"]
        await _turn(stack, "That's wrong.")
        [rule] = [row for row in await _context_rows(stack) if row["kind"] == "context"]
        assert rule["harmful_count"] == 1
        _, record = await _turn(stack, "Who described the Turing machine?")
        assert record["guidance_ids"] == [] and rule["id"] == rule_id


@pytest.mark.parametrize(("mode", "reads"), [("concurrent", ["qa", "context"]), ("sequential", ["qa", "context", "context"]), ("off", ["qa"])])
async def test_a_turn_reads_its_history_once_and_reuses_unchanged_guidance(tmp_path, monkeypatch, mode, reads) -> None:
    async with _stack(tmp_path, search_mode=mode) as stack:
        await _turn(stack, "Always cite the source.")
        await _turn(stack, "Who discovered Polonium?")
        cache = stack.session_manager.cache
        counted = []
        for name, kind in (("get_latest_qa_entries", "qa"), ("get_session_context_entries", "context")):
            method = getattr(cache, name)

            async def counting(*args, _kind=kind, _method=method, **kwargs):
                counted.append(_kind)
                return await _method(*args, **kwargs)

            monkeypatch.setattr(cache, name, counting)
        _, record = await _turn(stack, "Who described the Turing machine?")
        assert record["answered"] and counted == reads  # sequential re-reads guidance after its analysis


# -- fallback to sequential ------------------------------------------------------------------


@pytest.mark.parametrize("search_type", ELIGIBLE)
async def test_the_four_eligible_retrievers_run_concurrently(tmp_path, search_type) -> None:
    async with _stack(tmp_path) as stack:
        await _turn(stack, "Who discovered Polonium?", search_type)
        _, record = await _turn(stack, "And where did she work?", search_type)
        assert (record["mode"], record["fallback_reason"]) == ("concurrent", None) and record["rewrite"]


@pytest.mark.parametrize(
    ("search_type", "reason"),
    [
        (SearchType.GRAPH_COMPLETION_COT, "retriever"),
        (SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION, "retriever"),
        (SearchType.GRAPH_SUMMARY_COMPLETION, "retriever"),
        (SearchType.TEMPORAL, "retriever"),
        (SearchType.AGENTIC_COMPLETION, "retriever"),
        (SearchType.FEELING_LUCKY, "feeling_lucky"),
    ],
)
async def test_other_search_types_fall_back_to_sequential(tmp_path, search_type, reason) -> None:
    async with _stack(tmp_path) as stack:
        await _turn(stack, "Who discovered Polonium?", search_type)
        _, record = await _turn(stack, "And where did she work?", search_type)
        assert (record["mode"], record["requested_mode"], record["fallback_reason"]) == ("sequential", "concurrent", reason)
        assert record["rewrite"] is None and record["effective_query"].endswith("(about: discovered Polonium)")
        [turn, *_] = (await stack.session.get_session(session_id="chat"))[1:]
        assert turn.memify_metadata["turn_fallback_reason"] == reason


async def test_batch_queries_run_as_sequential_turns_in_order(tmp_path) -> None:
    async with _stack(tmp_path) as stack:
        results = await stack.search(["Who discovered Polonium?", "  ", "Who described the Turing machine?"], session_id="chat")
        assert [result.raw["turn"]["fallback_reason"] for result in results] == ["batch", "batch"]
        assert {result.raw["turn"]["mode"] for result in results} == {"sequential"}
        turns = await stack.session.get_session(session_id="chat")
        assert [turn.question for turn in turns] == ["Who discovered Polonium?", "Who described the Turing machine?"]
        assert len(await stack.search(["Polonium", "Turing"], SearchType.CHUNKS, session_id="chat")) >= 2
        with pytest.raises(ValidationError):
            await stack.search(["ok", 3], session_id="chat")


async def test_no_session_falls_back_and_skips_the_analysis(tmp_path) -> None:
    async with _stack(tmp_path, cache=CacheConfig(enabled=False)) as stack:
        answer, record = await _turn(stack, "Who discovered Polonium?")
        assert (record["mode"], record["fallback_reason"]) == ("sequential", "no_session")
        assert record["llm_calls"] == {"answer": 1, "analysis": 0} and answer.raw["qa_id"] is None and "Marie Curie" in answer.text


async def test_only_context_is_single_query_retrieval_without_a_turn(tmp_path) -> None:
    async with _stack(tmp_path) as stack:
        await _turn(stack, "Who discovered Polonium?", SearchType.RAG_COMPLETION, top_k=1)
        rows_before = await _context_rows(stack)
        items = await stack.search("Always answer briefly. And where?", SearchType.RAG_COMPLETION, session_id="chat", only_context=True, top_k=1)
        retriever = get_retriever(SearchType.RAG_COMPLETION)
        main = await stack.datasets.get("main_dataset")
        raw_only = await retriever.get_context("Always answer briefly. And where?", RetrievalScope(stack.memory, [main.id], 1, stack.llm))
        assert [item.id for item in items] == [item.id for item in raw_only]
        assert len(await stack.session.get_session(session_id="chat")) == 1 and await _context_rows(stack) == rows_before


# -- faults ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["concurrent", "sequential"])
async def test_analysis_timeout_fails_open(tmp_path, mode) -> None:
    async with _stack(tmp_path, search_mode=mode, timeout_seconds=0.05, llm=LLMConfig(offline_latency_ms=300)) as stack:
        await _turn(stack, "Who discovered Polonium?")
        answer, record = await _turn(stack, "Always cite the source. Who discovered Polonium?")
        assert record["analysis_error"] == "timeout after 0.05 s" and record["answered"]
        assert "Marie Curie" in answer.text and record["effective_query"] == "Always cite the source. Who discovered Polonium?"
        assert record["llm_calls"] == {"answer": 1, "analysis": 1} and await _context_rows(stack) == []
        frame = await stack.frames.turns("chat")
        assert list(frame["analysis_error"]) == ["timeout after 0.05 s"] * 2


@pytest.mark.parametrize("mode", ["concurrent", "sequential"])
@pytest.mark.parametrize(("output", "error"), [("not json at all", "StructuredOutputError"), (None, "LLMError")])
async def test_analysis_errors_and_malformed_output_fail_open(tmp_path, mode, output, error) -> None:
    def handler(request):
        if output is None:
            raise RuntimeError("analysis service down")
        return output

    async with _stack(tmp_path, search_mode=mode) as stack:
        stack.llm.handlers.register("SessionTurnAnalysis", handler)
        await _turn(stack, "Who discovered Polonium?")
        answer, record = await _turn(stack, "thanks. Always cite the source.")
        assert record["analysis_error"].startswith(error) and record["answered"] and record["llm_calls"]["analysis"] == 1
        assert await _context_rows(stack) == []
        [_, turn] = await stack.session.get_session(session_id="chat")
        assert turn.memify_metadata["turn_analysis_error"] == record["analysis_error"]


async def test_an_analysis_handler_belongs_to_its_stack(tmp_path) -> None:
    async with _stack(tmp_path / "a") as broken, _stack(tmp_path / "b") as default:
        broken.llm.handlers.register("SessionTurnAnalysis", lambda request: "not json at all")
        for stack in (broken, default):
            await _turn(stack, "Who discovered Polonium?")
        _, failed = await _turn(broken, "thanks. Always cite the source.")
        _, analysed = await _turn(default, "thanks. Always cite the source.")
        assert failed["analysis_error"].startswith("StructuredOutputError")
        assert analysed["analysis_error"] is None
        [rule] = [row for row in await _context_rows(default) if row["kind"] == "context"]
        assert (rule["section"], rule["content"]) == ("rules", "Always cite the source.")
        assert await _context_rows(broken) == []


async def test_two_turns_sent_at_once_are_both_stored_in_order(tmp_path) -> None:
    async with _stack(tmp_path, llm=LLMConfig(offline_latency_ms=20)) as stack:
        first, second = await asyncio.gather(
            stack.search("Who discovered Polonium?", session_id="chat"), stack.search("Who described the Turing machine?", session_id="chat")
        )
        turns = await stack.session.get_session(session_id="chat")
        assert [turn.qa_id for turn in turns] == [first[0].raw["qa_id"], second[0].raw["qa_id"]]
        assert second[0].raw["turn"]["rewrite"].startswith("Prior user: Who discovered Polonium?")  # it saw the first turn
        assert first[0].raw["turn"]["rewrite"] is None
        other = await stack.search("Who discovered Polonium?", session_id="other")  # other sessions do not wait on this lock
        assert other[0].raw["turn"]["rewrite"] is None


# -- usage and dual-query retrieval --------------------------------------------------------------


async def test_usage_per_mode(tmp_path) -> None:
    totals = {}
    for mode in ("concurrent", "sequential", "off"):
        async with _stack(tmp_path / mode, search_mode=mode) as stack:
            for query in ("Who discovered Polonium?", "Who described the Turing machine?"):
                await _turn(stack, query)
            frame = await stack.frames.turns("chat")
            totals[mode] = (list(frame["answer_calls"]), list(frame["analysis_calls"]), int(frame["tokens_in"].sum()))
    assert totals["concurrent"][:2] == totals["sequential"][:2] == ([1, 1], [1, 1])
    assert totals["off"][:2] == ([1, 1], [0, 0])
    assert totals["off"][2] < totals["sequential"][2] <= totals["concurrent"][2]


FILLER = [
    "The harbour opened in spring and ferries run every hour to the island.",
    "Bakers in the old town sell rye bread and apple cake every morning.",
    "The museum shows tapestries, clocks and maps from the northern provinces.",
    "Cyclists ride along the river path to the lighthouse at the coast.",
    "What year was the bridge built? The stone bridge was finished after the flood.",
    "Which year did the school open? The village school opened with twelve pupils.",
]
POLONIUM = "Polonium was discovered by Marie Curie, who named it after Poland."


async def test_dual_query_finds_the_earlier_topic(tmp_path) -> None:
    follow_up = "What about the year?"
    found = {}
    for mode in ("concurrent", "off"):
        async with _stack(tmp_path / mode, docs=[POLONIUM, *FILLER], search_mode=mode) as stack:
            await _turn(stack, "Who discovered Polonium?", SearchType.RAG_COMPLETION, top_k=3)
            answer, _ = await _turn(stack, follow_up, SearchType.RAG_COMPLETION, top_k=3)
            main = await stack.datasets.get("main_dataset")
            graph = await stack.memory.graph(main.id)
            found[mode] = [graph.node(item_id)["text"] for item_id in answer.raw["context_ids"]]
    assert len(found["concurrent"]) <= 3
    assert any("Polonium" in text for text in found["concurrent"])
    assert not any("Polonium" in text for text in found["off"])


class _LaneFails(CompletionRetriever):
    """RAG completion whose retrieval fails for the queries in ``failing``."""

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing

    async def retrieve_lane(self, query, scope):
        if query in self.failing:
            raise RuntimeError(f"lane down: {query}")
        return await super().retrieve_lane(query, scope)


@pytest.mark.parametrize(
    ("failing", "lane_error"),
    [(set(), None), ({"rw"}, "rewrite: RuntimeError: lane down: rw"), ({"Who discovered Polonium?"}, "raw: RuntimeError: lane down: Who discovered Polonium?")],
)
async def test_a_failed_lane_leaves_the_other(tmp_path, failing, lane_error) -> None:
    async with _stack(tmp_path) as stack:
        main = await stack.datasets.get("main_dataset")
        scope = RetrievalScope(stack.memory, [main.id], 3, stack.llm)
        port = SessionTurn(
            TurnRunner(stack.session_manager, stack.analysis, stack.merge, stack.llm), "Who discovered Polonium?", _LaneFails(failing), scope,
            user_id="u", session_id="s", mode="concurrent", requested_mode="concurrent", fallback_reason=None,
        )
        completion = await port.answer("Who discovered Polonium?", None, rewrite="rw")
        assert port.record["lane_error"] == lane_error and port.record["llm_calls"]["answer"] == 1
        if "rw" in failing or not failing:
            assert "Marie Curie" in completion.text  # the raw lane survived


async def test_both_lanes_failing_raise_the_raw_error(tmp_path) -> None:
    async with _stack(tmp_path) as stack:
        main = await stack.datasets.get("main_dataset")
        scope = RetrievalScope(stack.memory, [main.id], 3, stack.llm)
        port = SessionTurn(
            TurnRunner(stack.session_manager, stack.analysis, stack.merge, stack.llm), "q", _LaneFails({"q", "rw"}), scope,
            user_id="u", session_id="s", mode="concurrent", requested_mode="concurrent", fallback_reason=None,
        )
        with pytest.raises(RuntimeError, match="lane down: q$"):
            await port.answer("q", None, rewrite="rw")
