"""Run one coroutine function in several spawned OS processes at once, for multi-process tests."""

from __future__ import annotations

import asyncio
import multiprocessing
import traceback
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

__all__ = ["run_in_processes"]


def _child(worker: Callable[..., Coroutine[Any, Any, None]], args: tuple, barrier: Any, results: Any) -> None:
    try:
        asyncio.run(worker(*args, barrier=barrier))
        results.put(None)
    except BaseException:
        results.put(traceback.format_exc())


async def run_in_processes(
    worker: Callable[..., Coroutine[Any, Any, None]], args_per_process: Sequence[tuple], *, timeout: float = 600.0
) -> list[str]:
    """Run ``await worker(*args, barrier=barrier)`` in one spawned process per ``args``; the tracebacks of the failures.

    ``worker`` must be a module-level coroutine function (spawned processes import it);
    ``barrier`` is shared by all of them, so a worker that calls ``barrier.wait()``
    proceeds only when every process got there. Each result is awaited at most
    ``timeout`` seconds; processes still alive at the end are killed.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(len(args_per_process)), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(worker, tuple(args), barrier, results)) for args in args_per_process]
    for proc in procs:
        proc.start()
    try:
        outcomes = [await asyncio.to_thread(results.get, True, timeout) for _ in procs]
    finally:
        for proc in procs:
            await asyncio.to_thread(proc.join, 120)
            if proc.is_alive():
                proc.kill()
    return [outcome for outcome in outcomes if outcome]
