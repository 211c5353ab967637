"""Tidy frames (issue 17): every frame's dtypes are the documented ones (memlab.frames.FRAME_COLUMNS), empty and
populated; no object column but the documented list / nested ones; no all-missing column on a populated stack;
every frame round-trips through parquet; result models render as escaped HTML tables.

The populated stack is built once for the module (``populated``): two documents, a session with single- and
dual-lane turns, a fallback turn, a turn whose analysis failed, guidance served and rated, explicit feedback, a
bridged turn (persist watermark), a distillation (its watermark), two agent trace steps, a priced completion model,
an ended session, then a document delete (the cleanup receipt).
"""

from __future__ import annotations

import asyncio
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from memlab import MemoryStack, SearchType
from memlab.config import LLMConfig, SessionConfig
from memlab.frames import FRAME_COLUMNS, FRAME_ROWS, LIST, NESTED, RECALL_TYPES, frame_columns
from memlab.models import AnyRecallResponse, CleanupReceipt, SessionAgentTraceEntry, SessionContextEntry, SessionFeedbackEntry, SessionQAEntry
from memlab.testing import FakeClock, fast_config


CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
KS = (1, 5)
#: the frames built from the populated stack (``quality`` / ``quality_questions`` at ``k=KS``)
FRAMES = tuple(FRAME_ROWS)


def _benchmark():
    """Two sessions, a question answered by each (its gold turn ranks first) and an abstention question."""
    from memlab.bench.conversations import Benchmark, Conversation, Question, Session, Turn

    def session(session_id, *texts):
        return Session(session_id, "2023-01-01", [Turn(f"{session_id}:{i}", session_id, role, text) for i, (role, text) in enumerate(texts)])

    sessions = [
        session("s1", ("user", "My bicycle is painted green."), ("assistant", "Noted.")),
        session("s2", ("user", "I went swimming in the lake."), ("assistant", "Noted.")),
    ]
    questions = [
        Question("q1", "fact", "What colour is my bicycle painted?", "", ["s1"], ["s1:0"], paraphrase=False),  # the evidence's words
        Question("q2", "fact", "Where did I go swimming?", "", ["s2"], ["s2:0"], paraphrase=False),
        Question("q3", "abstention", "Where do whales sleep?", "", [], [], abstention=True),
    ]
    return Benchmark("tidy", [Conversation("c1", sessions, questions)])


