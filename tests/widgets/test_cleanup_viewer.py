"""CleanupViewer, headless: the receipt of a dry run and of a real delete, per session, with failures."""

from __future__ import annotations

import html

import pytest

from memlab import ValidationError
from memlab.models import CleanupFailure, CleanupReceipt, ForgetResult, SessionCleanup
from memlab.widgets import CleanupViewer


@pytest.fixture
async def science(stack, ask):
    """Two documents in "science"; two turns in "chat" and one in "lab" use the Curie document."""
    curie = await stack.remember("Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris.", dataset="science")
    await stack.remember("Alan Turing worked at Bletchley Park in 1941.", dataset="science")
    qa = {}
    for session, question in (("chat", "Who discovered Polonium?"), ("chat", "Where did Marie Curie work?"), ("lab", "When was Polonium discovered?")):
        await stack.search(question, session_id=session, datasets=["science"])
        qa[question] = (await stack.session.get_session(session_id=session))[-1].qa_id
    return stack, curie.data_ids[0], qa


async def test_a_dry_run_lists_what_would_go_with_the_questions(science) -> None:
    stack, curie, qa = science
    result = await stack.forget(data_id=curie, dataset="science", dry_run=True)
    viewer = CleanupViewer(result, stack=stack)
    removed = {qa_id for cleaned in result.cleanup.sessions for qa_id in cleaned.qa_ids}
    assert removed and removed <= set(qa.values())
    summary = viewer.summary.value
    assert "Dry run" in summary and f"<th>turns</th><td>{len(removed)}</td>" in summary
    assert f"<th>graph nodes</th><td>{len(result.node_ids)}</td>" in summary
    assert f"<th>sessions considered</th><td>{result.cleanup.sessions_considered}</td>" in summary
    for cleaned in result.cleanup.sessions:
        assert f"<td>{cleaned.session_id}</td><td>{len(cleaned.qa_ids)}</td>" in viewer.sessions.value
    assert "no failures" in viewer.failures.value
    await viewer.refresh()
    for index, cleaned in enumerate(result.cleanup.sessions):
        viewer.session_select.value = index
        detail = html.unescape(viewer.detail.value)
        for qa_id in cleaned.qa_ids:
            question = next(question for question, turn in qa.items() if turn == qa_id)
            assert qa_id in detail and question in detail
    stored = {turn.qa_id for session in ("chat", "lab") for turn in await stack.session.get_session(session_id=session)}
    assert removed <= stored  # a dry run removes nothing


async def test_a_real_delete_shows_the_receipt_and_that_the_turns_are_gone(science) -> None:
    stack, curie, _ = science
    result = await stack.forget(data_id=curie, dataset="science")
    viewer = CleanupViewer(result, stack=stack)
    await viewer.refresh()
    assert "Deleted" in viewer.summary.value and "Dry run" not in viewer.summary.value
    [first, *_] = result.cleanup.sessions
    assert first.qa_ids[0] in viewer.detail.value and "(no longer stored)" in viewer.detail.value


def test_failures_and_whole_sessions_are_listed_without_a_stack() -> None:
    receipt = CleanupReceipt(
        sessions=[SessionCleanup(user_id="u-1", session_id="s-1", qa_ids=["q-1", "q-2"], context_ids=["c-1"], whole_session=True)],
        failures=[CleanupFailure(user_id="u-2", session_id="s-2", operation="delete_qa_entries", error="CacheConnectionError: down")],
        sessions_considered=4,
    )
    viewer = CleanupViewer(ForgetResult(data_ids=["d-1"], cleanup=receipt))
    assert "<td>s-1</td><td>2</td><td>1</td><td>yes</td>" in viewer.sessions.value
    assert "delete_qa_entries" in viewer.failures.value and "CacheConnectionError: down" in viewer.failures.value
    assert "<th>failures</th><td>1</td>" in viewer.summary.value and "(the whole session)" in viewer.detail.value
    assert "q-2" in viewer.detail.value and "c-1" in viewer.detail.value and "no longer stored" not in viewer.detail.value


def test_it_takes_a_forget_result() -> None:
    with pytest.raises(ValidationError, match="ForgetResult"):
        CleanupViewer(CleanupReceipt())
