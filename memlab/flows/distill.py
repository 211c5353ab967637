"""``distill_session()``: a session's gated guidance into lesson documents of a dataset (SPEC §10).

:class:`DistillFlow` runs one session against one dataset:

1. resolve the user and an **existing, writable** dataset (else
   :class:`~memlab.exceptions.SessionDistillationError`); every argument is checked
   before any I/O;
2. gate: guidance rows (``kind == "context"``) never rated harmful
   (``harmful_count == 0``) with ``confidence >= 0.75`` (memlab's rule, the seed's; cognee
   lets ``clamp(helpful - harmful) >= 0`` through). None -> ``no_gated_entries``;
3. watermark: a row ``session_distill_watermark_state:{dataset_id}`` of kind
   ``session_distill_watermark_state`` in the same session-context list holds the ids
   already sealed for that dataset; they are dropped. None left -> ``no_new_entries``;
4. the session's turns from the earliest new entry's ``created_at``, with one turn of lead-in;
5. a cap (``max_batches``; None -> ``IMPROVE_DISTILL_MAX_BATCHES_PER_RUN``, 0 = none)
   gives a budget of ``max_batches * 6`` blocks: the entries by (confidence,
   created_at) descending first, the most recent turns fill the rest;
6. the blocks, sorted by timestamp (turns before entries on a tie), go to the
   curator 6 per batch (one structured call per batch, 5 at a time), which proposes
   lessons; one writer call per distinct proposed lesson (5 at a time) accepts or
   rejects it against the lessons already distilled into the dataset and its graph
   entities;
7. accepted lessons are published as ``# Session learning (session {sid})`` documents
   (date-free, so the same lesson deduplicates by content hash) through permanent
   memory's remember (add + cognify), tagged ``session_learnings`` and ``session:{sid}``.

Sealing and errors (memlab's choices where the reference leaves them open):

* only entries that went to a curator batch that **completed** are sealed. Entries
  left out by the cap stay pending on every outcome (memlab DIFF: cognee seals them
  on a successful run) and are distilled by the next run;
* a failed curator call (an :class:`~memlab.exceptions.LLMError` or malformed
  output): the completed batches' lessons still go through the writer and are
  published, their entries are sealed, the failed batch's stay pending, and
  :class:`~memlab.exceptions.DistillationCallsFailedError` is raised with the partial
  result (status ``failed``). A failed writer call: everything is published and
  sealed as usual, then the same error is raised (its lesson is lost, as in cognee);
* an exhausted LLM budget (an ``LLMError`` whose ``provider_error`` is litellm's
  ``BudgetExceededError`` or ``PaymentRequiredError``) seals and publishes nothing
  and re-raises that ``LLMError`` unchanged: the whole run can be repeated later;
* a failing publish (remember) seals nothing and propagates; a session cache that
  cannot be read raises :class:`~memlab.exceptions.BackendError` (it does not fail open).

The curator and writer calls use pydantic response models; on ``memlab/offline``
:func:`offline_curator` and :func:`offline_writer` fill them (registered on the
call's ``llm.handlers`` with ``replace=False``, so a researcher's handler wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlab.datasets import Datasets
from memlab.exceptions import (
    DistillationCallsFailedError,
    LLMError,
    PermissionDeniedError,
    SessionDistillationError,
    SessionParameterValidationError,
    StructuredOutputError,
    ValidationError,
)
from memlab.models import Dataset, DistillResult, SessionContextEntry, SessionQAEntry, normalize_content
from memlab.session import SessionManager, context_entries
from memlab.users import Users
from memlab.validation import check_id

if TYPE_CHECKING:
    from memlab.usage import UsageRecorder
    from memlab.config import SessionConfig
    from memlab.graph import KnowledgeGraph, PermanentMemory
    from memlab.llm import LLMClient

__all__ = [
    "BATCH_SIZE",
    "CURATOR_INSTRUCTIONS",
    "DistillFlow",
    "LESSON_TAG",
    "LessonVerdict",
    "MIN_DISTILL_CONFIDENCE",
    "ProposedLesson",
    "SessionLessonProposals",
    "SessionLessonVerdict",
    "WATERMARK_KIND",
    "WRITER_INSTRUCTIONS",
    "distillable",
    "lesson_document",
    "offline_curator",
    "offline_writer",
]

logger = logging.getLogger("memlab.distill")
T = TypeVar("T")

#: the distillation gate: never rated harmful, and at least this confident
MIN_DISTILL_CONFIDENCE = 0.75
#: timeline blocks per curator call
BATCH_SIZE = 6
#: curator (and, separately, writer) calls in flight at once
CALL_CONCURRENCY = 5
#: turns before the earliest new entry that are read as lead-in
QA_LEAD_IN = 1
QUESTION_CHARS = 1200
ANSWER_CHARS = 1200
FEEDBACK_CHARS = 200
CANDIDATE_CHARS = 280
#: graph entity names shown to the writer as already-known context
MAX_KNOWN_ENTITIES = 50
#: the tag of every distilled lesson document (the seed's node set)
LESSON_TAG = "session_learnings"
WATERMARK_KIND = "session_distill_watermark_state"
LESSON_HEADER = "# Session learning (session {session})"
#: ``provider_error`` names (litellm's classes) meaning the LLM budget is exhausted
BUDGET_EXHAUSTED_ERRORS = frozenset({"BudgetExceededError", "PaymentRequiredError"})
#: call errors that fail one curator / writer call (anything else propagates)
CALL_ERRORS = (LLMError, StructuredOutputError)
DEFAULT_WHY = "it was learned in this session"

_TIMELINE_LABEL = "Session timeline batch:"
_REVIEW_LABEL = "Lesson review:"
_WS = re.compile(r"\s+")
_CANDIDATE = re.compile(r"^Candidate (?P<id>.+?) \[(?P<profile>[a-z]+)/(?P<section>[a-z_]+)\]: (?P<content>.*)$", re.DOTALL)
_USER_LINE = re.compile(r"^User: (.*)$", re.MULTILINE)
_ASSISTANT_LINE = re.compile(r"^Assistant: (.*)$", re.MULTILINE)

CURATOR_INSTRUCTIONS = (
    "You curate durable lessons from one part of a conversation between a user and an assistant. "
    "The batch is a JSON list of blocks in time order: turns ('User: ...' / 'Assistant: ...', with the user's "
    "feedback on the answer when there was any) and candidate guidance items ('Candidate <id> [<profile>/<section>]: "
    "<content>') the session recorded. Propose only lessons that will still hold in later conversations (rules, "
    "preferences, goals, lessons learned), each grounded in the candidates. Reply with JSON: lessons: a list of "
    "{statement: the lesson as one self-contained sentence, why: a short clause saying what in the conversation "
    "supports it, source_candidate_ids: the ids of the candidates it comes from}. An empty list is a valid answer."
)
WRITER_INSTRUCTIONS = (
    "You decide whether a proposed lesson is written into long-term memory. The review is JSON: the lesson "
    "(statement, why), the candidate guidance it comes from, the lessons already distilled (known_lessons) and "
    "entities already in the knowledge graph (known_entities). Reject it when it is already known (the same "
    "lesson, in any wording), unsupported by its evidence, or not durable (true only for this conversation). "
    "Reply with JSON: {accept: true or false, reason: one short sentence}."
)


# --------------------------------------------------------------------------- response models


class ProposedLesson(BaseModel):
    """One lesson the curator proposes; ``statement`` and ``why`` are whitespace-collapsed."""

    model_config = ConfigDict(extra="ignore")

    statement: str
    why: str = ""
    source_candidate_ids: list[str] = Field(default_factory=list)

    @field_validator("statement", "why", mode="before")
    @classmethod
    def _collapse(cls, value: Any) -> Any:
        return _collapse(value) if isinstance(value, str) else value


class SessionLessonProposals(BaseModel):
    """The curator's answer for one batch (the schema name offline handlers register under)."""

    model_config = ConfigDict(extra="ignore")

    lessons: list[ProposedLesson] = Field(default_factory=list)


