from __future__ import annotations

import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import datetime

from memlab.cache._base import CacheBackend, PayloadChange
from memlab.exceptions import SessionQAEntryValidationError


@dataclass
class _Kind:
    """One kind (qa or context) of one session: ordered id -> payload, one expiry."""

    epoch: int
    rows: dict[str, str] = field(default_factory=dict)
    expires_at: datetime | None = None


class MemoryCache(CacheBackend):
    """In-process dict store. Per instance, no persistence; the reference model in tests."""

    name = "memory"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._data: dict[tuple[str, str, str], _Kind] = {}
        self._epochs = itertools.count(1)  # never reused, so a stale cursor can never match

    # helpers
    def _get(self, user_id: str, session_id: str, kind: str, now: datetime) -> _Kind | None:
        """The live kind, or None when absent or expired."""
        state = self._data.get((user_id, session_id, kind))
        if state is None or not self.ttl.is_live(state.expires_at, now):
            return None
        return state

    def _for_write(self, user_id: str, session_id: str, kind: str, now: datetime) -> _Kind:
        key = (user_id, session_id, kind)
        state = self._data.get(key)
        if state is None or not self.ttl.is_live(state.expires_at, now):
            state = self._data[key] = _Kind(epoch=next(self._epochs))
        return state

    def _slide(self, state: _Kind, now: datetime) -> None:
        if self.ttl.needs_restamp(state.expires_at, now):
            state.expires_at = self.ttl.expiry_after_write(now)

    # QA
    async def _append_qa(self, user_id, session_id, qa_id, payload, now):
        state = self._for_write(user_id, session_id, "qa", now)
        if qa_id in state.rows:
            raise SessionQAEntryValidationError(f"qa_id {qa_id!r} already exists in this session")
        state.rows[qa_id] = payload
        self._slide(state, now)

    async def _read_qa(self, user_id, session_id, last_n, now):
        state = self._get(user_id, session_id, "qa", now)
        if state is None:
            return []
        payloads = list(state.rows.values())
        return payloads if last_n is None else payloads[-last_n:]

    async def _read_qa_log(self, user_id, session_id, cursor: Hashable | None, now):
        state = self._get(user_id, session_id, "qa", now)
        if state is None:
            return ("dead",), [], True
        payloads = list(state.rows.values())
        if isinstance(cursor, tuple) and len(cursor) == 2 and cursor[0] == state.epoch and cursor[1] <= len(payloads):
            return (state.epoch, len(payloads)), payloads[cursor[1]:], False
        return (state.epoch, len(payloads)), payloads, True

    async def _modify_qa(self, user_id, session_id, qa_id, change: PayloadChange, now):
        state = self._get(user_id, session_id, "qa", now)
        if state is None or qa_id not in state.rows:
            return False
        new = change(state.rows[qa_id])
        if new is not None:
            state.rows[qa_id] = new
            state.epoch = next(self._epochs)
        self._slide(state, now)
        return True

    async def _delete_qa(self, user_id, session_id, qa_id, now):
        state = self._get(user_id, session_id, "qa", now)
        if state is None or qa_id not in state.rows:
            return False
        del state.rows[qa_id]
        state.epoch = next(self._epochs)
        self._slide(state, now)
        return True

    # context
    async def _upsert_context(self, user_id, session_id, entry_id, payload, now):
        state = self._for_write(user_id, session_id, "context", now)
        state.rows[entry_id] = payload
        self._slide(state, now)

    async def _read_context(self, user_id, session_id, now):
        state = self._get(user_id, session_id, "context", now)
        return [] if state is None else list(state.rows.values())

    async def _modify_context(self, user_id, session_id, entry_id, change, now):
        state = self._get(user_id, session_id, "context", now)
        if state is None or entry_id not in state.rows:
            return False
        new = change(state.rows[entry_id])
        if new is not None:
            state.rows[entry_id] = new
        self._slide(state, now)
        return True

    async def _delete_context(self, user_id, session_id, entry_id, now):
        state = self._get(user_id, session_id, "context", now)
        if state is None or entry_id not in state.rows:
            return False
        del state.rows[entry_id]
        return True

    # session / maintenance
    async def _delete_session(self, user_id, session_id, now):
        existed = False
        for kind in ("qa", "context"):
            state = self._get(user_id, session_id, kind, now)
            existed = existed or bool(state and state.rows)
            self._data.pop((user_id, session_id, kind), None)
        return existed

    async def _sweep(self, now):
        removed = 0
        for key, state in list(self._data.items()):
            if not self.ttl.is_live(state.expires_at, now):
                removed += len(state.rows)
                del self._data[key]
        return removed

    async def _prune(self):
        self._data.clear()