async def _frames(root: Path) -> dict[str, Any]:
    """Populated and empty versions of every frame, and the populated stack's ForgetResult."""
    from memlab.bench.quality_eval import quality_frame

    config = fast_config(root, llm=LLMConfig(price_as="gpt-4o-mini"))
    async with MemoryStack.from_config(config, clock=FakeClock()) as stack:
        curie = await stack.remember(CURIE, dataset="science")
        await stack.remember(TURING, dataset="science")

        async def turn(question: str, search_type: SearchType = SearchType.GRAPH_COMPLETION) -> dict:
            [answer] = await stack.search(question, search_type, datasets=["science"], session_id="chat")
            return answer.raw["turn"]

        await turn("Who discovered Polonium?")
        assert (await turn("And where did she work?"))["rewrite"]  # dual-lane
        await turn("Please always name the year. Thanks, that was great!")  # feedback + a guidance rule
        assert (await turn("When did Marie Curie discover Polonium?"))["guidance_ids"]  # the rule is served
        assert (await turn("Who described the Turing machine?", SearchType.FEELING_LUCKY))["fallback_reason"] == "feeling_lucky"
        previous = stack.llm.handlers.register("SessionTurnAnalysis", lambda request: "not json at all")
        assert (await turn("Where did Alan Turing work?"))["analysis_error"]
        if previous is None:
            stack.llm.handlers.unregister("SessionTurnAnalysis")
        else:
            stack.llm.handlers.register("SessionTurnAnalysis", previous)
        first = (await stack.session.get_session(session_id="chat"))[0]
        assert await stack.session.add_feedback("chat", first.qa_id, feedback_text="good", feedback_score=4)
        await stack.remember("Marie Curie won two Nobel prizes.", session_id="chat", dataset="science")
        assert await stack.wait_for_background(timeout=60) == 0  # the persist watermark
        user = str((await stack.users.default()).id)
        rule = SessionContextEntry(section="rules", content="Name the year of a discovery.", confidence=0.9, created_at=stack.clock.now().isoformat())
        await stack.session_manager.add_context_entry(user, rule, session_id="chat")
        await stack.session.distill_session("chat", dataset="science")  # the distillation watermark
        await stack.session.add_trace("chat", {"origin_function": "lookup", "status": "success", "memory_query": "Polonium",
                                               "memory_context": CURIE, "method_params": {"q": "Polonium"}, "method_return_value": [1]})
        await stack.session.add_trace("chat", {"origin_function": "cite", "status": "error", "error_message": "no source"})
        await stack.session.end("chat")

        frames = stack.frames
        bob = await stack.users.create("bob")
        populated = {
            "entries": await frames.entries("chat"),
            "context": await frames.context("chat"),
            "traces": await frames.traces("chat"),
            "turns": await frames.turns("chat"),
            "phases": await frames.phases("chat"),
            "sessions": await frames.sessions(),
            "usage": await frames.usage("chat"),
            "cost_by_model": await frames.cost_by_model("all"),
            "nearest": await frames.nearest("Polonium", dataset="science"),
            "graph_nodes": await frames.graph_nodes(dataset="science"),
            "recall": await frames.recall("Who discovered Polonium?", session_id="chat", datasets=["science"]),
        }
        empty = {
            "entries": await frames.entries("nothing-here"),
            "context": await frames.context("nothing-here"),
            "traces": await frames.traces("nothing-here"),
            "turns": await frames.turns("nothing-here"),
            "phases": await frames.phases("nothing-here"),
            "sessions": await frames.sessions(bob),
            "usage": await frames.usage("nothing-here"),
            "cost_by_model": await frames.cost_by_model("all", user=bob),
            "nearest": await frames.nearest("Polonium", dataset="science", collections=()),
            "graph_nodes": await frames.graph_nodes(dataset="science", type="no-such-type"),
            "recall": await frames.recall("   ", session_id="chat"),
            "cleanup": CleanupReceipt().to_frame(),
            "quality": quality_frame([], KS),
            "quality_questions": quality_frame([], KS, questions=True),
        }
        forgotten = await stack.forget(data_id=curie.data_ids[0], dataset="science")
        populated["cleanup"] = forgotten.cleanup.to_frame()
    # quality on a retriever with an embedder (keyword and bm25 have none: their ``embedder`` is NA)
    async with MemoryStack.from_config(fast_config(root / "quality", session=SessionConfig(retriever="hybrid"))) as stack:
        populated["quality"] = await stack.frames.quality(_benchmark(), k=KS)
        populated["quality_questions"] = await stack.frames.quality(_benchmark(), k=KS, questions=True)
    return {"populated": populated, "empty": empty, "forget": forgotten}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Any]:
    return asyncio.run(_frames(tmp_path_factory.mktemp("tidy")))


def _documented(name: str) -> dict[str, str]:
    return frame_columns(name, k=KS)


def _kinds(name: str) -> dict[str, str]:
    """The registry's own dtypes (``list`` / ``dict`` pseudo-dtypes kept); quality has no object columns."""
    return dict(FRAME_COLUMNS.get(name, _documented(name)))


def _dtypes(frame) -> dict[str, str]:
    return {column: str(dtype) for column, dtype in frame.dtypes.items()}


# -- dtypes ---------------------------------------------------------------------------------------


def test_the_registry_names_every_frame_and_documents_what_a_row_is() -> None:
    assert set(FRAME_COLUMNS) | {"quality", "quality_questions"} == set(FRAME_ROWS)
    assert list(FRAME_COLUMNS["entries"]) == list(SessionQAEntry.model_fields)
    guidance = set(SessionContextEntry.model_fields) - {"embedding"}  # vectors are left out
    assert guidance | set(SessionFeedbackEntry.model_fields) <= set(FRAME_COLUMNS["context"])
    assert list(FRAME_COLUMNS["traces"]) == [name for name in SessionAgentTraceEntry.model_fields if name != "kind"]
    recall_fields = {name for model in typing.get_args(typing.get_args(AnyRecallResponse)[0]) for name in model.model_fields}
    assert recall_fields <= set(RECALL_TYPES), sorted(recall_fields - set(RECALL_TYPES))