class SessionLessonVerdict(BaseModel):
    """The writer's verdict on one proposed lesson."""

    model_config = ConfigDict(extra="ignore")

    accept: bool = False
    reason: str = ""


#: the writer's verdict model under its short name
LessonVerdict = SessionLessonVerdict


# --------------------------------------------------------------------------- pure steps


@dataclass(frozen=True)
class _Block:
    """One timeline block: its timestamp, its text, and the entry id of a candidate block (None for a turn)."""

    stamp: str
    text: str
    entry_id: str | None = None


@dataclass
class _Run:
    """What one distillation run has done so far (becomes the :class:`DistillResult`)."""

    session_id: str
    dataset_id: uuid.UUID
    considered: int = 0
    sealed: int = 0
    batches: int = 0
    llm_calls: int = 0
    proposed: tuple[str, ...] = ()
    accepted: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    data_ids: tuple[str, ...] = ()

    def result(self, status: str, error: str | None = None) -> DistillResult:
        return DistillResult(
            status=status,
            session_id=self.session_id,
            dataset_id=self.dataset_id,
            entries_considered=self.considered,
            entries_sealed=self.sealed,
            batches=self.batches,
            llm_calls=self.llm_calls,
            proposed=list(self.proposed),
            accepted=list(self.accepted),
            rejected=list(self.rejected),
            documents=list(self.documents),
            data_ids=list(self.data_ids),
            error=error,
        )


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _clip(text: str | None, limit: int) -> str:
    return _collapse(text or "")[:limit]


