"""Session guidance (issue 6 item 5, SPEC §5): applying an analysis, the ranker, budgets, rendering, stamping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlab.analysis import SessionTurnAnalysis
from memlab.cache import MemoryCache
from memlab.models import SessionContextEntry, SessionQAEntry
from memlab.session import SessionManager
from memlab.session._guidance import CONFLICT_LINE, GUIDANCE_HEADER, context_entries, guidance_score, render_guidance, select_guidance
from memlab.testing import FakeClock

NOW = datetime(2026, 3, 1, 9, 30, 15, tzinfo=timezone.utc)
USER, SESSION = "u1", "s1"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def manager(clock) -> SessionManager:
    return SessionManager(MemoryCache(clock=clock))


def _previous() -> SessionQAEntry:
    return SessionQAEntry(time=NOW.isoformat(), question="q", context="", answer="a", qa_id="qa-1", used_session_context_ids=["g-old"])


def _analysis(**fields) -> SessionTurnAnalysis:
    return SessionTurnAnalysis.model_validate(fields)


async def _apply(manager, analysis, previous=None, served_ids=(), message="msg"):
    return await manager.guidance.update(USER, SESSION, analysis, message=message, previous=previous, served_ids=list(served_ids))


async def _rows(manager, kind):
    return [row for row in await manager.get_context_entries(USER, session_id=SESSION) if row["kind"] == kind]


# -- applying --------------------------------------------------------------------------


async def test_nothing_is_written_without_a_signal(manager) -> None:
    assert await _apply(manager, _analysis(query_to_answer="q", response_to_user="hi")) is None
    assert await _apply(manager, _analysis(previous_answer_rating=2)) is None  # a rating needs a previous turn
    assert await manager.get_context_entries(USER, session_id=SESSION) == []


async def test_a_rating_with_a_previous_turn_writes_one_feedback_entry(manager) -> None:
    applied = await _apply(manager, _analysis(previous_answer_rating="2"), previous=_previous(), served_ids=["g-old"], message="meh")
    [feedback] = await _rows(manager, "feedback")
    assert feedback["id"] == applied.feedback_id and feedback["created_at"] == NOW.isoformat()
    assert (feedback["raw_text"], feedback["referenced_qa_ids"], feedback["referenced_qa_rating"]) == ("meh", ["qa-1"], 2)
    assert feedback["influencing_context_ids"] == ["g-old"] and feedback["candidate_context_entries"] == []
    assert await _rows(manager, "context") == []


async def test_candidate_thresholds(manager) -> None:
    candidates = [
        {"section": "rules", "content": "Cite sources.", "confidence": 0.75},  # kept: the threshold is inclusive
        {"section": "rules", "content": "Guess freely.", "confidence": 0.74},
        {"section": "goals", "content": "x" * 281, "confidence": 0.9},  # too long: skipped, not truncated
    ]
    applied = await _apply(manager, _analysis(candidate_context_updates=candidates))
    assert len(applied.created_ids) == 1
    [entry] = await _rows(manager, "context")
    assert (entry["section"], entry["content"], entry["confidence"]) == ("rules", "Cite sources.", 0.75)
    assert entry["source_feedback_ids"] == [applied.feedback_id] and entry["created_at"] == NOW.isoformat()
    [feedback] = await _rows(manager, "feedback")
    assert len(feedback["candidate_context_entries"]) == 3  # the feedback keeps every candidate it saw


async def test_invalid_sections_and_profiles_are_skipped(manager) -> None:
    candidates = [
        {"section": "tool_rules", "content": "Use grep.", "confidence": 0.9},  # an agent section under the qa profile
        {"section": "rules", "content": "Use grep.", "confidence": 0.9, "profile": "robot"},
        {"section": "tool_rules", "content": "Use grep.", "confidence": 0.9, "profile": "agent"},
    ]
    applied = await _apply(manager, _analysis(candidate_context_updates=candidates))
    [entry] = await _rows(manager, "context")
    assert entry["id"] == applied.created_ids[0] and entry["context_profile"] == "agent"
    assert entry["source_trace_ids"] == [applied.feedback_id] and entry["source_feedback_ids"] == []


async def test_duplicates_by_normalised_content_gain_a_source(manager) -> None:
    first = await _apply(manager, _analysis(candidate_context_updates=[{"section": "rules", "content": "Cite  sources.", "confidence": 0.9}]))
    second = await _apply(
        manager,
        _analysis(
            candidate_context_updates=[
                {"section": "rules", "content": "cite SOURCES.", "confidence": 0.8},
                {"section": "goals", "content": "Cite sources.", "confidence": 0.8},  # another section: a new entry
            ]
        ),
    )
    assert second.reinforced_ids == first.created_ids and len(second.created_ids) == 1
    rules = [row for row in await _rows(manager, "context") if row["section"] == "rules"]
    assert len(rules) == 1 and rules[0]["source_feedback_ids"] == [first.feedback_id, second.feedback_id]
    assert len(await _rows(manager, "context")) == 2


async def test_ratings_count_on_existing_guidance_only(manager) -> None:
    created = await _apply(manager, _analysis(candidate_context_updates=[{"section": "rules", "content": "Cite.", "confidence": 0.9}]))
    [entry_id] = created.created_ids
    ratings = [
        {"id": entry_id, "verdict": " Helpful "},
        {"id": entry_id, "verdict": "harmful"},
        {"id": entry_id, "verdict": "neutral"},
    ]
    applied = await _apply(manager, _analysis(served_context_ratings=ratings))
    [entry] = await _rows(manager, "context")
    assert (entry["helpful_count"], entry["harmful_count"]) == (1, 1) and applied.rated == {entry_id: "harmful"}
    unknown = await _apply(manager, _analysis(served_context_ratings=[{"id": "nope", "verdict": "harmful"}, {"id": created.feedback_id, "verdict": "harmful"}]))
    assert unknown.rated == {}  # unknown ids and feedback rows are not guidance
    assert len(await _rows(manager, "feedback")) == 3


# -- serving ---------------------------------------------------------------------------


def _entry(section: str, content: str, *, minutes: int = 0, **fields) -> SessionContextEntry:
    created = (NOW + timedelta(minutes=minutes)).isoformat()
    return SessionContextEntry(section=section, content=content, confidence=fields.pop("confidence", 0.9), created_at=created, **fields)


def test_score_formula() -> None:
    entry = _entry("rules", "cite the source", confidence=0.8, helpful_count=5, harmful_count=0, priority=2)
    stamp = datetime.fromisoformat(entry.created_at).timestamp()
    expected = 10 * 3 + 5 * 0.8 + 4 * (2 / 3) + 2 * 3 + 2 + 0.5 * stamp / 1e12
    assert guidance_score(entry, "Cite THE paper") == pytest.approx(expected)
    served = entry.model_copy(update={"last_served_at": (NOW + timedelta(days=1)).isoformat()})
    assert guidance_score(served, "x") > guidance_score(entry, "x") - 4 * (2 / 3)  # last_served_at wins over created_at


def test_ranker_order_section_priority_then_confidence_overlap_balance() -> None:
    rule = _entry("rules", "be brief")
    goal = _entry("goals", "learn physics")
    preference = _entry("preferences", "short answers", confidence=1.0)
    lesson = _entry("lessons_learned", "dates matter", confidence=0.95)
    assert select_guidance([lesson, preference, goal, rule], "anything") == [rule, goal, preference, lesson]
    overlapping = _entry("rules", "mention polonium", confidence=0.8)
    assert select_guidance([rule, overlapping], "polonium please")[0] is overlapping


def test_only_usable_entries_are_served() -> None:
    entries = [
        _entry("rules", "harmful once", harmful_count=1, helpful_count=3),
        _entry("rules", "unsure", confidence=0.74),
        _entry("rules", "good"),
        _entry("tool_rules", "agent entry", context_profile="agent"),
    ]
    assert [entry.content for entry in select_guidance(entries, "")] == ["good"]


def test_budgets_per_section_and_total_skip_without_stopping() -> None:
    big = [_entry("rules", f"{i}" + "r" * 199, minutes=i) for i in range(3)]  # 200 chars each: two fit in a section
    taken = select_guidance([*big, _entry("rules", "small")], "")
    assert [entry.content for entry in taken] == [big[2].content, big[1].content]  # newer first; 'small' (5) no longer fits 400
    sections = ["rules", "goals", "preferences", "lessons_learned"]
    many = [
        _entry(section, f"{section}{i}".ljust(200, "x"), minutes=i, confidence=0.8 if section == "lessons_learned" else 0.9)
        for section in sections
        for i in range(2)
    ]
    chosen = select_guidance(many, "")
    assert sum(len(entry.content) for entry in chosen) == 1200 and len(chosen) == 6
    assert {entry.section for entry in chosen} == {"rules", "goals", "preferences"}  # lessons rank last (lower confidence): no room left
    tail = _entry("lessons_learned", "tiny")
    assert tail not in select_guidance([*many, tail], "")  # the total budget is spent
    assert tail in select_guidance([big[0], tail], "")


def test_render_format() -> None:
    entries = [
        _entry("lessons_learned", "dates matter", minutes=2),
        _entry("rules", "second rule", minutes=5),
        _entry("rules", "first rule", minutes=1),
        _entry("goals", "learn physics", minutes=3),
    ]
    assert render_guidance(entries) == (
        f"{GUIDANCE_HEADER}\n{CONFLICT_LINE}\n\n"
        "### Goals\n- [09:33:15] learn physics\n\n"
        "### Rules\n- [09:31:15] first rule\n- [09:35:15] second rule\n\n"
        "### Lessons learned\n- [09:32:15] dates matter"
    )
    assert render_guidance([]) == ""
    assert CONFLICT_LINE == "Items are listed oldest to newest within each section. When guidance conflicts, prefer the later item."


async def test_serving_stamps_and_returns_ids(manager, clock) -> None:
    usable = _entry("rules", "cite sources")
    harmful = _entry("rules", "guess", harmful_count=1)
    for entry in (usable, harmful):
        await manager.add_context_entry(USER, entry, session_id=SESSION)
    later = NOW + timedelta(hours=1)
    clock.advance(3600)
    quiet = await manager.guidance.serve(USER, SESSION, "q", stamp_served=False)
    assert quiet.ids == [usable.id] and "- [09:30:15] cite sources" in quiet.block
    assert all(entry.last_served_at is None for entry in context_entries(await manager.get_context_entries(USER, session_id=SESSION)))
    served = await manager.guidance.serve(USER, SESSION, "q")
    assert served == quiet
    stamps = {entry.id: entry.last_served_at for entry in context_entries(await manager.get_context_entries(USER, session_id=SESSION))}
    assert stamps == {usable.id: later.isoformat(), harmful.id: None}
    assert (await manager.guidance.serve(USER, "empty", "q")).block == ""
    assert manager.guidance.score(usable, "cite") == guidance_score(usable, "cite")
    assert [entry.id for entry in await manager.guidance.load(USER, SESSION)] == [usable.id, harmful.id]
