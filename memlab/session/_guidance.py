"""Session guidance (SPEC §5): applying a turn analysis, and serving the "Active session guidance" block.

:class:`Guidance` is the session layer's object for it, one per
:class:`~memlab.session.SessionManager` (``manager.guidance``): :meth:`~Guidance.load`
the entries, :meth:`~Guidance.serve` the block, :meth:`~Guidance.update` from an
analysis, :meth:`~Guidance.score` an entry. The ranking, selection and rendering
rules are pure functions beside it.

Updating (:meth:`Guidance.update`): nothing happens unless the analysis has
candidate updates, served-context ratings, or a previous-answer rating *with* a
previous turn. Then one :class:`~memlab.models.SessionFeedbackEntry` is written;
each candidate with a section valid for its profile, non-blank content of at most
280 characters and confidence >= 0.75 either reinforces an entry with the same
profile, section and normalised content (the feedback id is appended to its
``source_feedback_ids``; agent profile: ``source_trace_ids``) or becomes a new
entry; ``helpful`` / ``harmful`` verdicts on existing guidance entries add one to
their ``helpful_count`` / ``harmful_count`` (other verdicts and unknown ids are ignored).

Serving (:meth:`Guidance.serve`): memlab serves only **usable** entries
(``harmful_count == 0`` and confidence >= 0.75, SPEC's DIFF table) of one profile
(``qa`` for answers; ``recall(context_profile=...)`` may render ``agent``), ranked by :func:`guidance_score`, taken greedily under 400 characters per
section and 1200 in total (an entry that does not fit is skipped, the scan goes
on), rendered by :func:`render_guidance`, and stamped ``last_served_at`` unless
``stamp_served=False``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic

from memlab._clock import Clock
from memlab.models import MAX_CONTEXT_CONTENT_CHARS, SessionContextEntry, SessionFeedbackEntry, normalize_content

__all__ = [
    "GUIDANCE_HEADER",
    "CONFLICT_LINE",
    "Guidance",
    "MIN_CANDIDATE_CONFIDENCE",
    "SECTION_BUDGET",
    "SECTION_PRIORITY",
    "TOTAL_BUDGET",
    "AppliedGuidance",
    "ServedGuidance",
    "context_entries",
    "guidance_score",
    "render_guidance",
    "select_guidance",
]

logger = logging.getLogger("memlab.session")

MIN_CANDIDATE_CONFIDENCE = 0.75
SECTION_BUDGET = 400
TOTAL_BUDGET = 1200
SECTION_PRIORITY: dict[str, dict[str, int]] = {
    "qa": {"rules": 3, "goals": 2, "preferences": 1, "lessons_learned": 1},
    "agent": {"failure_lessons": 3, "tool_rules": 3, "environment_facts": 2, "workflow_state": 2, "success_patterns": 1},
}
#: rendered section titles, in the fixed order of the block (the qa profile's, then the agent profile's)
SECTION_TITLES = {
    "goals": "Goals", "rules": "Rules", "preferences": "Preferences", "lessons_learned": "Lessons learned",
    "failure_lessons": "Failure lessons", "tool_rules": "Tool rules", "environment_facts": "Environment facts",
    "workflow_state": "Workflow state", "success_patterns": "Success patterns",
}
GUIDANCE_HEADER = "## Active session guidance"
CONFLICT_LINE = "Items are listed oldest to newest within each section. When guidance conflicts, prefer the later item."


@dataclass(frozen=True)
class AppliedGuidance:
    """What applying one analysis wrote: the feedback entry, new entries, reinforced entries, rated entries."""

    feedback_id: str
    created_ids: list[str] = field(default_factory=list)
    reinforced_ids: list[str] = field(default_factory=list)
    rated: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServedGuidance:
    """The rendered block ("" when nothing was served) and the ids of the entries in it."""

    block: str = ""
    ids: list[str] = field(default_factory=list)


def context_entries(rows: Iterable[dict[str, Any]]) -> list[SessionContextEntry]:
    """The guidance entries among session-context rows (``kind == "context"``), in order; invalid rows are skipped."""
    entries = []
    for row in rows:
        if row.get("kind", "context") != "context":
            continue
        try:
            entries.append(SessionContextEntry.model_validate(row))
        except pydantic.ValidationError:
            logger.warning("skipping an invalid session-context row %r", row.get("id"))
    return entries


async def _apply_turn_analysis(
    manager: Any,
    user_id: str,
    session_id: str,
    analysis: Any,
    *,
    message: str,
    previous: Any,
    served_ids: Sequence[str],
    now: datetime,
) -> AppliedGuidance | None:
    rating = analysis.previous_answer_rating if previous is not None else None
    if not (analysis.candidate_context_updates or analysis.served_context_ratings or rating is not None):
        return None
    stamp = now.isoformat()
    feedback = SessionFeedbackEntry(
        created_at=stamp,
        raw_text=message,
        referenced_qa_ids=[previous.qa_id] if previous is not None and previous.qa_id else [],
        referenced_qa_rating=rating,
        influencing_context_ids=list(served_ids),
        candidate_context_entries=[update.model_dump() for update in analysis.candidate_context_updates],
    )
    await manager.add_context_entry(user_id, feedback, session_id=session_id)
    existing = context_entries(await manager.get_context_entries(user_id, session_id=session_id))
    by_content: dict[tuple[str, str, str], SessionContextEntry] = {
        (entry.context_profile, entry.section, entry.normalized_content): entry for entry in existing
    }
    created: list[str] = []
    reinforced: list[str] = []
    for update in analysis.candidate_context_updates:
        profile = update.profile or "qa"
        content = update.content.strip()
        if (
            profile not in SessionContextEntry.SECTIONS
            or update.section not in SessionContextEntry.SECTIONS[profile]
            or not content
            or len(content) > MAX_CONTEXT_CONTENT_CHARS
            or update.confidence < MIN_CANDIDATE_CONFIDENCE
        ):
            continue
        sources = "source_trace_ids" if profile == "agent" else "source_feedback_ids"
        key = (profile, update.section, normalize_content(content))
        match = by_content.get(key)
        if match is not None:
            ids = getattr(match, sources)
            if feedback.id not in ids:
                ids.append(feedback.id)
                if await manager.update_context_entry(user_id, match.id, {sources: ids}, session_id=session_id):
                    reinforced.append(match.id)
            continue
        try:
            entry = SessionContextEntry(
                section=update.section,
                context_profile=profile,
                content=content,
                confidence=update.confidence,
                created_at=stamp,
                **{sources: [feedback.id]},
            )
        except pydantic.ValidationError as exc:
            logger.warning("skipping a candidate guidance update: %s", exc)
            continue
        if await manager.add_context_entry(user_id, entry, session_id=session_id) is not None:
            by_content[key] = entry
            created.append(entry.id)
    known = {entry.id: entry for entry in existing}
    rated: dict[str, str] = {}
    for item in analysis.served_context_ratings:
        verdict = item.verdict.strip().lower()
        rated_entry = known.get(item.id)
        if rated_entry is None or verdict not in ("helpful", "harmful"):
            continue
        counter = f"{verdict}_count"
        value = getattr(rated_entry, counter) + 1
        setattr(rated_entry, counter, value)
        if await manager.update_context_entry(user_id, rated_entry.id, {counter: value}, session_id=session_id):
            rated[rated_entry.id] = verdict
    return AppliedGuidance(feedback.id, created, reinforced, rated)


def _timestamp(text: str | None) -> float:
    try:
        return datetime.fromisoformat(text).timestamp() if text else 0.0
    except ValueError:
        return 0.0


def guidance_score(entry: SessionContextEntry, query: str) -> float:
    """10·section priority + 5·confidence + 4·overlap + 2·clamp(helpful − harmful, ±3) + priority + 0.5·timestamp/1e12.

    ``overlap`` = shared tokens / content tokens (normalised whitespace tokens);
    the timestamp (seconds) is ``last_served_at`` or else ``created_at``.
    """
    section = SECTION_PRIORITY.get(entry.context_profile, {}).get(entry.section, 0)
    content_tokens = set(normalize_content(entry.content).split())
    query_tokens = set(normalize_content(query).split())
    overlap = len(content_tokens & query_tokens) / len(content_tokens) if content_tokens else 0.0
    balance = max(-3, min(3, entry.helpful_count - entry.harmful_count))
    stamp = _timestamp(entry.last_served_at or entry.created_at)
    return 10 * section + 5 * entry.confidence + 4 * overlap + 2 * balance + entry.priority + 0.5 * (stamp / 1e12)


def select_guidance(
    entries: Iterable[SessionContextEntry],
    query: str,
    *,
    profile: str = "qa",
    section_budget: int = SECTION_BUDGET,
    total_budget: int = TOTAL_BUDGET,
) -> list[SessionContextEntry]:
    """The usable entries of ``profile`` to serve for ``query``, in the order they were taken (best score first)."""
    sections = SECTION_PRIORITY[profile]
    candidates = [entry for entry in entries if entry.context_profile == profile and entry.section in sections and entry.content and entry.usable]
    ranked = sorted(candidates, key=lambda entry: guidance_score(entry, query), reverse=True)
    used: dict[str, int] = {}
    total = 0
    taken = []
    for entry in ranked:
        size = len(entry.content)
        if used.get(entry.section, 0) + size <= section_budget and total + size <= total_budget:
            used[entry.section] = used.get(entry.section, 0) + size
            total += size
            taken.append(entry)
    return taken


def _clock_time(created_at: str) -> str:
    try:
        return datetime.fromisoformat(created_at).strftime("%H:%M:%S")
    except ValueError:
        return "--:--:--"


def render_guidance(entries: Iterable[SessionContextEntry]) -> str:
    """The prompt block; ``""`` for no entries.

    ``## Active session guidance``, the conflict line, then per non-empty section in
    the order Goals, Rules, Preferences, Lessons learned (an agent-profile block:
    Failure lessons, Tool rules, Environment facts, Workflow state, Success patterns): a blank line, ``### Title``
    and one ``- [HH:MM:SS] content`` bullet per entry, sorted by ``created_at``.
    """
    by_section: dict[str, list[SessionContextEntry]] = {}
    for entry in entries:
        by_section.setdefault(entry.section, []).append(entry)
    parts = []
    for section, title in SECTION_TITLES.items():
        chosen = sorted(by_section.get(section, []), key=lambda entry: entry.created_at)
        if chosen:
            parts.append(f"### {title}\n" + "\n".join(f"- [{_clock_time(entry.created_at)}] {entry.content}" for entry in chosen))
    if not parts:
        return ""
    return "\n\n".join([f"{GUIDANCE_HEADER}\n{CONFLICT_LINE}", *parts])


class Guidance:
    """The guidance of a session manager's sessions: load, serve, update, score (see the module docstring).

    ``manager`` is the :class:`~memlab.session.SessionManager` whose context rows
    hold the entries; ``clock`` stamps feedback entries and ``last_served_at``.
    """

    def __init__(self, manager: Any, clock: Clock) -> None:
        self._manager = manager
        self._clock = clock

    async def load(self, user_id: str, session_id: str) -> list[SessionContextEntry]:
        """The session's guidance entries (``kind == "context"``), first-insert order."""
        return context_entries(await self._manager.get_context_entries(user_id, session_id=session_id))

    async def serve(
        self,
        user_id: str,
        session_id: str,
        query: str,
        *,
        stamp_served: bool = True,
        entries: Iterable[SessionContextEntry] | None = None,
        profile: str = "qa",
    ) -> ServedGuidance:
        """Select and render the session's ``profile`` guidance for ``query``; stamps ``last_served_at`` (now) on what it serves.

        ``entries``: the session's guidance entries, when the caller holds current ones (None: :meth:`load` them).
        """
        if entries is None:
            entries = await self.load(user_id, session_id)
        chosen = select_guidance(entries, query, profile=profile)
        if not chosen:
            return ServedGuidance()
        if stamp_served:
            stamp = {"last_served_at": self._clock.now().isoformat()}
            manager = self._manager
            await asyncio.gather(*(manager.update_context_entry(user_id, entry.id, stamp, session_id=session_id) for entry in chosen))
        return ServedGuidance(render_guidance(chosen), [entry.id for entry in chosen])

    async def update(
        self, user_id: str, session_id: str, analysis: Any, *, message: str, previous: Any, served_ids: Sequence[str]
    ) -> AppliedGuidance | None:
        """Write what ``analysis`` (a :class:`~memlab.analysis.SessionTurnAnalysis`) says; None when it says nothing.

        ``previous`` is the previous turn (a ``SessionQAEntry``) or None, ``served_ids``
        the guidance ids served to it. Per-candidate failures are skipped.
        """
        return await _apply_turn_analysis(
            self._manager, user_id, session_id, analysis, message=message, previous=previous, served_ids=served_ids,
            now=self._clock.now(),
        )

    @staticmethod
    def score(entry: SessionContextEntry, query: str) -> float:
        """The ranker's score of ``entry`` for ``query`` (:func:`guidance_score`)."""
        return guidance_score(entry, query)
