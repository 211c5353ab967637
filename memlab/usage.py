"""``stack.usage``: what sessions cost, read with the seed's visibility rules; and the recorder that writes it.

Recording (:class:`UsageRecorder`): every session-scoped operation (a ``search()``
turn with its analysis, a ``recall()`` completion, a distillation) runs inside a
usage meter (:func:`memlab.llm.metering`); afterwards its calls (model, kind, tokens,
where the figures came from, cost from litellm's cost map or None when unpriced)
are added to the session's ``session_records`` row and its ``session_model_usage``
rows in one transaction. A write that fails never fails the operation: it is
logged and counted (:attr:`UsageRecorder.failures`). ``MEMLAB_USAGE_TRACKING=false``
turns recording off, and so does ``CACHING=false`` (the seed: tracking depends on
caching). After ``stack.session.end()`` nothing moves: a later turn is still answered
and stored, and its usage is reported in one place, the turn's record
(``raw["turn"]["usage"] == "post_end"``, stored as ``turn_usage``), with its tokens
beside it; the session's record, per-model rows, ``stats`` and ``cost_by_model``
leave it out alike. Each metered block's :class:`Metered` says what happened:
``recorded``, ``post_end``, ``off``, ``failed`` or ``none`` (no calls).

Reading (:class:`UsageAPI`): a caller sees its own sessions, those of its agent users
(``parent_user_id`` = the caller) and those attributed to a dataset it may read,
nothing else, in lists and aggregates alike. ``abandoned`` is computed at read time:
a ``running`` session whose ``last_activity_at`` is older than the smaller of
``SESSION_ABANDON_AFTER_SECONDS`` and the cache's TTL (``SESSION_TTL_SECONDS``, when
entries expire: a session idle that long has no live turns left), strict ``<``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any, AsyncIterator

from memlab._clock import Clock
from memlab.exceptions import ValidationError
from memlab.models import ModelCost, ModelUsage, SessionPage, SessionUsage, UsageStats, User
from memlab.relational import SESSION_ORDER_COLUMNS, SESSION_STATUSES, RelationalStore
from memlab.users import Users
from memlab.validation import check_flag, check_id

if TYPE_CHECKING:
    from memlab.llm import CallUsage

__all__ = ["OUTCOMES", "RANGES", "SESSION_ORDER_COLUMNS", "STATUSES", "Metered", "UsageAPI", "UsageRecorder"]

logger = logging.getLogger("memlab.usage")

#: ``range`` values of stats / cost_by_model and the span each covers (None: everything)
RANGES: dict[str, timedelta | None] = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30), "all": None}
#: effective statuses a session list may be filtered by (the order of ``stats``' per-status counts)
STATUSES = SESSION_STATUSES
#: at most this many sessions per page
MAX_LIMIT = 1000
#: the largest offset (what SQLite and PostgreSQL take as an integer parameter, and more sessions than anyone keeps)
MAX_OFFSET = 2**31 - 1


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ValidationError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _whole(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise ValidationError(f"{name} must be a whole number {bound}, got {value!r}")
    return value


def _check_listing(status: Any, order_by: Any, descending: Any, limit: Any, offset: Any) -> None:
    if status is not None:
        _choice("status", status, STATUSES)
    _choice("order_by", order_by, SESSION_ORDER_COLUMNS)
    check_flag("descending", descending)
    _whole("limit", limit, 1, MAX_LIMIT)
    _whole("offset", offset, 0, MAX_OFFSET)


class Metered:
    """The outcome of one metered block (set when the block has ended): see :data:`OUTCOMES`."""

    def __init__(self) -> None:
        self.outcome = "none"


#: what a metered block's usage became
OUTCOMES = ("recorded", "post_end", "off", "failed", "none")


class UsageRecorder:
    """Adds metered calls to ``session_records`` / ``session_model_usage``; never raises into the caller."""

    def __init__(self, store: RelationalStore, *, enabled: bool = True) -> None:
        self.store = store
        self.enabled = enabled
        #: usage writes that failed (each was logged)
        self.failures = 0

    @asynccontextmanager
    async def metered(self, user_id: Any, session_id: str, dataset_id: uuid.UUID | None) -> AsyncIterator[Metered]:
        """Meter the block's LLM and embedding calls and record them for the session, also when the block raises.

        The yielded :class:`Metered` holds the outcome once the block has ended.
        """
        metered = Metered()
        if not self.enabled:
            metered.outcome = "off"
            yield metered
            return
        from memlab.llm import metering

        with metering() as meter:
            try:
                yield metered
            finally:
                metered.outcome = await self.record(user_id, session_id, dataset_id, meter.calls)

    async def record(self, user_id: Any, session_id: str, dataset_id: uuid.UUID | None, calls: Sequence["CallUsage"]) -> str:
        """Record ``calls`` for (user, session) and say what happened (:data:`OUTCOMES`); a user id that is not a memlab user's is ``off``."""
        if not self.enabled:
            return "off"
        if not calls:
            return "none"
        try:
            user = uuid.UUID(str(user_id))
        except ValueError:
            return "off"
        try:
            return "recorded" if await self.store.usage.record(user, session_id, dataset_id, calls) else "post_end"
        except Exception as exc:  # usage must never fail the answer it describes
            self.failures += 1
            logger.warning("usage of session %r could not be recorded (%d failure(s) so far): %s: %s", session_id, self.failures, type(exc).__name__, exc)
            return "failed"


