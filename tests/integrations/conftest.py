"""Shared setup of the framework adapters' tests: a stack whose event loop runs in a thread of its own.

Sync framework calls (``chain.invoke``, ``graph.invoke``) block the calling thread
while the stack runs on its loop elsewhere, as in a server; :func:`threaded_stack`
gives such a stack (open on a loop in a background thread) and that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memlab import MemoryStack
from memlab.testing import fast_config


@dataclass
class Threaded:
    stack: MemoryStack
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the stack's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)


async def _finish_tasks() -> None:
    """Cancel the loop's other tasks and wait for them, then close its async generators."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


@contextlib.contextmanager
def running_stack(data_root: Path) -> Iterator[Threaded]:
    """An open stack on :func:`fast_config` whose loop runs in a background thread; closed and stopped after."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="memlab-test-stack", daemon=True)
    thread.start()
    stack = MemoryStack.from_config(fast_config(data_root))
    threaded = Threaded(stack, loop)
    threaded.run(stack.open())
    try:
        yield threaded
    finally:
        threaded.run(stack.close())
        threaded.run(_finish_tasks())  # as asyncio.run ends a loop (litellm leaves a logging worker task on it)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


@pytest.fixture
def threaded_stack(tmp_path) -> Iterator[Threaded]:
    with running_stack(tmp_path) as threaded:
        yield threaded
