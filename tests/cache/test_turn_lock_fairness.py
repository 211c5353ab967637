"""Turn locks are fair, say what happened when they time out, and a crashed holder frees its session within seconds.

Fairness: several contenders take one session's lock back to back with a short
hold; between a contender starting to wait and getting the lock, the others may
take it at most once each (first come, first served), plus one for the moment
between noting the start and joining the queue. The old polling locks let the
releasing process take the lock again at once: one writer ran 19 turns in a row.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from memlab import SessionLockTimeout
from memlab.testing import supply_backend
from memlab.testing.processes import run_in_processes
from memlab.testing.suppliers import SUPPLIERS, SupplyArgs

LOCKING = ["sqlite", "fs", "fakeredis", pytest.param("redis", marks=pytest.mark.server), pytest.param("redis-cluster", marks=pytest.mark.server), pytest.param("postgres", marks=pytest.mark.server)]
#: the backends whose store other processes share (fakeredis lives in one process)
SHARED = [name for name in LOCKING if name != "fakeredis"]
HOLD_SECONDS = 0.004


@contextlib.asynccontextmanager
async def _handle(backend: str, tmp_path: str):
    """One more open handle on the store ``supply_backend(backend, tmp_path=...)`` serves (no prune on exit)."""
    async with SUPPLIERS[backend](SupplyArgs(Path(tmp_path))) as cache:
        await cache.open()
        try:
            yield cache
        finally:
            await cache.close()


async def _contend(cache, writer: int, turns: int, session: str) -> list[dict]:
    records = []
    for _ in range(turns):
        waiting = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the machine
        async with cache.turn_lock("u1", session, timeout=30):
            acquired = time.monotonic()
            await asyncio.sleep(HOLD_SECONDS)
            released = time.monotonic()
        records.append({"writer": writer, "waiting": waiting, "acquired": acquired, "released": released})
    return records


async def _contend_in_process(backend: str, tmp_path: str, writer: int, turns: int, session: str, out: str, *, barrier) -> None:
    async with _handle(backend, tmp_path) as cache:
        async with cache.turn_lock("u1", f"warm-up-{writer}", timeout=30):  # the first lock may connect
            pass
        barrier.wait(timeout=120)
        records = await _contend(cache, writer, turns, session)
    Path(out).write_text(json.dumps(records))


def fairness(records: list[dict]) -> dict:
    """The longest run by one writer, the most acquisitions by others while one waited, the waits and holds."""
    records = sorted(records, key=lambda record: record["acquired"])
    passed = [
        sum(1 for other in records if other["writer"] != mine["writer"] and mine["waiting"] < other["acquired"] < mine["acquired"])
        for mine in records
    ]
    longest = run = 1
    for before, after in zip(records, records[1:]):
        run = run + 1 if after["writer"] == before["writer"] else 1
        longest = max(longest, run)
    for before, after in zip(records, records[1:]):
        assert after["acquired"] >= before["released"], "two holders at once"
    waits = sorted(record["acquired"] - record["waiting"] for record in records)
    holds = sorted(record["released"] - record["acquired"] for record in records)
    return {"longest_run": longest, "max_passed": max(passed), "max_wait": waits[-1], "median_hold": holds[len(holds) // 2]}


@pytest.mark.parametrize("backend", SHARED)
async def test_processes_contending_for_one_session_take_turns(backend, tmp_path):
    processes, turns = 3, 20
    async with supply_backend(backend, tmp_path=tmp_path):
        outs = [str(tmp_path / f"records-{writer}.json") for writer in range(processes)]
        args = [(backend, str(tmp_path), writer, turns, "fair-chat", outs[writer]) for writer in range(processes)]
        failures = await run_in_processes(_contend_in_process, args, timeout=120)
        assert not failures, failures[0]
    records = [record for out in outs for record in json.loads(Path(out).read_text())]
    assert len(records) == processes * turns
    stats = fairness(records)
    assert stats["max_passed"] <= processes, stats  # N-1 others, +1 for joining the queue after noting the start


@pytest.mark.parametrize("backend", LOCKING)
async def test_tasks_of_one_process_contending_for_one_session_take_turns(backend, tmp_path):
    tasks, turns = 3, 12
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(supply_backend(backend, tmp_path=tmp_path))
        # one handle shared by two tasks, a second handle for the third: the lock is exclusive either way
        second = await stack.enter_async_context(supply_backend(backend, tmp_path=tmp_path))
        caches = [first, first, second]
        results = await asyncio.gather(*(_contend(caches[writer], writer, turns, "fair-chat") for writer in range(tasks)))
    stats = fairness([record for result in results for record in result])
    assert stats["max_passed"] <= tasks, stats


# -- the timeout message -----------------------------------------------------------------


@pytest.mark.parametrize("backend", LOCKING)
async def test_a_timed_out_turn_says_how_long_it_waited_and_what_ran_meanwhile(backend, tmp_path):
    async with contextlib.AsyncExitStack() as stack:
        holder = await stack.enter_async_context(supply_backend(backend, tmp_path=tmp_path))
        waiter = await stack.enter_async_context(supply_backend(backend, tmp_path=tmp_path))
        async with holder.turn_lock("u1", "s1", timeout=5):
            started = time.monotonic()
            with pytest.raises(SessionLockTimeout) as caught:
                async with waiter.turn_lock("u1", "s1", timeout=0.3):
                    pass
            assert time.monotonic() - started < 3
        message = str(caught.value)
        assert "'s1'" in message and "u1" in message
        assert "this turn waited 0.3 s" in message, message
        assert "more than" not in message  # the old message claimed a holder it could not see
        if backend == "postgres":
            assert "cannot count" in message, message
        else:
            assert "no other turn took the lock meanwhile" in message, message
        assert "held by one turn for" in message, message


# -- a crashed holder --------------------------------------------------------------------


def _hold_until_killed(backend: str, tmp_path: str, lifetime_ms: int, held) -> None:
    async def hold() -> None:
        import memlab.cache._redis as redis_module

        redis_module.TURN_LOCK_TTL_MS = lifetime_ms
        async with _handle(backend, tmp_path) as cache, cache.turn_lock("u1", "crashed", timeout=30):
            held.set()
            await asyncio.sleep(600)

    asyncio.run(hold())


@pytest.mark.parametrize("backend", SHARED)
async def test_a_holder_killed_mid_turn_frees_its_session_within_seconds(backend, tmp_path, monkeypatch):
    import memlab.cache._redis as redis_module

    lifetime_ms = 1500  # Redis: the lock's lifetime, shortened so the test is quick (the default is TURN_LOCK_TTL_MS)
    monkeypatch.setattr(redis_module, "TURN_LOCK_TTL_MS", lifetime_ms)
    async with supply_backend(backend, tmp_path=tmp_path) as cache:
        ctx = multiprocessing.get_context("spawn")
        held = ctx.Event()
        child = ctx.Process(target=_hold_until_killed, args=(backend, str(tmp_path), lifetime_ms, held))
        child.start()
        try:
            assert await asyncio.to_thread(held.wait, 60), "the child never took the lock"
            with pytest.raises(SessionLockTimeout):  # a live holder keeps it (on Redis past its lifetime: the heartbeat)
                async with cache.turn_lock("u1", "crashed", timeout=lifetime_ms / 1000 * 2):
                    pass
            os.kill(child.pid, signal.SIGKILL)
            killed = time.monotonic()
            async with cache.turn_lock("u1", "crashed", timeout=30):
                recovered = time.monotonic() - killed
        finally:
            child.kill()
            await asyncio.to_thread(child.join, 30)
    assert recovered < 1.0 + lifetime_ms / 1000, recovered


def test_the_redis_turn_lock_lifetime_is_seconds_not_minutes():
    from memlab.cache import _redis

    assert _redis.TURN_LOCK_TTL_MS <= 15_000
    assert _redis.TURN_WAITER_TTL_MS <= 5_000


def _wait_until_killed(backend: str, tmp_path: str, waiter_ttl_ms: int, ready) -> None:
    async def wait() -> None:
        import memlab.cache._redis as redis_module

        redis_module.TURN_WAITER_TTL_MS = waiter_ttl_ms
        async with _handle(backend, tmp_path) as cache:
            ready.set()
            async with cache.turn_lock("u1", "crashed-waiter", timeout=600):
                pass

    asyncio.run(wait())


@pytest.mark.parametrize("backend", SHARED)
async def test_a_waiter_killed_in_the_queue_does_not_hold_up_the_turns_behind_it(backend, tmp_path, monkeypatch):
    import memlab.cache._redis as redis_module

    waiter_ttl_ms = 500  # Redis: how long a silent waiter keeps its place, shortened (the default is TURN_WAITER_TTL_MS)
    monkeypatch.setattr(redis_module, "TURN_WAITER_TTL_MS", waiter_ttl_ms)
    async with supply_backend(backend, tmp_path=tmp_path) as holder, supply_backend(backend, tmp_path=tmp_path) as waiter:
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Event()
        child = ctx.Process(target=_wait_until_killed, args=(backend, str(tmp_path), waiter_ttl_ms, ready))
        try:
            async with holder.turn_lock("u1", "crashed-waiter", timeout=5):
                child.start()
                assert await asyncio.to_thread(ready.wait, 60), "the child never started"
                await asyncio.sleep(0.5)  # it queues behind the holder
                os.kill(child.pid, signal.SIGKILL)
                await asyncio.to_thread(child.join, 30)
            released = time.monotonic()
            async with waiter.turn_lock("u1", "crashed-waiter", timeout=30):
                behind = time.monotonic() - released
        finally:
            if child.is_alive():
                child.kill()
                await asyncio.to_thread(child.join, 30)
    assert behind < 1.0 + waiter_ttl_ms / 1000, behind
