"""The cache backend contract.

A :class:`CacheBackend` stores, per ``(user_id, session_id)``, an ordered list of
QA turns and a keyed list of session-context entries (guidance, feedback and
watermark rows, stored as JSON objects with an ``"id"``). Every backend behaves
the same under :class:`memlab.testing.CacheBackendSuite`:

* **Order.** QA turns come back in append order (oldest first); context entries in
  first-insert order. An upsert of an existing context id keeps its position.
* **Identity.** ``(user_id, session_id)`` is the session: the same session id under
  two users is two sessions. A ``qa_id`` is unique within its session.
* **TTL.** Each session keeps one expiry per kind (``qa``, ``context``). Writes
  stamp it as the :class:`~memlab.ttl.TTLPolicy` says, so expiry counts from the
  session's last write of that kind; reads never move it. Once ``now >=
  expires_at`` the kind reads as empty, and the next write to it first purges the
  dead rows (scoped purge). :meth:`sweep` physically removes every dead row; it
  runs after writes at most once per ``purge_interval_seconds`` (the first write
  of an instance always sweeps; ``<= 0`` disables it).
* **Writes that slide** the expiry of their kind: create/update/delete-feedback of a
  QA turn, deleting a QA turn that existed, creating/updating a context entry.
  Deleting a context entry or a session does not.
* **Atomicity.** Each public method is one atomic change: a concurrent reader sees
  the state before or after it, never half of it, and a failed write changes nothing.
* **Errors.** Invalid arguments raise :class:`~memlab.exceptions.ValidationError`
  before any I/O. Any store failure raises :class:`~memlab.exceptions.CacheConnectionError`
  with the driver error chained. A stored row that cannot be parsed is skipped with
  a warning; the rest is served.

Implementations provide the underscore primitives, which take and return JSON
payload strings and receive ``now`` from the backend's clock; this class does
id assignment, validation, (de)serialisation, merging, error mapping and sweep
throttling.
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Optional

import pydantic
import pydantic_core

from memlab._clock import Clock, SystemClock
from memlab.exceptions import (
    CacheConnectionError,
    MemlabError,
    SessionParameterValidationError,
    SessionQAEntryValidationError,
)
from memlab.models import SessionQAEntry
from memlab.ttl import SlidingTTL, TTLPolicy
from memlab.validation import check_id, check_text, is_encodable

logger = logging.getLogger("memlab.cache")

#: Maps a stored payload to its replacement, or to None to leave it unchanged.
PayloadChange = Callable[[str], Optional[str]]

#: the seeds' default session TTL: 7 days
DEFAULT_TTL_SECONDS = 604800

_QA_FIELDS = (
    "question",
    "context",
    "answer",
    "feedback_text",
    "feedback_score",
    "used_graph_element_ids",
    "memify_metadata",
    "used_session_context_ids",
)


_QA_LIST = pydantic.TypeAdapter(list[SessionQAEntry])


@dataclass(frozen=True)
class QALog:
    """Change feed of a session's QA turns, for incremental indexes.

    ``reset`` True: ``entries`` is the whole live session and any earlier state
    must be dropped. ``reset`` False: ``entries`` were appended after ``cursor``'s
    predecessor. Pass ``cursor`` back to get only later changes.
    """

    cursor: Hashable
    entries: list[SessionQAEntry]
    reset: bool


def config_options(config: Any, clock: Clock | None, ttl: TTLPolicy | None) -> dict[str, Any]:
    """The constructor options every backend's ``from_config`` passes: ``ttl``, ``clock``, ``purge_interval_seconds``."""
    if ttl is None:
        from memlab.config import build_ttl_policy

        ttl = build_ttl_policy(config)
    return {"ttl": ttl, "clock": clock, "purge_interval_seconds": config.cache.purge_interval_seconds}