class UsageAPI:
    """``stack.usage``: sessions, their usage and cost, as the caller may see them (see the module docstring)."""

    def __init__(
        self,
        store: RelationalStore,
        users: Users,
        clock: Clock,
        *,
        abandon_after_seconds: float,
        recorder: UsageRecorder,
        expire_after_seconds: float | None = None,
    ) -> None:
        self._store = store
        self._users = users
        self._clock = clock
        self.abandon_after_seconds = abandon_after_seconds
        #: the cache's TTL (None: entries never expire); a session idle that long is abandoned too
        self.expire_after_seconds = expire_after_seconds
        self.recorder = recorder

    @property
    def idle_limit_seconds(self) -> float:
        """How long a ``running`` session may be idle before it reads as ``abandoned``: min(abandon window, TTL)."""
        if self.expire_after_seconds is None:
            return self.abandon_after_seconds
        return min(self.abandon_after_seconds, self.expire_after_seconds)

    def _cutoff(self) -> str:
        return (self._clock.now() - timedelta(seconds=self.idle_limit_seconds)).isoformat()

    def _since(self, range: Any) -> str:
        span = RANGES[_choice("range", range, tuple(RANGES))]
        return "" if span is None else (self._clock.now() - span).isoformat()

    async def list_sessions(
        self,
        user: Any = None,
        *,
        status: str | None = None,
        order_by: str = "last_activity_at",
        descending: bool = True,
        limit: int = 50,
        offset: int = 0,
    ) -> SessionPage:
        """A page of the sessions the caller may see, ordered by ``order_by`` (ties by session id).

        ``status`` filters by effective status (``running`` | ``completed`` | ``failed`` |
        ``abandoned``); ``order_by`` one of :data:`SESSION_ORDER_COLUMNS`; ``limit``
        1..1000; ``offset`` 0..2**31-1. ``has_more`` is ``offset + len(items) < total``.
        """
        _check_listing(status, order_by, descending, limit, offset)
        return await self._page(await self._users.resolve(user), status, order_by, descending, limit, offset)

    async def list_sessions_for(
        self, caller: User, *, status: str | None = None, order_by: str = "last_activity_at", descending: bool = True, limit: int = 50, offset: int = 0
    ) -> SessionPage:
        """:meth:`list_sessions` for ``caller``, a :class:`~memlab.models.User` this stack has just read from its store.

        For servers that authenticate a request first (``stack.users.user_for_api_key``
        reads the key's user and its parent, all the visibility rule uses): the caller is
        not read again. A hand-built ``User`` is trusted as it is: pass ``user=`` to
        :meth:`list_sessions` instead. The same holds for :meth:`get_for`,
        :meth:`stats_for` and :meth:`cost_by_model_for`.
        """
        _check_listing(status, order_by, descending, limit, offset)
        return await self._page(caller, status, order_by, descending, limit, offset)

    async def _page(self, caller: User, status: str | None, order_by: str, descending: bool, limit: int, offset: int) -> SessionPage:
        items, total = await self._store.usage.page(
            caller, status=status, order_by=order_by, descending=descending, limit=limit, offset=offset, cutoff=self._cutoff()
        )
        return SessionPage(items=items, total=total, has_more=offset + len(items) < total, limit=limit, offset=offset)

    async def get(self, session_id: str, user: Any = None) -> SessionUsage | None:
        """The session with its per-model usage, or None when it is unknown or not visible to the caller.

        Several visible sessions may share an id (the caller's, an agent's): the
        caller's own comes first, then the most recently active.
        """
        check_id("session_id", session_id)
        return await self._store.usage.get(await self._users.resolve(user), session_id, self._cutoff())

    async def get_for(self, caller: User, session_id: str) -> SessionUsage | None:
        """:meth:`get` for a ``caller`` this stack has just read from its store (see :meth:`list_sessions_for`)."""
        check_id("session_id", session_id)
        return await self._store.usage.get(caller, session_id, self._cutoff())

    async def models(self, session: SessionUsage) -> list[ModelUsage]:
        """The per-model usage of a session this API returned (its ``session_id`` and ``user_id``)."""
        return await self._store.usage.models(session.session_id, session.user_id)

    async def stats(self, range: str = "30d", user: Any = None) -> UsageStats:
        """Totals over the visible sessions active in ``range`` (``24h`` | ``7d`` | ``30d`` | ``all``)."""
        since = self._since(range)  # a bad range fails before the user is looked up
        return await self._stats(await self._users.resolve(user), range, since)

    async def stats_for(self, caller: User, range: str = "30d") -> UsageStats:
        """:meth:`stats` for a ``caller`` this stack has just read from its store (see :meth:`list_sessions_for`)."""
        return await self._stats(caller, range, self._since(range))

    async def _stats(self, caller: User, range: str, since: str) -> UsageStats:
        row = await self._store.usage.stats(caller, since, self._cutoff())
        sessions, tokens_in, tokens_out, cost, unpriced_in, unpriced_out, embedding, embedding_cost, unpriced_embedding, errors, *by_status = row
        return UsageStats(
            range=range,
            sessions=sessions,
            by_status={status: int(count or 0) for status, count in zip(STATUSES, by_status)},
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=float(cost),
            unpriced_tokens_in=unpriced_in,
            unpriced_tokens_out=unpriced_out,
            embedding_tokens=embedding,
            embedding_cost_usd=float(embedding_cost),
            unpriced_embedding_tokens=unpriced_embedding,
            error_count=errors,
        )

    async def cost_by_model(self, range: str = "30d", user: Any = None) -> list[ModelCost]:
        """One row per (model, kind) over the visible sessions active in ``range``; ``cost_usd`` None when none of its calls was priced."""
        since = self._since(range)  # a bad range fails before the user is looked up
        return await self._costs(await self._users.resolve(user), since)

    async def cost_by_model_for(self, caller: User, range: str = "30d") -> list[ModelCost]:
        """:meth:`cost_by_model` for a ``caller`` this stack has just read from its store (see :meth:`list_sessions_for`)."""
        return await self._costs(caller, self._since(range))

    async def _costs(self, caller: User, since: str) -> list[ModelCost]:
        rows = await self._store.usage.cost_by_model(caller, since, self._cutoff())
        return [
            ModelCost(
                model=model,
                kind=kind,
                sessions=sessions,
                calls=calls,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=float(cost),
                unpriced_tokens_in=unpriced_in,
                unpriced_tokens_out=unpriced_out,
            )
            for model, kind, sessions, calls, tokens_in, tokens_out, cost, unpriced_in, unpriced_out in rows
        ]
