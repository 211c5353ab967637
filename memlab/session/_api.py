"""``stack.session``: the SDK-level session API (user resolution, dataset-scoped default session)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import SessionPreconditionError, ValidationError
from memlab.lifecycle import Lifecycle
from memlab.models import DistillResult, SessionAgentTraceEntry, SessionQAEntry
from memlab.session._manager import SessionManager, check_last_n, trace_entry
from memlab.users import Users


class SessionAPI:
    """Session history and feedback, as users call them (seed: "Reading Session History")."""

    def __init__(
        self,
        users: Users,
        datasets: Datasets,
        manager: SessionManager,
        lifecycle: Lifecycle,
        *,
        distiller: Callable[..., Awaitable[DistillResult]] | None = None,
        ender: Callable[[uuid.UUID, str, str], Awaitable[bool]] | None = None,
    ) -> None:
        self._users = users
        self._datasets = datasets
        self._manager = manager
        self._lifecycle = lifecycle
        #: ``distiller(session_id, dataset=..., user=..., max_batches=...)``: what :meth:`distill_session` runs
        self._distiller = distiller
        #: ``ender(user_id, session_id, status)``: what :meth:`end` runs (marks the session's record)
        self._ender = ender

    async def resolve(self, session_id: str | None, user: Any) -> tuple[str, str]:
        """(user id, session id). An omitted id resolves to the user's ``main_dataset`` default session."""
        self._lifecycle.require_open()
        resolved = await self._users.resolve(user)
        manager = self._manager
        if session_id is not None:
            return str(resolved.id), manager.resolve_session_id(session_id)
        dataset = await self._datasets.get(MAIN_DATASET, resolved)
        if dataset is None:
            raise SessionPreconditionError(
                "no main_dataset exists for this user, so the default session cannot be resolved; "
                "add data first, or pass session_id=... (\"default_session\" reads the global legacy session)"
            )
        return str(resolved.id), manager.resolve_session_id(None, dataset.id)

    async def get_session(self, session_id: str | None = None, last_n: int | None = None, user: Any = None) -> list[SessionQAEntry]:
        """Turns of the session, oldest first; ``[]`` when absent or the cache is unavailable."""
        check_last_n(last_n)
        user_id, session = await self.resolve(session_id, user)
        return await self._manager.get_session(user_id, last_n=last_n, session_id=session)

    async def add_feedback(
        self,
        session_id: str | None,
        qa_id: str,
        feedback_text: str | None = None,
        feedback_score: int | None = None,
        user: Any = None,
    ) -> bool:
        """Annotate a stored turn. Score outside 1..5 raises; unknown ``qa_id`` returns False."""
        user_id, session = await self.resolve(session_id, user)
        return await self._manager.add_feedback(
            user_id, qa_id, feedback_text=feedback_text, feedback_score=feedback_score, session_id=session
        )

    async def delete_feedback(self, session_id: str | None, qa_id: str, user: Any = None) -> bool:
        """Remove a turn's feedback; True whenever the turn exists."""
        user_id, session = await self.resolve(session_id, user)
        return await self._manager.delete_feedback(user_id, qa_id, session_id=session)

    async def add_trace(
        self, session_id: str | None, entry: SessionAgentTraceEntry | Mapping[str, Any], user: Any = None
    ) -> str | None:
        """Store one agent trace step in the session (an omitted id: as :meth:`get_session`); returns its ``trace_id``.

        ``entry`` as :meth:`memlab.session.SessionManager.add_trace` takes it; an invalid
        one raises ``SessionParameterValidationError`` before the user is resolved. None
        when the cache is off or unreachable.
        """
        step = trace_entry(entry)
        user_id, session = await self.resolve(session_id, user)
        return await self._manager.add_trace(user_id, session, step)

    async def get_traces(self, session_id: str | None = None, user: Any = None) -> list[SessionAgentTraceEntry]:
        """The session's agent trace steps, first stored first; ``[]`` when none or the cache is unavailable."""
        user_id, session = await self.resolve(session_id, user)
        return await self._manager.get_traces(user_id, session)

    async def distill_session(
        self, session_id: str, dataset: Any = None, user: Any = None, max_batches: int | None = None
    ) -> DistillResult:
        """Distill the session's gated guidance into lesson documents of ``dataset`` (seed: "Session distillation").

        ``dataset`` must exist and be writable by ``user`` (None: the default user),
        else ``SessionDistillationError``. Only guidance never rated harmful with
        confidence >= 0.75 is distilled, each entry once per dataset (a watermark in the
        session seals it). ``max_batches`` caps the curator calls of this run (None:
        ``IMPROVE_DISTILL_MAX_BATCHES_PER_RUN``, 0: no cap); entries beyond the cap stay
        for the next run. Statuses and errors: :class:`~memlab.models.DistillResult`
        and :mod:`memlab.flows.distill`.
        """
        self._lifecycle.require_open()
        if self._distiller is None:
            raise SessionPreconditionError("this SessionAPI was built without a distiller; use stack.session of a MemoryStack")
        return await self._distiller(session_id, dataset=dataset, user=user, max_batches=max_batches)

    async def end(self, session_id: str | None, status: str = "completed", user: Any = None) -> bool:
        """Mark the session ended: ``status`` ``completed`` or ``failed``, ``ended_at`` now (SPEC §8).

        A later turn does not resurrect it (its counters stop moving). Returns False when
        the session has no record (nothing was ever stored in it). Any other
        ``status`` raises ``ValidationError`` before anything is written.
        """
        if status not in ("completed", "failed"):
            raise ValidationError(f"status must be 'completed' or 'failed', got {status!r}")
        user_id, session = await self.resolve(session_id, user)
        if self._ender is None:
            return False
        return await self._ender(uuid.UUID(user_id), session, status)
