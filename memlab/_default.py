"""The lazily created default stack behind ``memlab.remember`` & co (cognee's calling style)."""

from __future__ import annotations

import asyncio

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