class CacheBackend(abc.ABC):
    """Session cache backend. See the module docstring for the full contract."""

    #: configuration name (``CACHE_BACKEND``)
    name: str = ""
    #: TTL policy chosen when the config says ``auto``
    default_ttl_policy: ClassVar[str] = "sliding"

    def __init__(
        self,
        *,
        ttl: TTLPolicy | None = None,
        clock: Clock | None = None,
        purge_interval_seconds: float = 900.0,
    ) -> None:
        self.ttl = ttl if ttl is not None else SlidingTTL(DEFAULT_TTL_SECONDS)
        self.clock = clock if clock is not None else SystemClock()
        self.purge_interval_seconds = purge_interval_seconds
        self._last_sweep: float | None = None
        self._opened = False

    @classmethod
    def from_config(cls, config: Any, *, clock: Clock | None = None, ttl: TTLPolicy | None = None) -> "CacheBackend":
        """This backend as a :class:`~memlab.config.StackConfig` describes it (``CACHE_BACKEND=<name>``).

        ``clock`` and ``ttl`` are the stack's collaborators; ``ttl`` None builds the
        policy ``config.ttl`` names. A subclass whose constructor takes more
        (a URL, a directory) overrides this.
        """
        return cls(**config_options(config, clock, ttl))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(ttl={self.ttl.name}:{self.ttl.seconds})"

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        """Connect and create what is missing. Idempotent."""
        if not self._opened:
            await self._call("open", self._open)
            self._opened = True

    async def close(self) -> None:
        """Release connections. Idempotent; a closed backend may be opened again."""
        if self._opened:
            self._opened = False
            await self._call("close", self._close)

    async def __aenter__(self) -> "CacheBackend":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- QA turns ----------------------------------------------------------------

    async def create_qa_entry(
        self,
        user_id: str,
        session_id: str,
        *,
        question: str,
        answer: str,
        context: str = "",
        qa_id: str | None = None,
        feedback_text: str | None = None,
        feedback_score: int | None = None,
        used_graph_element_ids: dict[str, list[str]] | None = None,
        memify_metadata: dict[str, Any] | None = None,
        used_session_context_ids: list[str] | None = None,
    ) -> SessionQAEntry:
        """Append one turn; ``time`` is now and ``qa_id`` defaults to a fresh UUID."""
        _session(user_id, session_id)
        if qa_id is not None and qa_id != "":
            _check("qa_id", qa_id)
        for name, value in (("question", question), ("context", context), ("answer", answer), ("feedback_text", feedback_text)):
            check_text(name, value, error=SessionQAEntryValidationError, optional=name == "feedback_text")
        now = self.clock.now()
        entry = _validated_entry(
            time=now.isoformat(),
            question=question,
            context=context,
            answer=answer,
            qa_id=qa_id or _new_id(),
            feedback_text=feedback_text,
            feedback_score=feedback_score,
            used_graph_element_ids=used_graph_element_ids,
            memify_metadata=memify_metadata,
            used_session_context_ids=used_session_context_ids,
        )
        payload = _entry_json(entry)
        await self._call("create_qa_entry", self._append_qa, user_id, session_id, entry.qa_id, payload, now)
        await self._after_write()
        return entry

    async def get_latest_qa_entries(self, user_id: str, session_id: str, last_n: int | None = None) -> list[SessionQAEntry]:
        """The last ``last_n`` live turns (all when None), oldest first. ``last_n`` must be >= 1."""
        if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
            raise SessionParameterValidationError(f"last_n must be an int >= 1 or None, got {last_n!r}")
        _session(user_id, session_id)
        if last_n is not None and last_n > MAX_LAST_N:
            last_n = None  # more than any session holds: all of them (and no driver sees an out-of-range integer)
        payloads = await self._call("get_latest_qa_entries", self._read_qa, user_id, session_id, last_n, self.clock.now())
        return self._parse_qa(payloads)

    async def get_all_qa_entries(self, user_id: str, session_id: str) -> list[SessionQAEntry]:
        """Every live turn of the session, oldest first."""
        return await self.get_latest_qa_entries(user_id, session_id, None)

    async def read_qa_log(self, user_id: str, session_id: str, cursor: Hashable | None = None) -> QALog:
        """Turns changed since ``cursor`` (None: everything). See :class:`QALog`."""
        _session(user_id, session_id)
        new_cursor, payloads, reset = await self._call(
            "read_qa_log", self._read_qa_log, user_id, session_id, cursor, self.clock.now()
        )
        return QALog(new_cursor, self._parse_qa(payloads), reset)

    async def update_qa_entry(self, user_id: str, session_id: str, qa_id: str, **fields: Any) -> bool:
        """Partially update a turn: a field given as non-None overwrites, None keeps it.

        ``memify_metadata`` is shallow-merged into the stored dict. Returns False when
        the turn does not exist. Invalid values raise ``SessionQAEntryValidationError``
        and leave the stored turn unchanged.
        """
        _session(user_id, session_id)
        _check("qa_id", qa_id)
        unknown = set(fields) - set(_QA_FIELDS)
        if unknown:
            raise SessionQAEntryValidationError(f"unknown SessionQAEntry fields: {sorted(unknown)}")
        changes = {key: value for key, value in fields.items() if value is not None}
        for name in ("question", "context", "answer", "feedback_text"):
            if name in changes:
                check_text(name, changes[name], error=SessionQAEntryValidationError)
        _entry_json(_validated_entry(**{"time": "", "question": "", "context": "", "answer": "", **changes}))

        def change(payload: str) -> str | None:
            stored = json.loads(payload)
            merged = {**stored, **changes}
            if "memify_metadata" in changes and isinstance(stored.get("memify_metadata"), dict):
                merged["memify_metadata"] = {**stored["memify_metadata"], **changes["memify_metadata"]}
            return _entry_json(_validated_entry(**merged))

        changed = await self._call("update_qa_entry", self._modify_qa, user_id, session_id, qa_id, change, self.clock.now())
        return changed

    async def delete_feedback(self, user_id: str, session_id: str, qa_id: str) -> bool:
        """Clear ``feedback_text`` and ``feedback_score``; True whenever the turn exists."""
        _session(user_id, session_id)
        _check("qa_id", qa_id)

        def change(payload: str) -> str | None:
            stored = json.loads(payload)
            stored.pop("feedback_text", None)
            stored.pop("feedback_score", None)
            return json.dumps(stored)

        return await self._call("delete_feedback", self._modify_qa, user_id, session_id, qa_id, change, self.clock.now())

    async def delete_qa_entry(self, user_id: str, session_id: str, qa_id: str) -> bool:
        """Delete one turn; True if a live turn was deleted."""
        _session(user_id, session_id)
        _check("qa_id", qa_id)
        return await self._call("delete_qa_entry", self._delete_qa, user_id, session_id, qa_id, self.clock.now())

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        """Delete every turn and context entry of the session; True if any live one existed."""
        _session(user_id, session_id)
        return await self._call("delete_session", self._delete_session, user_id, session_id, self.clock.now())

    # -- session context -----------------------------------------------------------

    async def create_session_context_entry(self, user_id: str, session_id: str, entry: dict[str, Any]) -> str:
        """Upsert a context entry by its ``id`` (a fresh UUID when missing); returns the id."""
        _session(user_id, session_id)
        if not isinstance(entry, dict):
            raise SessionParameterValidationError(f"a session-context entry must be a dict, got {type(entry).__name__}")
        entry_id = _check("entry id", entry["id"]) if entry.get("id") else _new_id()
        payload = _context_payload({**entry, "id": entry_id})
        await self._call("create_session_context_entry", self._upsert_context, user_id, session_id, entry_id, payload, self.clock.now())
        await self._after_write()
        return entry_id

    async def get_session_context_entries(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """Live context entries, in first-insert order."""
        _session(user_id, session_id)
        payloads = await self._call("get_session_context_entries", self._read_context, user_id, session_id, self.clock.now())
        entries = []
        for payload in payloads:
            try:
                entries.append(json.loads(payload))
            except ValueError:
                logger.warning("skipping unreadable session-context row in %s cache", self.name)
        return entries

    async def update_session_context_entry(self, user_id: str, session_id: str, entry_id: str, changes: dict[str, Any]) -> bool:
        """Shallow-merge ``changes`` into the entry; False when it does not exist."""
        _session(user_id, session_id)
        _check("entry_id", entry_id)
        if not isinstance(changes, dict):
            raise SessionParameterValidationError(f"changes must be a dict, got {type(changes).__name__}")
        _context_payload(changes)

        def change(payload: str) -> str | None:
            return json.dumps({**json.loads(payload), **changes, "id": entry_id})

        return await self._call(
            "update_session_context_entry", self._modify_context, user_id, session_id, entry_id, change, self.clock.now()
        )

    async def delete_session_context_entry(self, user_id: str, session_id: str, entry_id: str) -> bool:
        """Delete one context entry; True if a live one was deleted. Does not slide TTL."""
        _session(user_id, session_id)
        _check("entry_id", entry_id)
        return await self._call(
            "delete_session_context_entry", self._delete_context, user_id, session_id, entry_id, self.clock.now()
        )

    # -- maintenance ---------------------------------------------------------------

    async def sweep(self) -> int:
        """Physically remove every expired row; returns how many rows went."""
        self._last_sweep = self.clock.monotonic()
        return await self._call("sweep", self._sweep, self.clock.now())

    async def prune(self) -> None:
        """Remove everything this backend stores (only memlab's own keys/tables)."""
        await self._call("prune", self._prune)

    def turn_lock(self, user_id: str, session_id: str, *, timeout: float) -> contextlib.AbstractAsyncContextManager[None]:
        """A lock on (user, session) that holds across processes, for one turn's read-analyse-write.

        Backends whose data lives in one process (``memory``) need none and return a
        no-op; the others lock where their data is shared (a queue of lock files, a
        PostgreSQL advisory lock, a Redis queue and key). Their guarantees:

        - **Exclusive**, also between two acquisitions in one process or one event loop.
        - **Fair**: waiters get the lock in the order they asked for it, so with N
          contenders none is passed by more than N-1 others (a releasing turn that asks
          again queues behind the waiters).
        - **A crashed holder frees the session within seconds**: at once on the file
          locks and PostgreSQL (the kernel or the server drops a dead process's lock),
          on Redis when its lock key expires (seconds; a heartbeat keeps it while a live
          turn runs, however long). A crashed waiter leaves the queue as quickly.
        - Waits at most ``timeout`` seconds, then raises
          :class:`~memlab.exceptions.SessionLockTimeout`, whose message says how long
          this caller waited, how many turns took the lock meanwhile (or that the
          backend cannot count them) and how long the current holder has held it.
        """
        _session(user_id, session_id)
        return contextlib.nullcontext()

    # -- internals -----------------------------------------------------------------

    async def _after_write(self) -> None:
        interval = self.purge_interval_seconds
        if interval is None or interval <= 0:
            return
        mono = self.clock.monotonic()
        if self._last_sweep is not None and mono - self._last_sweep < interval:
            return
        try:
            await self.sweep()
        except MemlabError as exc:
            logger.warning("%s cache sweep failed: %s", self.name, exc)

    async def _call(self, op: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return await fn(*args)
        except MemlabError:
            raise
        except Exception as exc:
            raise CacheConnectionError(f"{self.name} cache failed during {op}: {type(exc).__name__}: {exc}") from exc

    def _parse_qa(self, payloads: list[str] | list[bytes]) -> list[SessionQAEntry]:
        """The turns of stored JSON payloads (``str``, or UTF-8 ``bytes`` as a server sends them), one validation pass."""
        if not payloads:
            return []
        try:
            if isinstance(payloads[0], bytes):
                return _QA_LIST.validate_json(b"[" + b",".join(payloads) + b"]")
            return _QA_LIST.validate_json("[" + ",".join(payloads) + "]")
        except (pydantic.ValidationError, ValueError):
            pass  # at least one row is unreadable: parse one by one, skipping those
        entries = []
        for payload in payloads:
            try:
                entries.append(SessionQAEntry.model_validate_json(payload))
            except (pydantic.ValidationError, ValueError):
                logger.warning("skipping unreadable session QA row in %s cache", self.name)
        return entries

    # -- primitives ----------------------------------------------------------------

    async def _open(self) -> None:
        """Connect; create tables/directories. Called once per open()."""

    async def _close(self) -> None:
        """Release connections."""

    @abc.abstractmethod
    async def _append_qa(self, user_id: str, session_id: str, qa_id: str, payload: str, now: datetime) -> None:
        """Scoped purge if the QA kind is dead, append, restamp per policy. Atomic."""

    @abc.abstractmethod
    async def _read_qa(self, user_id: str, session_id: str, last_n: int | None, now: datetime) -> list[str] | list[bytes]:
        """Payloads of the last ``last_n`` (None: all) live turns, oldest first (``str``, or UTF-8 ``bytes`` as a server sent them)."""

    @abc.abstractmethod
    async def _read_qa_log(
        self, user_id: str, session_id: str, cursor: Hashable | None, now: datetime
    ) -> tuple[Hashable, list[str], bool]:
        """``(cursor, payloads, reset)`` as described by :class:`QALog`."""

    @abc.abstractmethod
    async def _modify_qa(self, user_id: str, session_id: str, qa_id: str, change: PayloadChange, now: datetime) -> bool:
        """Replace a live turn's payload with ``change(payload)``, atomically; slide TTL. False if absent."""

    @abc.abstractmethod
    async def _delete_qa(self, user_id: str, session_id: str, qa_id: str, now: datetime) -> bool:
        """Delete a live turn; slide TTL only when one was deleted."""

    @abc.abstractmethod
    async def _upsert_context(self, user_id: str, session_id: str, entry_id: str, payload: str, now: datetime) -> None:
        """Scoped purge if dead, insert or replace (keeping position), restamp."""

    @abc.abstractmethod
    async def _read_context(self, user_id: str, session_id: str, now: datetime) -> list[str]:
        """Payloads of live context entries in first-insert order."""

    @abc.abstractmethod
    async def _modify_context(self, user_id: str, session_id: str, entry_id: str, change: PayloadChange, now: datetime) -> bool:
        """Replace a live context entry with ``change(payload)``; slide TTL. False if absent."""

    @abc.abstractmethod
    async def _delete_context(self, user_id: str, session_id: str, entry_id: str, now: datetime) -> bool:
        """Delete a live context entry (no TTL slide)."""

    @abc.abstractmethod
    async def _delete_session(self, user_id: str, session_id: str, now: datetime) -> bool:
        """Delete both kinds; True if any live row existed."""

    @abc.abstractmethod
    async def _sweep(self, now: datetime) -> int:
        """Physically delete every dead row; return the count."""

    @abc.abstractmethod
    async def _prune(self) -> None:
        """Delete everything this backend stores."""


def _new_id() -> str:
    """A random UUID4 string, as ``str(uuid.uuid4())`` gives (same format and bits), ~4x faster.

    122 bits from ``os.urandom``; the version nibble is ``4`` and the variant
    bits are ``10``. ``uuid.uuid4()`` builds an int and a ``UUID`` object first,
    ~3-5 µs per append on the 2-core machine.
    """
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


#: the variant nibble: its top two bits forced to ``10``, its low two bits kept
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


#: a ``last_n`` above this reads the whole session (no backend holds more turns than that)
MAX_LAST_N = 2**31 - 1


def _check(name: str, value: Any) -> str:
    return check_id(name, value, error=SessionParameterValidationError)


def _session(user_id: Any, session_id: Any) -> None:
    """Both ids valid (see :mod:`memlab.validation`), before any I/O."""
    check_id("user_id", user_id, error=SessionParameterValidationError)
    check_id("session_id", session_id, error=SessionParameterValidationError)


def _context_payload(entry: dict[str, Any]) -> str:
    """The stored JSON of a context entry; a value JSON cannot hold, or a lone surrogate, is refused."""
    try:
        payload = json.dumps(entry, ensure_ascii=False)  # one pass; non-ASCII text is stored as itself
    except (TypeError, ValueError) as exc:
        raise SessionParameterValidationError(f"session-context entry is not JSON-serialisable: {exc}") from None
    if not is_encodable(payload):
        raise SessionParameterValidationError("session-context entry contains a lone surrogate and cannot be stored as UTF-8")
    return payload


def _entry_json(entry: SessionQAEntry) -> str:
    """The stored JSON of a turn (``None`` fields left out: compact rows parse ~2x faster)."""
    try:
        return entry.model_dump_json(exclude_none=True)
    except pydantic_core.PydanticSerializationError as exc:  # a lone surrogate in a list or metadata value
        raise SessionQAEntryValidationError(f"invalid session QA entry: it cannot be stored as UTF-8 JSON ({exc})") from None


def _validated_entry(**fields: Any) -> SessionQAEntry:
    try:
        return SessionQAEntry(**fields)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in exc.errors())
        raise SessionQAEntryValidationError(f"invalid session QA entry: {problems}") from None