def distillable(entry: SessionContextEntry) -> bool:
    """The gate: never rated harmful and ``confidence >= 0.75``."""
    return entry.harmful_count == 0 and entry.confidence >= MIN_DISTILL_CONFIDENCE


def watermark_id(dataset_id: uuid.UUID) -> str:
    """The id of the watermark row of ``dataset_id`` in a session-context list."""
    return f"{WATERMARK_KIND}:{dataset_id}"


def _sealed_ids(rows: Iterable[Mapping[str, Any]], mark_id: str) -> set[str]:
    for row in rows:
        if row.get("id") == mark_id and row.get("kind") == WATERMARK_KIND:
            return {str(item) for item in row.get("sealed_ids") or []}
    return set()


def _qa_window(rows: Sequence[SessionQAEntry], since: str, lead_in: int = QA_LEAD_IN) -> list[SessionQAEntry]:
    """The turns (oldest first) from the first one at or after ``since``, plus ``lead_in`` turns before it."""
    start = next((index for index, row in enumerate(rows) if row.time >= since), len(rows))
    return list(rows[max(0, start - lead_in) :])


def _within_budget(
    entries: Sequence[SessionContextEntry], turns: Sequence[SessionQAEntry], budget: int | None
) -> tuple[list[SessionContextEntry], list[SessionQAEntry]]:
    """The entries (session order) and turns a ``budget`` of blocks holds: best entries first, latest turns after."""
    if budget is None:
        return list(entries), list(turns)
    ranked = sorted(entries, key=lambda entry: (entry.confidence, entry.created_at), reverse=True)[:budget]
    kept = {entry.id for entry in ranked}
    room = budget - len(kept)
    return [entry for entry in entries if entry.id in kept], list(turns[-room:]) if room > 0 else []


def _turn_block(turn: SessionQAEntry) -> _Block:
    text = f"User: {_clip(turn.question, QUESTION_CHARS)}\nAssistant: {_clip(turn.answer, ANSWER_CHARS)}"
    if turn.feedback_text and turn.feedback_text.strip():
        text += f"\nUser feedback on this answer: {_clip(turn.feedback_text, FEEDBACK_CHARS)}"
    return _Block(turn.time, text)


def _candidate_block(entry: SessionContextEntry) -> _Block:
    text = f"Candidate {entry.id} [{entry.context_profile}/{entry.section}]: {_clip(entry.content, CANDIDATE_CHARS)}"
    return _Block(entry.created_at, text, entry.id)