def test_the_docs_table_lists_every_documented_column_with_its_dtype() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "research.md").read_text()
    section = page.split("\n## DataFrames\n", 1)[1].split("\n## ", 1)[0]
    short = {"datetime64[us, UTC]": "datetime UTC", LIST: "list[str]", NESTED: "dict", "json": "JSON string"}
    rows = {line.split(" | ")[0].strip("| `"): line for line in section.splitlines() if line.startswith("| `")}
    rows = {call: line for call, line in rows.items() if not call.startswith("await Grid")}  # experiments' frames: memlab.experiments
    assert len(rows) == len(FRAME_ROWS)
    for name in FRAME_COLUMNS:
        [row] = [line for call, line in rows.items() if call.startswith(f"frames.{name}(") or (name == "cleanup" and "to_frame" in call)]
        assert FRAME_ROWS[name] in row
        for column, kind in FRAME_COLUMNS[name].items():
            assert f"`{column}` {short.get(kind, kind)}" in row, f"docs/research.md: {name}.{column} ({kind}); regenerate the table"


@pytest.mark.parametrize("name", FRAMES)
@pytest.mark.parametrize("state", ["populated", "empty"])
def test_each_frame_has_the_documented_columns_and_dtypes(built, name, state) -> None:
    frame = built[state][name]
    documented = _documented(name)
    if name == "recall":  # a column no returned row has is dropped; the leading five always stay
        assert list(frame.columns[:5]) == ["source", "kind", "search_type", "text", "score"]
        documented = {column: documented[column] for column in frame.columns}
    assert _dtypes(frame) == documented
    if state == "populated":
        assert len(frame) > 0


@pytest.mark.parametrize("name", FRAMES)
def test_object_columns_are_only_the_documented_list_and_nested_ones(built, name) -> None:
    frame = built["populated"][name]
    kinds = _kinds(name)
    for column in frame.columns:
        if str(frame[column].dtype) == "object":
            assert kinds[column] in (LIST, NESTED), f"{name}.{column} is an undocumented object column"
            for value in frame[column].dropna():
                if kinds[column] == LIST:
                    assert isinstance(value, list) and all(isinstance(item, str) for item in value)
                else:
                    assert set(value) == {"node_ids", "edge_ids"}


@pytest.mark.parametrize("name", FRAMES)
def test_no_column_is_missing_on_every_row_of_a_populated_stack(built, name) -> None:
    frame = built["populated"][name]
    if name == "quality":
        # one legitimately empty metric: mrr / recall of the abstention category (nothing to find), NA by definition;
        # the overall row still has them
        frame = frame[frame["category"] == "all"]
    if name == "quality_questions":
        frame = frame[~frame["abstention"]]
    missing = [column for column in frame.columns if frame[column].isna().all()]
    if name == "sessions":  # the local hashing embedder has no price: its cost is NA by the rule of every usage total
        assert frame["unpriced_embedding_tokens"].eq(frame["embedding_tokens"]).all()
        missing.remove("embedding_cost_usd")
    assert missing == []


def test_turns_carry_lanes_and_history_and_phases_chart_each_turn(built) -> None:
    turns, phases = built["populated"]["turns"], built["populated"]["phases"]
    assert list(turns.columns[-4:]) == ["lane_raw", "lane_rewrite", "lane_merged", "history_ids"]
    single, dual = turns.iloc[0], turns.iloc[1]
    assert single["lane_rewrite"] is None and single["lane_raw"] == single["lane_merged"] != []
    assert dual["lane_rewrite"] and set(dual["lane_merged"]) <= set(dual["lane_raw"]) | set(dual["lane_rewrite"])
    assert single["history_ids"] == [] and dual["history_ids"] == [single["qa_id"]]
    assert sorted(set(phases["turn"])) == list(range(len(turns)))
    assert phases.groupby("turn")["qa_id"].first().tolist() == turns["qa_id"].tolist()
    for _, rows in phases.groupby("turn"):
        assert rows["start_ms"].is_monotonic_increasing and (rows["ms"] >= 0).all()
    assert {"retrieve_raw", "retrieve_rewrite", "merge", "answer"} <= set(phases.loc[phases["turn"] == 1, "phase"])


