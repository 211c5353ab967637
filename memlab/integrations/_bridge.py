"""Running memlab's coroutines from the calling conventions frameworks use (sync and async).

A :class:`~memlab.MemoryStack` is bound to the event loop it was opened on (its
database and Redis connections are). Frameworks call an adapter from plain threads
(``chain.invoke``) and from event loops (``await chain.ainvoke``), sometimes another
loop than the stack's. :class:`StackBridge` runs each call on the stack's loop:

* called from a coroutine on the stack's loop (or when no loop is known): awaited in place;
* called from a coroutine on another loop: submitted to the stack's loop and awaited there;
* called from a thread with no running loop: submitted to the stack's loop, the thread blocks;
* called synchronously from the stack's own loop thread: refused (it would deadlock),
  with an error pointing at the ``a*`` method.

The stack's loop is the ``loop`` given, else the loop running where the bridge was
built (an adapter made inside ``async with MemoryStack(...)`` needs nothing more).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from memlab.exceptions import StackStateError

T = TypeVar("T")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class StackBridge:
    """Runs coroutine factories on the event loop that owns a stack (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop: asyncio.AbstractEventLoop | None = loop if loop is not None else _running_loop()

    async def arun(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``await factory()`` on the stack's loop, from any loop."""
        here = asyncio.get_running_loop()
        if self.loop is None:
            self.loop = here
        if self.loop is here or self.loop.is_closed() or not self.loop.is_running():
            return await factory()
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(factory(), self.loop)
        return await asyncio.wrap_future(future)

    def run(self, factory: Callable[[], Coroutine[Any, Any, T]], *, name: str) -> T:
        """``factory()`` run to completion on the stack's loop, blocking this thread."""
        here = _running_loop()
        loop = self.loop
        if loop is not None and loop is here:
            raise StackStateError(
                f"{name}() is a blocking call made on the event loop that runs the memlab stack, where it "
                f"would deadlock; await the async method (a{name}(), ainvoke()) instead"
            )
        if loop is None or loop.is_closed() or not loop.is_running():
            raise StackStateError(
                f"{name}() needs the event loop the memlab stack runs on: build the adapter inside that loop "
                f"(in 'async with stack:'), or pass loop=<the stack's running loop>; from async code use a{name}()"
            )
        return asyncio.run_coroutine_threadsafe(factory(), loop).result()