def _batches(entries: Sequence[SessionContextEntry], turns: Sequence[SessionQAEntry]) -> list[list[_Block]]:
    """The timeline (turns before candidates on equal timestamps) cut into batches of :data:`BATCH_SIZE`."""
    blocks = sorted([*map(_turn_block, turns), *map(_candidate_block, entries)], key=lambda block: block.stamp)
    return [blocks[start : start + BATCH_SIZE] for start in range(0, len(blocks), BATCH_SIZE)]


def curator_messages(session_id: str, batch: Sequence[_Block]) -> list[dict[str, str]]:
    """The curator prompt for one batch: instructions, then the batch's blocks as a JSON list."""
    payload = json.dumps([block.text for block in batch], ensure_ascii=False, indent=1)
    return [
        {"role": "system", "content": CURATOR_INSTRUCTIONS},
        {"role": "user", "content": f"{_TIMELINE_LABEL} (session {session_id})\n{payload}"},
    ]


def writer_messages(lesson: ProposedLesson, evidence: Sequence[str], known_lessons: Sequence[str], known_entities: Sequence[str]) -> list[dict[str, str]]:
    """The writer prompt for one lesson: instructions, then the review as JSON."""
    review = {
        "statement": lesson.statement,
        "why": lesson.why,
        "evidence": list(evidence),
        "known_lessons": list(known_lessons),
        "known_entities": list(known_entities),
    }
    return [
        {"role": "system", "content": WRITER_INSTRUCTIONS},
        {"role": "user", "content": f"{_REVIEW_LABEL}\n{json.dumps(review, ensure_ascii=False, indent=1)}"},
    ]


def lesson_document(session_id: str, lesson: ProposedLesson) -> str:
    """The published text: header, blank line, ``{statement} ({why}.)``; no date, so a repeat deduplicates by hash."""
    why = lesson.why.rstrip(" .") or DEFAULT_WHY
    return f"{LESSON_HEADER.format(session=session_id)}\n\n{lesson.statement} ({why}.)\n"


def _lesson_lines(text: str) -> list[str]:
    """The lesson lines of a distilled document's text (everything but its header and blank lines)."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("# Session learning")]


def known_from_graph(graph: "KnowledgeGraph") -> tuple[list[str], list[str]]:
    """(lesson lines of the ``session_learnings`` documents, up to :data:`MAX_KNOWN_ENTITIES` entity names) of a graph."""
    lesson_docs = {node["id"] for node in graph.nodes("document") if LESSON_TAG in (node.get("tags") or ())}
    lessons: dict[str, None] = {}
    for chunk in graph.nodes("chunk"):
        if chunk.get("document_id") in lesson_docs:
            lessons.update(dict.fromkeys(_lesson_lines(str(chunk.get("text") or ""))))
    entities = [str(node["name"]) for node in graph.nodes("entity")][:MAX_KNOWN_ENTITIES]
    return list(lessons), entities


def _distinct(lessons: Iterable[ProposedLesson]) -> list[ProposedLesson]:
    """Non-blank lessons, the first of each normalised statement."""
    seen: dict[str, ProposedLesson] = {}
    for lesson in lessons:
        key = normalize_content(lesson.statement)
        if key and key not in seen:
            seen[key] = lesson
    return list(seen.values())


def _split(
    lessons: Sequence[ProposedLesson], verdicts: Sequence[SessionLessonVerdict | Exception]
) -> tuple[list[ProposedLesson], list[ProposedLesson]]:
    """(accepted, rejected) lessons; a lesson whose writer call failed is in neither."""
    accepted: list[ProposedLesson] = []
    rejected: list[ProposedLesson] = []
    for lesson, verdict in zip(lessons, verdicts):
        if isinstance(verdict, SessionLessonVerdict):
            (accepted if verdict.accept else rejected).append(lesson)
    return accepted, rejected


async def _bounded(calls: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T | Exception]:
    """Run ``calls`` at most ``limit`` at a time; each call's result, or the :data:`CALL_ERRORS` error it raised."""
    gate = asyncio.Semaphore(limit)

    async def run(call: Callable[[], Awaitable[T]]) -> T | Exception:
        async with gate:
            try:
                return await call()
            except CALL_ERRORS as exc:
                return exc

    return list(await asyncio.gather(*(run(call) for call in calls)))


