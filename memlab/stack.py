"""MemoryStack: owns one instance of every strategy and runs the flows."""

from __future__ import annotations

import enum
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memlab._clock import Clock, SystemClock
from memlab.config import StackConfig, build_cache_backend
from memlab.datasets import Datasets
from memlab.exceptions import ConfigError, MemlabError, StackStateError, ValidationError
from memlab.models import RecallResponse, RememberResult, SessionRecallResponse
from memlab.relational import RelationalStore
from memlab.session._api import SessionAPI
from memlab.session._manager import SessionManager
from memlab.users import Users

logger = logging.getLogger("memlab.stack")


class StackState(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


def _text_of(data: Any) -> str:
    if isinstance(data, str):
        return data
    if isinstance(data, Sequence) and not isinstance(data, (bytes, bytearray)) and all(isinstance(item, str) for item in data):
        return "\n\n".join(data)
    raise ValidationError(f"remember() with session_id takes a str or a list of str, got {type(data).__name__}")


def _check_data_root(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"data root {str(root)!r} is not a writable directory: {exc.strerror or exc}") from None


class MemoryStack:
    """A configured memory system. Build with :meth:`from_config` / :meth:`from_env`.

    Use as ``async with stack:`` (or ``await stack.open()`` / ``await stack.close()``).
    Strategy instances are built from the config by :mod:`memlab.config` only.
    """

    def __init__(self, config: StackConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.cache = build_cache_backend(config, self.clock)
        self.session_manager = SessionManager(self.cache, default_session_id=config.session.default_session_id)
        self._relational = RelationalStore(Path(config.data_root) / "memlab.db", self.clock)
        self.users = Users(self._relational)
        self.datasets = Datasets(self._relational, self.users)
        self.session = SessionAPI(self)
        self.state = StackState.UNOPENED

    @classmethod
    def from_config(cls, config: StackConfig | None = None, *, clock: Clock | None = None) -> "MemoryStack":
        """Assemble a stack (not yet open) from ``config`` (defaults when None)."""
        return cls(config or StackConfig(), clock=clock)

    @classmethod
    def from_env(cls, *, clock: Clock | None = None) -> "MemoryStack":
        """Assemble a stack from environment variables (:meth:`StackConfig.from_env`)."""
        return cls(StackConfig.from_env(), clock=clock)

    def __repr__(self) -> str:
        return f"MemoryStack(cache={self.cache!r}, data_root={str(self.config.data_root)!r}, state={self.state.value})"

    # -- lifecycle -------------------------------------------------------------------

    async def open(self) -> "MemoryStack":
        """Create the data root and open the stores.

        An unwritable data root raises ``ConfigError``. A cache that cannot be reached
        is logged and retried on each session call (session calls fail open meanwhile).
        """
        if self.state is StackState.OPEN:
            return self
        if self.state is StackState.CLOSED:
            raise StackStateError("this MemoryStack was closed; build a new one")
        _check_data_root(Path(self.config.data_root))
        await self._relational.open()
        if self.cache is not None:
            try:
                await self.cache.open()
            except MemlabError as exc:
                logger.warning("session cache unavailable at start, will retry on use: %s", exc)
        self.state = StackState.OPEN
        return self

    async def close(self) -> None:
        """Close every store. Idempotent."""
        if self.state is StackState.CLOSED:
            return
        self.state = StackState.CLOSED
        if self.cache is not None:
            await self.cache.close()
        await self._relational.close()

    async def __aenter__(self) -> "MemoryStack":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _require_open(self) -> None:
        if self.state is not StackState.OPEN:
            raise StackStateError(f"MemoryStack is {self.state.value}; use 'async with stack:' or 'await stack.open()'")

    # -- flows -----------------------------------------------------------------------

    async def remember(
        self,
        data: Any,
        *,
        dataset: str = "main_dataset",
        session_id: str | None = None,
        user: Any = None,
        self_improvement: bool = True,
    ) -> RememberResult:
        """Store ``data``. With ``session_id``: one raw session turn (no chunking, no LLM).

        The text becomes a turn with empty question and context; blank text writes
        nothing (status ``skipped_blank``); caching off gives ``cache_unavailable``.
        Without ``session_id`` the data would go to permanent memory, which this
        build does not have yet: that raises ``ValidationError``.
        """
        self._require_open()
        if session_id is None:
            raise ValidationError(
                "remember() without session_id writes permanent memory (the knowledge graph), "
                "which this build does not include yet; pass session_id=... to write the session cache"
            )
        text = _text_of(data)
        resolved = await self.users.resolve(user)
        session = self.session_manager.resolve_session_id(session_id)
        if not text.strip():
            return RememberResult(status="skipped_blank", session_id=session)
        qa_id = await self.session_manager.add_qa(resolved.id, question="", answer=text, session_id=session)
        if qa_id is None:
            return RememberResult(status="cache_unavailable", session_id=session)
        return RememberResult(status="session_stored", session_id=session, data_ids=[qa_id])

    async def recall(
        self,
        query_text: str,
        query_type: Any = None,
        *,
        datasets: list[str] | None = None,
        dataset_ids: list[Any] | None = None,
        top_k: int = 15,
        auto_route: bool = True,
        scope: str | list[str] | None = None,
        session_id: str | None = None,
        user: Any = None,
        only_context: bool = False,
        response_model: Any = None,
    ) -> list[RecallResponse]:
        """Search memory. This build searches the session cache by keyword (SPEC §9.2).

        Results are ``SessionRecallResponse`` items (``source="session"``), best match
        first, ties oldest first, at most ``top_k``. Without ``session_id`` (or when the
        session has no match) the graph lane would answer; this build has no
        permanent memory yet, so that lane contributes nothing. Options that only
        the graph lane uses raise ``ValidationError`` rather than being ignored.
        """
        self._require_open()
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValidationError(f"top_k must be an int >= 1, got {top_k!r}")
        unsupported = {
            "query_type": query_type,
            "datasets": datasets,
            "dataset_ids": dataset_ids,
            "scope": scope,
            "response_model": response_model,
        }
        given = [name for name, value in unsupported.items() if value is not None] + (["only_context"] if only_context else [])
        if given:
            raise ValidationError(f"recall() options {given} need the graph lane, which this build does not include yet")
        if not isinstance(query_text, str):
            raise ValidationError(f"query_text must be a str, got {type(query_text).__name__}")
        if not query_text.strip() or session_id is None:
            return []
        resolved = await self.users.resolve(user)
        session = self.session_manager.resolve_session_id(session_id)
        hits = await self.session_manager.search(resolved.id, query_text, session_id=session, top_k=top_k)
        return [
            SessionRecallResponse(session_id=session, matched_tokens=score, **entry.model_dump(exclude={"memify_metadata"}))
            for entry, score in hits
        ]

    async def prune(self, *, cache: bool = True) -> None:
        """Remove every session entry of the cache (``cache=True``)."""
        self._require_open()
        if cache and self.cache is not None:
            await self.cache.prune()

    @property
    def frames(self):
        """pandas exports of this stack (pandas is imported on first use)."""
        from memlab.frames import Frames

        return Frames(self)

