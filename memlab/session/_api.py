"""``stack.session``: the SDK-level session API (user resolution, dataset-scoped default session)."""

from __future__ import annotations

from typing import Any

from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import SessionPreconditionError
from memlab.lifecycle import Lifecycle
from memlab.models import SessionQAEntry
from memlab.session._manager import SessionManager, check_last_n
from memlab.users import Users


class SessionAPI:
    """Session history and feedback, as users call them (seed: "Reading Session History")."""

    def __init__(self, users: Users, datasets: Datasets, manager: SessionManager, lifecycle: Lifecycle) -> None:
        self._users = users
        self._datasets = datasets
        self._manager = manager
        self._lifecycle = lifecycle

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
