"""SessionManager: one session layer over a cache backend (SPEC §4).

Every method validates its ids first (a bad id raises
:class:`~memlab.exceptions.SessionParameterValidationError` whatever the cache
state). After that the manager fails open: with caching off or the backend
unreachable, reads return ``[]`` / ``""`` and writes ``None`` / ``False``, and a
warning is logged; nothing raises.

Each stored turn and context entry is reported to the manager's ``activity``
recorder (the stack's ``session_records``: which sessions exist, whose they are,
which dataset they answered from), after the cache write. A recorder failure is
logged (once per manager) and never fails the write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar, overload

import pydantic

from memlab.cache import CacheBackend
from memlab._clock import Clock, SystemClock
from memlab.lifecycle import Lifecycle
from memlab.session._guidance import Guidance
from memlab.exceptions import BackendError, SessionLockTimeout, SessionParameterValidationError, SessionQAEntryValidationError
from memlab.models import SessionAgentTraceEntry, SessionContextEntry, SessionFeedbackEntry, SessionQAEntry
from memlab.session.rerankers import SessionReranker
from memlab.session.retrievers import KeywordSessionRetriever, SessionIndex, SessionRetriever
from memlab.validation import check_id, check_text

logger = logging.getLogger("memlab.session")
T = TypeVar("T")

class ActivityRecorder(Protocol):
    """``activity(user_id, session_id, dataset_id, read=..., only_new=...)``: called after each stored entry, and as a turn starts.

    ``read``: the datasets the turn reads (empty for a plain write). ``only_new``: the recorder
    may skip a write that would only move the session's last activity, returning False
    (any other result: recorded).
    """

    def __call__(
        self, user_id: str, session_id: str, dataset_id: uuid.UUID | None, *, read: Sequence[uuid.UUID] = (), only_new: bool = False
    ) -> Awaitable[bool | None]: ...


#: how many checked (user, session) id pairs a manager remembers before it forgets them all (and checks again)
_CHECKED_IDS = 4096
#: Turns of conversation history given to the LLM: fixed, as in the seeds.
HISTORY_LAST_N = 10
#: how long a turn waits for another process's turn on the same session (seconds)
TURN_LOCK_TIMEOUT_SECONDS = 60.0


def _check_id(name: str, value: Any) -> str | None:
    """None, or the id as a str (user ids may be ``uuid.UUID``); see :mod:`memlab.validation` for the rule."""
    if value is None:
        return None
    return _id(name, value)


def _id(name: str, value: Any) -> str:
    """The required id as a str (see :func:`_check_id`)."""
    return check_id(name, value, error=SessionParameterValidationError, allow_uuid=name == "user_id")


def check_last_n(last_n: Any) -> None:
    """``SessionParameterValidationError`` unless ``last_n`` is None or an int >= 1."""
    if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
        raise SessionParameterValidationError(f"last_n must be an int >= 1 or None, got {last_n!r}")


def _check_dataset_id(dataset_id: Any) -> uuid.UUID | None:
    if dataset_id is not None and not isinstance(dataset_id, uuid.UUID):
        raise SessionParameterValidationError(f"dataset_id must be a uuid.UUID or None, got {dataset_id!r}")
    return dataset_id


def trace_entry(entry: Any) -> SessionAgentTraceEntry:
    """``entry`` as a trace step: a :class:`~memlab.models.SessionAgentTraceEntry` as is, a mapping validated;
    anything else, or an invalid mapping, raises ``SessionParameterValidationError``."""
    if isinstance(entry, SessionAgentTraceEntry):
        return entry
    if not isinstance(entry, Mapping):
        raise SessionParameterValidationError(f"entry must be a SessionAgentTraceEntry or a mapping, got {type(entry).__name__} {entry!r}"[:400])
    try:
        return SessionAgentTraceEntry.model_validate(dict(entry))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']} (got {error.get('input')!r})"[:300] for error in exc.errors()
        )
        raise SessionParameterValidationError(f"invalid trace entry: {problems}"[:600]) from None


def trace_entries(rows: Iterable[Mapping[str, Any]]) -> list[SessionAgentTraceEntry]:
    """The trace steps among session-context rows (``kind == "trace"``), in order; invalid rows are logged and skipped."""
    found = []
    for row in rows:
        if row.get("kind") != "trace":
            continue
        try:
            found.append(SessionAgentTraceEntry.model_validate(row))
        except pydantic.ValidationError as exc:
            logger.warning("skipping an unreadable trace row %r: %s", row.get("id"), exc.errors()[0]["msg"])
    return found


class SessionManager:
    """Session reads and writes for one cache backend (or None: caching off)."""

    def __init__(
        self,
        cache: CacheBackend | None,
        *,
        default_session_id: str = "default_session",
        dataset_id: uuid.UUID | None = None,
        index_capacity: int = 256,
        lifecycle: Lifecycle | None = None,
        clock: Clock | None = None,
        activity: ActivityRecorder | None = None,
        retriever: SessionRetriever[Any] | None = None,
        reranker: SessionReranker | None = None,
    ) -> None:
        self.cache = cache
        #: how :meth:`search` ranks a session's turns (default: ``keyword``, cognee's rule)
        self.retriever: SessionRetriever[Any] = retriever if retriever is not None else KeywordSessionRetriever()
        #: what reorders the top of that ranking (None, the default: nothing)
        self.reranker: SessionReranker | None = reranker
        self._lifecycle = lifecycle
        self._activity = activity
        self._activity_warned = False
        #: this manager's session guidance (load, serve, update, score)
        self._clock: Clock = clock or (cache.clock if cache is not None else SystemClock())
        self.guidance = Guidance(self, self._clock)
        self.default_session_id = default_session_id
        self.dataset_id = _check_dataset_id(dataset_id)
        self._indexes: OrderedDict[tuple[str, str], SessionIndex] = OrderedDict()
        self._index_capacity = index_capacity
        #: (user, session) pairs given as plain str that passed the id check (the check depends on the text alone)
        self._checked: set[tuple[str, str]] = set()
        self._turn_locks: weakref.WeakValueDictionary[tuple[int, str, str], asyncio.Lock] = weakref.WeakValueDictionary()

    @property
    def available(self) -> bool:
        """True when a cache backend is configured (it may still be unreachable)."""
        return self.cache is not None

    def resolve_session_id(self, session_id: str | None = None, dataset_id: uuid.UUID | None = None) -> str:
        """``session_id`` verbatim; else ``default_session_<dataset_id>``; else ``default_session``."""
        session_id = _check_id("session_id", session_id)
        if session_id is not None:
            return session_id
        dataset_id = _check_dataset_id(dataset_id) or self.dataset_id
        return f"{self.default_session_id}_{dataset_id}" if dataset_id else self.default_session_id

    def _ids(self, user_id: Any, session_id: str | None, dataset_id: uuid.UUID | None = None) -> tuple[str, str]:
        if type(user_id) is str and type(session_id) is str and (user_id, session_id) in self._checked:
            return user_id, session_id  # checked already: a turn's calls check its ids once, not at every call
        user = _check_id("user_id", user_id)
        if user is None:
            raise SessionParameterValidationError("user_id is required")
        ids = user, self.resolve_session_id(session_id, dataset_id)
        if type(user_id) is str and type(session_id) is str:
            if len(self._checked) >= _CHECKED_IDS:
                self._checked.clear()
            self._checked.add(ids)
        return ids

    async def _fail_open(self, op: str, default: T, fn: Callable[[CacheBackend], Awaitable[T]]) -> T:
        self._require_open()
        if self.cache is None:
            return default
        try:
            await self.cache.open()
            return await fn(self.cache)
        except BackendError as exc:
            logger.warning("session %s failed open (returning %r): %s", op, default, exc)
            return default

    async def _record(
        self, user: str, session: str, dataset_id: uuid.UUID | None, read: Sequence[uuid.UUID] = (), *, only_new: bool = False
    ) -> bool:
        """Report a stored write to the activity recorder; a failure is logged once, never raised.

        False only when ``only_new`` let the recorder skip it (see :class:`ActivityRecorder`).
        """
        if self._activity is None:
            return True
        try:
            if only_new:
                return await self._activity(user, session, dataset_id, read=read, only_new=True) is not False
            await self._activity(user, session, dataset_id, read=read)
        except Exception as exc:  # the write is stored; only its record is missing
            if not self._activity_warned:
                self._activity_warned = True
                logger.warning("session activity of %r could not be recorded (further failures are not logged): %s: %s", session, type(exc).__name__, exc)
        return True

    def _local_lock(self, user: str, session: str) -> asyncio.Lock:
        """The in-process turn lock of (user, session) on the running event loop."""
        key = (id(asyncio.get_running_loop()), user, session)
        found = self._turn_locks.get(key)
        if found is None:
            found = self._turn_locks[key] = asyncio.Lock()
        return found

    @contextlib.asynccontextmanager
    async def turn_lock(self, user_id: Any, session_id: str, *, timeout: float = TURN_LOCK_TIMEOUT_SECONDS) -> AsyncIterator[None]:
        """Hold the session's turn lock: in this process, then across processes.

        In this process an ``asyncio.Lock`` per (event loop, user, session) (so turns
        sent to one session at once run one after the other, none lost); across
        processes the cache backend's :meth:`~memlab.cache.CacheBackend.turn_lock`:
        another process's holder makes this wait at most ``timeout`` s, then
        :class:`~memlab.exceptions.SessionLockTimeout`. A turn holds it from reading the
        history to storing itself; the delete cleaner (:mod:`memlab.provenance`) holds it
        while it cleans the session. Caching off: the in-process lock only. A cache that
        cannot be reached fails open: the holder runs unlocked across processes (its
        writes fail open too) and a warning is logged.
        """
        user, session = self._ids(user_id, session_id)
        async with self._local_lock(user, session), contextlib.AsyncExitStack() as held:
            if self.cache is not None:
                try:
                    await self.cache.open()
                    await held.enter_async_context(self.cache.turn_lock(user, session, timeout=timeout))
                except SessionLockTimeout:
                    raise
                except BackendError as exc:
                    logger.warning("session turn lock of %r failed open (the turn runs unlocked): %s", session, exc)
            yield

    async def record_activity(
        self, user_id: Any, session_id: str | None, dataset_id: uuid.UUID | None = None, *, read: Sequence[uuid.UUID] = (),
        only_new: bool = False,
    ) -> bool:
        """Report a turn of (user, session) that reads the datasets ``read`` to the activity recorder, now.

        A turn calls it before it reads permanent memory: a delete lists the sessions to
        clean from these records (the session's dataset and every dataset it read; see
        :mod:`memlab.provenance`). Caching off: nothing (no turn is stored). A recorder
        failure is logged, never raised. ``only_new``: when the recorder already holds the
        session and those reads, nothing is written and False is returned (the caller then
        records the activity itself later: a turn does, in its usage write); True otherwise.
        """
        user, session = self._ids(user_id, session_id, dataset_id)
        if self.cache is None:
            return True
        return await self._record(user, session, _check_dataset_id(dataset_id) or self.dataset_id, read, only_new=only_new)

    def _require_open(self) -> None:
        """``StackStateError`` when this manager belongs to a stack that is not open."""
        if self._lifecycle is not None:
            self._lifecycle.require_open()

    # -- QA turns ------------------------------------------------------------------

    async def add_qa(
        self,
        user_id: Any,
        question: str,
        answer: str,
        *,
        context: str = "",
        session_id: str | None = None,
        dataset_id: uuid.UUID | None = None,
        used_graph_element_ids: dict[str, list[str]] | None = None,
        used_session_context_ids: list[str] | None = None,
        memify_metadata: dict[str, Any] | None = None,
        record_activity: bool = True,
    ) -> str | None:
        """Store one turn; returns its ``qa_id`` (None when the cache is unavailable).

        ``dataset_id`` names the dataset the turn answered from (it also resolves an
        omitted ``session_id`` to that dataset's default session); it is recorded as
        the session's dataset when the session has none yet. ``record_activity=False``:
        the caller already called :meth:`record_activity` for this turn (a search turn
        does, before it retrieves).
        """
        user, session = self._ids(user_id, session_id, dataset_id)
        for name, value in (("question", question), ("answer", answer), ("context", context)):
            check_text(name, value, error=SessionQAEntryValidationError)

        async def write(cache: CacheBackend) -> str | None:
            entry = await cache.create_qa_entry(
                user,
                session,
                question=question,
                context=context,
                answer=answer,
                used_graph_element_ids=used_graph_element_ids,
                used_session_context_ids=used_session_context_ids,
                memify_metadata=memify_metadata,
            )
            return entry.qa_id  # the cache always assigns one

        qa_id = await self._fail_open("add_qa", None, write)
        if qa_id is not None and record_activity:
            await self._record(user, session, _check_dataset_id(dataset_id) or self.dataset_id)
        return qa_id

    @overload
    async def get_session(
        self,
        user_id: Any,
        last_n: int | None = None,
        formatted: Literal[False] = False,
        session_id: str | None = None,
        include_context: bool = True,
        dataset_id: uuid.UUID | None = None,
    ) -> list[SessionQAEntry]: ...

    @overload
    async def get_session(
        self,
        user_id: Any,
        last_n: int | None = None,
        *,
        formatted: Literal[True],
        session_id: str | None = None,
        include_context: bool = True,
        dataset_id: uuid.UUID | None = None,
    ) -> str: ...

    async def get_session(
        self,
        user_id: Any,
        last_n: int | None = None,
        formatted: bool = False,
        session_id: str | None = None,
        include_context: bool = True,
        dataset_id: uuid.UUID | None = None,
    ) -> list[SessionQAEntry] | str:
        """The session's turns, oldest first (the last ``last_n`` when given), or their formatted text."""
        check_last_n(last_n)
        user, session = self._ids(user_id, session_id, dataset_id)
        no_entries: list[SessionQAEntry] = []
        entries = await self._fail_open("get_session", no_entries, lambda cache: cache.get_latest_qa_entries(user, session, last_n))
        if formatted:
            return self.format_entries(entries, include_context=include_context)
        return entries

    async def get_history(self, user_id: Any, session_id: str | None = None, dataset_id: uuid.UUID | None = None) -> str:
        """The LLM's conversation history: the last 10 turns, formatted without CONTEXT lines."""
        return await self.get_session(
            user_id, last_n=HISTORY_LAST_N, formatted=True, session_id=session_id, include_context=False, dataset_id=dataset_id
        )

    @staticmethod
    def format_entries(entries: Iterable[SessionQAEntry | Mapping[str, Any]], include_context: bool = True) -> str:
        """Render turns as the "Previous conversation" prompt block; ``""`` for no turns."""
        parts = []
        for entry in entries:
            row = entry.model_dump() if isinstance(entry, SessionQAEntry) else dict(entry)
            block = f"[{row.get('time') or 'Unknown time'}]\nQUESTION: {row.get('question') or ''}\n"
            if include_context:
                block += f"CONTEXT: {row.get('context') or ''}\n"
            block += f"ANSWER: {row.get('answer') or ''}\n\n"
            parts.append(block)
        return "Previous conversation:\n\n" + "".join(parts) if parts else ""

    async def update_qa(self, user_id: Any, qa_id: str, session_id: str | None = None, **fields: Any) -> bool:
        """Partial update of a turn (None keeps a field). False when absent or the cache is unavailable."""
        qa = _id("qa_id", qa_id)
        user, session = self._ids(user_id, session_id)
        return await self._fail_open("update_qa", False, lambda cache: cache.update_qa_entry(user, session, qa, **fields))

    async def add_feedback(
        self,
        user_id: Any,
        qa_id: str,
        feedback_text: str | None = None,
        feedback_score: int | None = None,
        session_id: str | None = None,
    ) -> bool:
        """Attach feedback to a turn and mark its feedback weights unapplied.

        A score outside 1..5 raises ``SessionQAEntryValidationError``; an unknown
        ``qa_id`` returns False.
        """
        check_text("feedback_text", feedback_text, error=SessionQAEntryValidationError, optional=True)
        if feedback_score is not None and (isinstance(feedback_score, bool) or feedback_score not in range(1, 6)):
            raise SessionQAEntryValidationError(f"feedback_score must be an integer from 1 to 5, got {feedback_score!r}")
        return await self.update_qa(
            user_id,
            qa_id,
            session_id=session_id,
            feedback_text=feedback_text,
            feedback_score=feedback_score,
            memify_metadata={"feedback_weights_applied": False},
        )

    async def delete_feedback(self, user_id: Any, qa_id: str, session_id: str | None = None) -> bool:
        """Clear a turn's feedback; True whenever the turn exists."""
        qa = _id("qa_id", qa_id)
        user, session = self._ids(user_id, session_id)
        return await self._fail_open("delete_feedback", False, lambda cache: cache.delete_feedback(user, session, qa))

    async def delete_qa(self, user_id: Any, qa_id: str, session_id: str | None = None) -> bool:
        qa = _id("qa_id", qa_id)
        user, session = self._ids(user_id, session_id)
        return await self._fail_open("delete_qa", False, lambda cache: cache.delete_qa_entry(user, session, qa))

    async def delete_session(self, user_id: Any, session_id: str | None = None) -> bool:
        user, session = self._ids(user_id, session_id)
        return await self._fail_open("delete_session", False, lambda cache: cache.delete_session(user, session))

    # -- session context -------------------------------------------------------------

    async def add_context_entry(
        self,
        user_id: Any,
        entry: SessionContextEntry | SessionFeedbackEntry | Mapping[str, Any],
        session_id: str | None = None,
    ) -> str | None:
        """Upsert a guidance/feedback entry by id; returns the id (None when unavailable)."""
        user, session = self._ids(user_id, session_id)
        payload = entry.model_dump(mode="json") if isinstance(entry, pydantic.BaseModel) else dict(entry)
        stored = await self._fail_open(
            "add_context_entry", None, lambda cache: cache.create_session_context_entry(user, session, payload)
        )
        if stored is not None:
            await self._record(user, session, None)
        return stored

    async def get_context_entries(self, user_id: Any, session_id: str | None = None, *, raise_on_error: bool = False) -> list[dict]:
        """Every live context row (all kinds), first-insert order."""
        user, session = self._ids(user_id, session_id)
        if raise_on_error and self.cache is not None:
            self._require_open()
            await self.cache.open()
            return await self.cache.get_session_context_entries(user, session)
        return await self._fail_open("get_context_entries", [], lambda cache: cache.get_session_context_entries(user, session))

    async def update_context_entry(self, user_id: Any, entry_id: str, changes: Mapping[str, Any], session_id: str | None = None) -> bool:
        entry = _id("entry_id", entry_id)
        user, session = self._ids(user_id, session_id)
        return await self._fail_open(
            "update_context_entry", False, lambda cache: cache.update_session_context_entry(user, session, entry, dict(changes))
        )

    async def delete_context_entry(self, user_id: Any, entry_id: str, session_id: str | None = None) -> bool:
        entry = _id("entry_id", entry_id)
        user, session = self._ids(user_id, session_id)
        return await self._fail_open(
            "delete_context_entry", False, lambda cache: cache.delete_session_context_entry(user, session, entry)
        )

    # -- agent traces ------------------------------------------------------------------

    async def add_trace(
        self, user_id: Any, session_id: str | None, entry: SessionAgentTraceEntry | Mapping[str, Any]
    ) -> str | None:
        """Store one agent trace step; returns its ``trace_id`` (None when the cache is unavailable).

        The step is a session-context row of ``kind="trace"`` (id ``"trace:" + trace_id``):
        it lives under the session's TTL on every backend, a write slides the session's
        context rows, and adding a ``trace_id`` again replaces the step in place.
        ``created_at`` is stamped now unless given; ``updated_at`` is now. A mapping is
        validated as :class:`~memlab.models.SessionAgentTraceEntry`; an invalid one raises
        ``SessionParameterValidationError`` naming the field, before any I/O.
        """
        user, session = self._ids(user_id, session_id)
        step = trace_entry(entry)
        now = self._clock.now().isoformat()
        step = step.model_copy(update={"created_at": step.created_at or now, "updated_at": now})
        payload = step.as_row()
        stored = await self._fail_open("add_trace", None, lambda cache: cache.create_session_context_entry(user, session, payload))
        if stored is None:
            return None
        await self._record(user, session, None)
        return step.trace_id

    async def get_traces(self, user_id: Any, session_id: str | None = None) -> list[SessionAgentTraceEntry]:
        """The session's trace steps in the order first stored; ``[]`` when none or the cache is unavailable (invalid rows skipped)."""
        return trace_entries(await self.get_context_entries(user_id, session_id=session_id))

    # -- session recall ----------------------------------------------------------------

    async def search(self, user_id: Any, query: str, session_id: str | None = None, top_k: int = 15) -> list[tuple[SessionQAEntry, float]]:
        """Recall over the session's turns: ``(turn, score)``, best first, ties oldest first.

        Ranked by :attr:`retriever` (SPEC §9.2 for the default ``keyword``, whose
        score is the matched token count); see :mod:`memlab.session.retrievers`. With a
        :attr:`reranker`, the retriever's best ``reranker.candidates(top_k)`` turns are
        reranked and the reranker's top ``top_k`` returned, with its scores
        (:mod:`memlab.session.rerankers`).
        The retriever's index of the session is brought up to date from the cache's
        change feed first, so turns another process wrote are seen.
        """
        user, session = self._ids(user_id, session_id)
        check_text("query", query)

        async def run(cache: CacheBackend) -> list[tuple[SessionQAEntry, float]]:
            index = self._index_for(user, session)
            while True:  # another coroutine may refresh the index while we wait
                base = index.cursor
                log = await cache.read_qa_log(user, session, base)
                if index.cursor == base:
                    index.apply(log)
                    if self.reranker is None:
                        return await self.retriever.search(index, query, top_k)
                    hits = await self.retriever.search(index, query, self.reranker.candidates(top_k))
                    return await self.reranker.rerank(query, hits, top_k)

        return await self._fail_open("search", [], run)

    def _index_for(self, user: str, session: str) -> SessionIndex:
        key = (user, session)
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = self.retriever.new_index()
            if len(self._indexes) > self._index_capacity:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return index