def test_context_rows_fill_the_columns_of_their_kind(built) -> None:
    context = built["populated"]["context"]
    assert {"context", "feedback", "session_persist_watermark_state", "session_distill_watermark_state"} <= set(context["kind"])
    guidance = context[context["kind"] == "context"]
    assert guidance["section"].notna().all() and guidance["referenced_qa_ids"].isna().all()
    assert all(isinstance(ids, list) for ids in guidance["source_feedback_ids"])
    feedback = context[context["kind"] == "feedback"]
    assert feedback["raw_text"].notna().all() and feedback["section"].isna().all()


# -- parquet --------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """numpy arrays (how pyarrow gives list columns back) as lists, also inside the nested dicts."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return [_plain(item) for item in value.tolist()]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("name", FRAMES)
def test_every_frame_round_trips_through_parquet(built, name, tmp_path) -> None:
    pytest.importorskip("pyarrow", reason="pip install 'memlab[frames]'")
    frame = built["populated"][name]
    path = tmp_path / f"{name}.parquet"
    frame.to_parquet(path, engine="pyarrow")
    back = pd.read_parquet(path, engine="pyarrow")
    kinds = _kinds(name)
    for column in frame.columns:  # the comparison normalises list / nested columns only (arrays -> lists)
        if kinds[column] in (LIST, NESTED):
            back[column] = pd.Series([_plain(value) for value in back[column]], index=back.index, dtype=object)
    pd.testing.assert_frame_equal(back, frame, check_dtype=True)


# -- HTML -----------------------------------------------------------------------------------------


def test_result_models_render_escaped_html_tables(built) -> None:
    from memlab.models import GraphRecallResponse, SessionRecallResponse, SessionRecord, SessionUsage

    evil = "<script>alert('x')</script>"
    entry = SessionQAEntry(time="2026-01-01T00:00:00+00:00", question=evil, context="", answer="a & b", qa_id="q1")
    page = entry._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "a &amp; b" in page
    assert all(f">{name}<" in page for name in ("question", "answer", "qa_id", "feedback_score"))

    recalled = SessionRecallResponse(session_id="s", matched_tokens=1, time=entry.time, question=evil, context="", answer="x")
    assert "&lt;script&gt;" in recalled._repr_html_() and ">matched_tokens<" in recalled._repr_html_()
    graph = GraphRecallResponse(kind="chunk", text=evil, search_type="CHUNKS", raw={"data_ids": [f"d{i}" for i in range(9)]})
    assert "<script>" not in graph._repr_html_() and "(9 in all)" in graph._repr_html_()

    forgotten = built["forget"]
    html = forgotten._repr_html_()
    assert ">node_ids<" in html and ">sessions_considered<" in html and ">whole_session<" in html
    assert forgotten.cleanup.sessions[0].session_id in html and "<script>" not in html

    import datetime as dt
    import uuid

    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    record = SessionRecord(session_id=evil, user_id=uuid.uuid4(), started_at=now, last_activity_at=now)
    assert "&lt;script&gt;" in record._repr_html_() and ">last_activity_at<" in record._repr_html_()
    usage = SessionUsage(session_id="s", user_id=uuid.uuid4(), status="running", effective_status="running", started_at=now, last_activity_at=now)
    assert ">effective_status<" in usage._repr_html_()


def test_the_html_helper_does_not_import_pandas() -> None:
    import subprocess
    import sys

    code = "import sys, memlab._html, memlab.models; print('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_a_grid_frame_round_trips_through_parquet(tmp_path) -> None:
    pytest.importorskip("pyarrow", reason="pip install 'memlab[frames]'")
    from memlab.experiments import Grid, ModesConversation

    grid = Grid(base=fast_config(tmp_path / "grid"), workload=ModesConversation(turns=3, documents=3), vary={"analysis.search_mode": ["off"]})
    metrics = asyncio.run(grid.run(progress=False))
    for level, frame in (("metric", metrics), ("turn", grid.frame("turn"))):
        assert len(frame) > 0 and "object" not in _dtypes(frame).values()
        frame.to_parquet(tmp_path / f"{level}.parquet", engine="pyarrow")
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / f"{level}.parquet", engine="pyarrow"), frame, check_dtype=True)
