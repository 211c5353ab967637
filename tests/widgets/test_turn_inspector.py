"""TurnInspector, headless: the three lanes with element text and documents, verdicts, phases and their timeline."""

from __future__ import annotations

import html

import pytest

from memlab import SessionParameterValidationError
from memlab.charts import format_value
from memlab.flows.turn import turn_trace
from memlab.widgets import TurnInspector


async def test_a_dual_query_turn_shows_both_lanes_the_merge_verdicts_and_phases(chat) -> None:
    stack, remembered, qa_ids = chat
    inspector = TurnInspector(stack, "chat", qa_ids[2])
    await inspector.refresh()
    entry = (await stack.session.get_session(session_id="chat"))[2]
    trace = turn_trace(entry.memify_metadata)
    assert inspector.trace == trace and trace["lanes"]["rewrite"] is not None
    facts = html.unescape(inspector.facts.value)
    assert "And where did she work?" in facts and entry.memify_metadata["turn_rewrite"] in facts and "concurrent" in facts
    documents = {record.name for record in await stack.datasets.list_data(remembered.dataset_id)}
    for lane in ("raw", "rewrite", "merged"):
        pane = html.unescape(inspector.lanes[lane].value)
        assert all(element_id in pane for element_id in trace["lanes"][lane])
        assert f": {len(trace['lanes'][lane])}" in pane and any(name in pane for name in documents)
    assert "Marie Curie worked in Paris" in html.unescape(inspector.lanes["merged"].value)
    merged = inspector.lanes["merged"].value
    both = set(trace["lanes"]["raw"]) & set(trace["lanes"]["rewrite"])
    assert merged.count("<td>both</td>") == sum(1 for element_id in trace["lanes"]["merged"] if element_id in both)
    analysis = html.unescape(inspector.analysis.value)
    assert "query_to_answer" in analysis and trace["analysis"]["query_to_answer"] in analysis
    phases = inspector.phases.value
    assert [p["phase"] for p in trace["phases"]] == ["load", "guidance", "analysis", "retrieve_raw", "retrieve_rewrite", "merge", "answer", "apply"]
    assert all(f"<td>{p['phase']}</td><td>{format_value(p['start_ms'], 'ms')}</td><td>{format_value(p['ms'], 'ms')}</td>" in phases
               for p in trace["phases"])
    [ax] = inspector.figure.axes
    by_start = sorted(trace["phases"], key=lambda p: p["start_ms"])
    assert [label.get_text() for label in ax.get_yticklabels()] == [p["phase"] for p in by_start]
    bars = ax.patches
    assert [round(bar.get_x(), 3) for bar in bars] == [round(p["start_ms"], 3) for p in by_start]
    assert [round(bar.get_width(), 3) for bar in bars] == [round(p["ms"], 3) for p in by_start]
    assert bytes(inspector.timeline.value).startswith(b"\x89PNG")


async def test_a_first_turn_has_no_rewrite_lane(chat, ask) -> None:
    stack, _, _ = chat
    inspector = TurnInspector(stack, "solo", await ask("Who discovered Polonium?", session_id="solo"))
    await inspector.refresh()
    assert "this lane did not run" in inspector.lanes["rewrite"].value
    assert "<td>raw</td>" in inspector.lanes["merged"].value and "<td>both</td>" not in inspector.lanes["merged"].value


async def test_a_turn_without_a_trace_says_so(stack) -> None:
    note = await stack.remember("just chatting", session_id="notes", self_improvement=False)
    inspector = TurnInspector(stack, "notes", note.data_ids[0])
    await inspector.refresh()
    assert "no trace" in inspector.facts.value and "just chatting" in inspector.facts.value
    assert inspector.trace is None and inspector.figure is None and inspector.phases.value == ""


async def test_an_off_mode_turn_has_no_verdicts(tmp_path) -> None:
    from memlab import MemoryStack, SearchType
    from memlab.config import AnalysisConfig
    from memlab.testing import fast_config

    async with MemoryStack.from_config(fast_config(tmp_path, analysis=AnalysisConfig(search_mode="off"))) as stack:
        await stack.remember("Marie Curie discovered Polonium in 1898.")
        await stack.search("Who discovered Polonium?", SearchType.GRAPH_COMPLETION, session_id="chat")
        [entry] = await stack.session.get_session(session_id="chat")
        inspector = TurnInspector(stack, "chat", entry.qa_id)
        await inspector.refresh()
        assert "no verdicts" in inspector.analysis.value and "analysis" not in inspector.phases.value.split("phases", 1)[1]


async def test_an_unknown_qa_id_is_a_memlab_error_naming_it(chat) -> None:
    stack, _, _ = chat
    inspector = TurnInspector(stack, "chat", "no-such-turn")
    with pytest.raises(SessionParameterValidationError, match="no-such-turn"):
        await inspector.refresh()


async def test_a_turn_already_read_is_not_read_again(chat, monkeypatch) -> None:
    stack, _, qa_ids = chat
    entry = (await stack.session.get_session(session_id="chat"))[1]

    async def no_reads(*args, **kwargs):
        raise AssertionError("the session was read again")

    monkeypatch.setattr(stack.session, "get_session", no_reads)
    inspector = TurnInspector(stack, "chat", qa_ids[1], entry=entry)
    await inspector.refresh()
    assert inspector.entry is entry and inspector.trace == turn_trace(entry.memify_metadata)
    with pytest.raises(SessionParameterValidationError, match="is not turn"):
        TurnInspector(stack, "chat", qa_ids[0], entry=entry)