# --------------------------------------------------------------------------- offline fillers


def _payload(request: Any, label: str) -> Any:
    for message in reversed(request.messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and content.startswith(label):
            return json.loads(content.split("\n", 1)[1] if "\n" in content else "null")
    return None


def _turn_snippet(block: str) -> str:
    """The user's words of a turn block (its assistant's when the question is blank), cut to 80 characters."""
    for pattern in (_USER_LINE, _ASSISTANT_LINE):
        match = pattern.search(block)
        if match and match.group(1).strip():
            return match.group(1).strip()[:80].rstrip(" .?!")
    return ""


def offline_curator(request: Any) -> dict[str, Any]:
    """Offline :class:`SessionLessonProposals` filler: one lesson per candidate block of the batch.

    ``statement`` is the candidate's content; ``why`` quotes the nearest turn before it
    in the batch (else after it): ``'the user said "..." in this session'``; a batch
    without turns gives ``'the session recorded it as <section> guidance'``.
    """
    blocks = [str(block) for block in _payload(request, _TIMELINE_LABEL) or []]
    turns = [(index, _turn_snippet(block)) for index, block in enumerate(blocks) if block.startswith("User: ")]
    lessons = []
    for index, block in enumerate(blocks):
        match = _CANDIDATE.match(block)
        if match is None or not match.group("content").strip():
            continue
        before = [snippet for at, snippet in turns if at < index and snippet]
        after = [snippet for at, snippet in turns if at > index and snippet]
        nearest = before[-1] if before else (after[0] if after else None)
        why = f'the user said "{nearest}" in this session' if nearest else f"the session recorded it as {match.group('section').replace('_', ' ')} guidance"
        lessons.append({"statement": match.group("content"), "why": why, "source_candidate_ids": [match.group("id")]})
    return {"lessons": lessons}


def offline_writer(request: Any) -> dict[str, Any]:
    """Offline :class:`SessionLessonVerdict` filler: accept unless the statement is already a known lesson.

    Known means equal after normalisation (lower case, whitespace collapsed) to a known
    lesson line, or to the part of one before its ``" (why.)"``.
    """
    review = _payload(request, _REVIEW_LABEL) or {}
    statement = normalize_content(str(review.get("statement") or ""))
    for known in review.get("known_lessons") or []:
        line = normalize_content(str(known))
        if line == statement or line.startswith(f"{statement} ("):
            return {"accept": False, "reason": "already known"}
    return {"accept": bool(statement), "reason": "new and grounded in the session" if statement else "empty"}


# --------------------------------------------------------------------------- the flow


def _check_max_batches(max_batches: Any) -> int | None:
    if max_batches is not None and (isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 0):
        raise ValidationError(f"max_batches must be None or an int >= 0, got {max_batches!r}")
    return max_batches


def _check_dataset(dataset: Any) -> None:
    if dataset is None:
        raise SessionDistillationError("distill_session() needs dataset=...: the existing dataset to write the lessons to")
    if not isinstance(dataset, (Dataset, uuid.UUID, str)):
        raise SessionDistillationError(f"dataset must be a Dataset, a UUID or a name, got {type(dataset).__name__} {dataset!r}"[:400])


class DistillFlow:
    """distill_session() over the given collaborators (see the module docstring for the rules).

    ``memory`` returns the permanent memory (built on first use by its owner);
    ``llm`` makes the curator and writer calls; ``config`` is the session settings
    (its ``distill_max_batches_per_run`` is read on every call).
    """

    def __init__(
        self,
        *,
        users: Users,
        datasets: Datasets,
        sessions: SessionManager,
        memory: Callable[[], "PermanentMemory"],
        llm: "LLMClient",
        config: "SessionConfig",
        usage: "UsageRecorder | None" = None,
    ) -> None:
        self.users = users
        self.datasets = datasets
        self.sessions = sessions
        self.memory = memory
        self.llm = llm
        self.config = config
        #: records the curator and writer calls as the session's usage (None: not recorded)
        self.usage = usage

    async def distill(self, session_id: str, *, dataset: Any = None, user: Any = None, max_batches: int | None = None) -> DistillResult:
        """Distill one session's new gated guidance into ``dataset``; see :meth:`memlab.session.SessionAPI.distill_session`."""
        session = self.sessions.resolve_session_id(check_id("session_id", session_id, error=SessionParameterValidationError))
        cap = _check_max_batches(max_batches)
        _check_dataset(dataset)
        acting = await self.users.resolve(user)
        target = await self._writable(dataset, acting)
        user_id = str(acting.id)
        run = _Run(session, target.id)
        rows = await self.sessions.get_context_entries(user_id, session_id=session, raise_on_error=True)
        entries = context_entries(rows)
        gated = [entry for entry in entries if distillable(entry)]
        if not gated:
            return run.result("no_gated_entries")
        mark = watermark_id(target.id)
        sealed = _sealed_ids(rows, mark)
        new = [entry for entry in gated if entry.id not in sealed]
        if not new:
            return run.result("no_new_entries")
        run.considered = len(new)
        chosen, turns = await self._inputs(user_id, session, new, cap)
        batches = _batches(chosen, turns)
        async with self.usage.metered(acting.id, session, target.id) if self.usage is not None else contextlib.nullcontext():
            done, lessons, curator_errors = await self._curate(run, batches)
            verdicts, writer_errors = await self._review(run, lessons, chosen)
        accepted, rejected = _split(lessons, verdicts)
        run.accepted = tuple(lesson.statement for lesson in accepted)
        run.rejected = tuple(lesson.statement for lesson in rejected)
        await self._publish(run, target, accepted)
        newly = {block.entry_id for batch in done for block in batch if block.entry_id is not None}
        run.sealed = await self._seal(user_id, session, mark, sealed, newly, {entry.id for entry in entries})
        failures = curator_errors + writer_errors
        if failures:
            self._raise_failed(run, curator_errors, writer_errors, len(batches), len(lessons))
        if not lessons:
            return run.result("no_proposed_lessons")
        if not accepted:
            return run.result("no_accepted_lessons")
        return run.result("completed")

    async def _inputs(
        self, user_id: str, session: str, new: list[SessionContextEntry], cap: int | None
    ) -> tuple[list[SessionContextEntry], list[SessionQAEntry]]:
        """The new entries and the turns (from the earliest new entry, with lead-in) that fit this run's block budget."""
        turns = _qa_window(await self.sessions.get_session(user_id, session_id=session), min(entry.created_at for entry in new))
        limit = self.config.distill_max_batches_per_run if cap is None else cap
        return _within_budget(new, turns, limit * BATCH_SIZE if limit else None)

    async def _writable(self, dataset: Any, acting: Any) -> Dataset:
        try:
            return await self.datasets.resolve(dataset, acting, "write")
        except (PermissionDeniedError, ValidationError) as exc:
            raise SessionDistillationError(f"cannot distill into dataset {dataset!r}: {exc}"[:400]) from exc

    async def _curate(self, run: _Run, batches: list[list[_Block]]) -> tuple[list[list[_Block]], list[ProposedLesson], list[Exception]]:
        """One curator call per batch: (completed batches, their distinct lessons, the errors of failed calls)."""
        self.llm.handlers.register(SessionLessonProposals.__name__, offline_curator, replace=False)
        run.batches = len(batches)
        run.llm_calls += len(batches)

        async def call(batch: list[_Block]) -> SessionLessonProposals:
            result = await self.llm.complete(curator_messages(run.session_id, batch), response_model=SessionLessonProposals)
            return cast(SessionLessonProposals, result.structured)  # a response_model call always fills it

        outcomes = await _bounded([functools.partial(call, batch) for batch in batches], CALL_CONCURRENCY)
        self._stop_if_budget_exhausted(outcomes)
        done: list[list[_Block]] = []
        proposed: list[ProposedLesson] = []
        errors: list[Exception] = []
        for batch, outcome in zip(batches, outcomes):
            if isinstance(outcome, Exception):
                errors.append(outcome)
                continue
            done.append(batch)
            ids = {block.entry_id for block in batch if block.entry_id is not None}
            for lesson in outcome.lessons:
                proposed.append(lesson.model_copy(update={"source_candidate_ids": [i for i in lesson.source_candidate_ids if i in ids]}))
        lessons = _distinct(proposed)
        run.proposed = tuple(lesson.statement for lesson in lessons)
        return done, lessons, errors

    async def _review(
        self, run: _Run, lessons: list[ProposedLesson], entries: Sequence[SessionContextEntry]
    ) -> tuple[list[SessionLessonVerdict | Exception], list[Exception]]:
        """One writer call per lesson: (each lesson's verdict or error, the errors)."""
        if not lessons:
            return [], []
        self.llm.handlers.register(SessionLessonVerdict.__name__, offline_writer, replace=False)
        graph = await self.memory().graph(run.dataset_id)
        known_lessons, known_entities = known_from_graph(graph)
        content = {entry.id: entry.content for entry in entries}
        run.llm_calls += len(lessons)

        async def call(lesson: ProposedLesson) -> SessionLessonVerdict:
            evidence = [content[i] for i in lesson.source_candidate_ids if i in content]
            messages = writer_messages(lesson, evidence, known_lessons, known_entities)
            result = await self.llm.complete(messages, response_model=SessionLessonVerdict)
            return cast(SessionLessonVerdict, result.structured)  # a response_model call always fills it

        outcomes = await _bounded([functools.partial(call, lesson) for lesson in lessons], CALL_CONCURRENCY)
        self._stop_if_budget_exhausted(outcomes)
        return outcomes, [outcome for outcome in outcomes if isinstance(outcome, Exception)]

    async def _publish(self, run: _Run, target: Dataset, accepted: Sequence[ProposedLesson]) -> None:
        """Add + cognify the accepted lessons' documents into ``target``, tagged ``session_learnings`` and ``session:<id>``."""
        if not accepted:
            return
        from memlab.graph import load_documents

        texts = [lesson_document(run.session_id, lesson) for lesson in accepted]
        documents = await asyncio.to_thread(load_documents, texts)
        result = await self.memory().remember(target, documents, tags=[LESSON_TAG, f"session:{run.session_id}"])
        run.documents = tuple(texts)
        run.data_ids = tuple(result.data_ids)

    async def _seal(self, user_id: str, session: str, mark: str, sealed: set[str], newly: set[str], present: set[str]) -> int:
        """Upsert the watermark (the ids sealed before that still exist, plus ``newly``); how many ids this sealed."""
        if not newly:
            return 0
        row = {"id": mark, "kind": WATERMARK_KIND, "sealed_ids": sorted((sealed & present) | newly)}
        if await self.sessions.add_context_entry(user_id, row, session_id=session) is None:
            logger.warning("could not write the distillation watermark of session %r; its entries stay pending", session)
            return 0
        return len(newly)

    @staticmethod
    def _stop_if_budget_exhausted(outcomes: Sequence[object]) -> None:
        """Re-raise the first exhausted-budget error among ``outcomes`` (nothing is published or sealed then)."""
        for outcome in outcomes:
            if isinstance(outcome, LLMError) and outcome.provider_error in BUDGET_EXHAUSTED_ERRORS:
                raise outcome

    def _raise_failed(self, run: _Run, curator: Sequence[Exception], writer: Sequence[Exception], batches: int, lessons: int) -> None:
        parts = []
        if curator:
            parts.append(f"{len(curator)} of {batches} curator call(s)")
        if writer:
            parts.append(f"{len(writer)} of {lessons} writer call(s)")
        first = (list(curator) + list(writer))[0]
        message = f"distillation of session {run.session_id!r} into dataset {run.dataset_id}: {' and '.join(parts)} failed: {first}"
        error = DistillationCallsFailedError(
            message,
            result=run.result("failed", message),
            model=self.llm.model,
            provider_error=getattr(first, "provider_error", None) or type(first).__name__,
        )
        raise error from first
