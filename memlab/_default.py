"""The lazily created default stack behind ``memlab.remember`` & co (cognee's calling style), and the
module-level session API on it (``memlab.session.get_session / add_feedback / delete_feedback /
distill_session / add_trace / get_traces``, re-exported lazily by :mod:`memlab.session`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from memlab.models import DistillResult, SessionAgentTraceEntry, SessionQAEntry
from memlab.stack import MemoryStack

_stack: MemoryStack | None = None
_loop: asyncio.AbstractEventLoop | None = None


async def default_stack() -> MemoryStack:
    """The open default stack, built from the environment on first use.

    A stack's connections belong to one event loop; when called from a new loop
    (a second ``asyncio.run``), a fresh stack is opened for it.
    """
    global _stack, _loop
    loop = asyncio.get_running_loop()
    if _stack is None or _loop is not loop or _loop.is_closed():
        _stack = MemoryStack.from_env()
        _loop = loop
        await _stack.open()
    return _stack


async def reset_default_stack() -> None:
    """Close and forget the default stack (for tests and config changes)."""
    global _stack, _loop
    if _stack is not None and _loop is asyncio.get_running_loop():
        await _stack.close()
    _stack = _loop = None


async def get_session(session_id: str | None = None, last_n: int | None = None, user: Any = None) -> list[SessionQAEntry]:
    """``stack.session.get_session`` on the default stack."""
    return await (await default_stack()).session.get_session(session_id=session_id, last_n=last_n, user=user)


async def add_feedback(
    session_id: str | None, qa_id: str, feedback_text: str | None = None, feedback_score: int | None = None, user: Any = None
) -> bool:
    """``stack.session.add_feedback`` on the default stack."""
    return await (await default_stack()).session.add_feedback(session_id, qa_id, feedback_text, feedback_score, user)


async def delete_feedback(session_id: str | None, qa_id: str, user: Any = None) -> bool:
    """``stack.session.delete_feedback`` on the default stack."""
    return await (await default_stack()).session.delete_feedback(session_id, qa_id, user)


async def distill_session(session_id: str, dataset: Any = None, user: Any = None, max_batches: int | None = None) -> DistillResult:
    """``stack.session.distill_session`` on the default stack."""
    return await (await default_stack()).session.distill_session(session_id, dataset, user, max_batches)


async def add_trace(session_id: str | None, entry: SessionAgentTraceEntry | Mapping[str, Any], user: Any = None) -> str | None:
    """``stack.session.add_trace`` on the default stack."""
    return await (await default_stack()).session.add_trace(session_id, entry, user)


async def get_traces(session_id: str | None = None, user: Any = None) -> list[SessionAgentTraceEntry]:
    """``stack.session.get_traces`` on the default stack."""
    return await (await default_stack()).session.get_traces(session_id, user)
