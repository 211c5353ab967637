"""The ``fs`` backend (DiskCache) on a real diskcache directory: what is specific to it.

The shared behaviour is the conformance suite's job; here: the key layout, O(1)
appends and reads (counted in SQLite VM steps and changed rows, not timed), logical
TTL against the stored rows, unreadable rows, and the inline/off-loop dispatch.
Many processes appending to one session: tests/cache/test_no_lost_writes.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from contextlib import contextmanager

import diskcache
import pytest

from memlab.cache._disk import DiskCache
from memlab.exceptions import CacheConnectionError
from memlab.testing import FakeClock
from memlab.ttl import SlidingTTL

TTL = 60.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def directory(tmp_path):
    return tmp_path / "sessions_db"


@pytest.fixture
async def backend(directory, clock):
    cache = DiskCache(directory, ttl=SlidingTTL(TTL), clock=clock, purge_interval_seconds=0)
    async with cache:
        yield cache


@pytest.fixture
def raw(directory, backend):
    """A plain diskcache handle on the backend's directory (what any other program would see)."""
    cache = diskcache.Cache(str(directory))
    yield cache
    cache.close()


def keys(raw: diskcache.Cache) -> set[str]:
    return set(raw.iterkeys())


async def qa(backend, n: int, user: str = "u", session: str = "s", prefix: str = "q") -> list:
    return [await backend.create_qa_entry(user, session, question=f"{prefix}{i}", answer="a", qa_id=f"{prefix}{i}") for i in range(n)]


@contextmanager
def work_counter(backend):
    """Counts SQLite VM steps and changed rows on the backend's inline connection."""
    con = backend._fast._con
    seen = {"steps": 0}

    def tick() -> int:
        seen["steps"] += 1
        return 0

    before = con.total_changes
    con.set_progress_handler(tick, 1)
    try:
        yield seen
    finally:
        con.set_progress_handler(None, 1)
        seen["rows_changed"] = con.total_changes - before


# -- layout -----------------------------------------------------------------------------


async def test_rows_are_plain_diskcache_items_one_per_turn(backend, raw):
    entries = await qa(backend, 3)
    assert keys(raw) == {
        "agent_sessions:u:s:000000000000",
        "agent_sessions:u:s:000000000001",
        "agent_sessions:u:s:000000000002",
        "agent_sessions#ids:u:s:q0",
        "agent_sessions#ids:u:s:q1",
        "agent_sessions#ids:u:s:q2",
        "agent_sessions#meta:u:s",
    }
    assert [raw.get(f"agent_sessions:u:s:{i:012d}") for i in range(3)] == [e.model_dump_json(exclude_none=True) for e in entries]
    assert raw.get("agent_sessions#ids:u:s:q1") == 1


async def test_colons_and_percents_in_ids_never_collide(backend, raw):
    pairs = [("a:b", "c"), ("a", "b:c"), ("a%3Ab", "c"), ("a", "b"), ("a", "b:1")]
    for user, session in pairs:
        await backend.create_qa_entry(user, session, question=f"{user}|{session}", answer="x")
        await backend.create_session_context_entry(user, session, {"id": "g", "owner": f"{user}|{session}"})
    for user, session in pairs:
        assert [e.question for e in await backend.get_all_qa_entries(user, session)] == [f"{user}|{session}"]
        assert [c["owner"] for c in await backend.get_session_context_entries(user, session)] == [f"{user}|{session}"]
    assert "agent_sessions#meta:a%3Ab:c" in keys(raw) and "agent_sessions#meta:a%253Ab:c" in keys(raw)


async def test_context_upsert_rewrites_in_place_keeping_first_position(backend, raw):
    for entry_id in ("g1", "g2", "g3"):
        await backend.create_session_context_entry("u", "s", {"id": entry_id, "v": 1})
    await backend.create_session_context_entry("u", "s", {"id": "g1", "v": 2})
    await backend.create_session_context_entry("u", "s", {"id": "g2", "v": 3})
    assert await backend.get_session_context_entries("u", "s") == [
        {"id": "g1", "v": 2},
        {"id": "g2", "v": 3},
        {"id": "g3", "v": 1},
    ]
    assert sum(key.startswith("session_context:u:s:") for key in keys(raw)) == 3  # no duplicate rows


async def test_prune_removes_only_memlab_keys(backend, raw):
    await qa(backend, 2)
    await backend.create_session_context_entry("u", "s", {"id": "g"})
    raw.set("someone-else", "keep me")
    await backend.prune()
    assert keys(raw) == {"someone-else"}
    assert await backend.get_all_qa_entries("u", "s") == []


# -- O(1): work per call does not grow with the session ------------------------------------


async def test_append_and_read_last_n_do_the_same_work_at_any_session_length(backend):
    async def costs():
        with work_counter(backend) as append:
            await backend.create_qa_entry("u", "s", question="q", answer="a")
        with work_counter(backend) as last10:
            await backend.get_latest_qa_entries("u", "s", 10)
        with work_counter(backend) as upsert:
            await backend.create_session_context_entry("u", "s", {"id": "same"})
        with work_counter(backend) as whole:
            await backend.get_all_qa_entries("u", "s")
        return append, last10, upsert, whole

    for _ in range(20):
        await backend.create_qa_entry("u", "s", question="q", answer="a")
    await backend.create_session_context_entry("u", "s", {"id": "same"})
    small = await costs()
    for _ in range(1500):
        await backend.create_qa_entry("u", "s", question="q", answer="a")
    large = await costs()

    for kind, at_20, at_1500 in zip(("append", "last 10", "context upsert"), small[:3], large[:3]):
        assert at_20 == at_1500, kind  # identical SQLite work and rows changed
    assert large[0]["rows_changed"] <= 8  # an append writes 2 rows + the meta row (+ diskcache's counters)
    assert large[1]["rows_changed"] == 0  # reads never write
    assert large[3]["steps"] > 50 * large[1]["steps"]  # the counter does see per-row work


# -- TTL is logical, rows go on the next write or a sweep ------------------------------------


async def test_dead_kind_reads_empty_and_next_write_purges_its_rows(backend, raw, clock):
    await qa(backend, 3)
    await backend.create_session_context_entry("u", "s", {"id": "g"})
    clock.advance(TTL - 1)
    assert len(await backend.get_all_qa_entries("u", "s")) == 3  # reads do not slide
    clock.advance(1)  # now == expiry: dead
    assert await backend.get_all_qa_entries("u", "s") == []
    assert await backend.get_session_context_entries("u", "s") == []
    assert "agent_sessions:u:s:000000000002" in keys(raw)  # still stored, only logically gone

    entry = await backend.create_qa_entry("u", "s", question="new", answer="a", qa_id="q0")  # q0 is free again
    assert await backend.get_all_qa_entries("u", "s") == [entry]
    assert sorted(k for k in keys(raw) if k.startswith("agent_sessions")) == [
        "agent_sessions#ids:u:s:q0",
        "agent_sessions#meta:u:s",
        "agent_sessions:u:s:000000000000",
    ]
    assert "session_context:u:s:000000000000" in keys(raw)  # the context kind was not written: untouched


async def test_sweep_deletes_dead_kinds_only(backend, raw, clock):
    await qa(backend, 3, session="old")
    await backend.create_session_context_entry("u", "old", {"id": "g"})
    clock.advance(TTL / 2)
    await qa(backend, 2, session="new")
    clock.advance(TTL / 2)
    assert await backend.sweep() == 4  # 3 turns + 1 context entry
    assert {k for k in keys(raw) if ":old" in k} == set()
    assert len(await backend.get_all_qa_entries("u", "new")) == 2


async def test_log_epochs_never_repeat_across_delete_and_recreate(backend, clock):
    epochs = set()
    stale = None
    for round_ in range(40):
        await qa(backend, 1)
        log = await backend.read_qa_log("u", "s", stale)
        assert log.reset
        epochs.add(log.cursor[0])
        stale = log.cursor
        if round_ % 2:
            await backend.delete_session("u", "s")
        else:
            clock.advance(TTL)  # expire instead
    assert len(epochs) == 40


# -- unreadable rows ---------------------------------------------------------------------


async def test_unreadable_turns_are_skipped_with_a_warning(backend, raw, caplog):
    await qa(backend, 3)
    raw.set("agent_sessions:u:s:000000000001", "{not json")
    raw.set("agent_sessions:u:s:000000000002", {"a pickled": "dict"})
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        entries = await backend.get_all_qa_entries("u", "s")
    assert [e.qa_id for e in entries] == ["q0"]
    assert len([r for r in caplog.records if "unreadable" in r.getMessage()]) == 2


async def test_unreadable_meta_row_serves_rows_and_is_rebuilt_by_the_next_write(backend, raw, caplog):
    await qa(backend, 2)
    raw.set("agent_sessions#meta:u:s", "garbage")
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        assert [e.qa_id for e in await backend.get_all_qa_entries("u", "s")] == ["q0", "q1"]
        assert any("meta" in r.getMessage() for r in caplog.records)
        await backend.create_qa_entry("u", "s", question="q", answer="a", qa_id="q2")
    assert [e.qa_id for e in await backend.get_all_qa_entries("u", "s")] == ["q0", "q1", "q2"]
    assert raw.get("agent_sessions#ids:u:s:q2") == 2


# -- where the work runs ---------------------------------------------------------------------


@contextmanager
def held_write_lock(directory):
    """Another writer (a plain diskcache handle in a thread) holds the write lock until exit."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        other = diskcache.Cache(str(directory))
        try:
            with other.transact():
                locked.set()
                release.wait(10)
        finally:
            other.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(5)
    try:
        yield release
    finally:
        release.set()
        thread.join()


def count_submits(backend) -> list:
    calls = []
    executor = backend._executor
    submit = executor.submit

    def counting(fn, *args, **kwargs):
        calls.append(fn)
        return submit(fn, *args, **kwargs)

    executor.submit = counting
    return calls


async def test_uncontended_calls_run_inline(backend):
    calls = count_submits(backend)
    await qa(backend, 5)
    await backend.get_latest_qa_entries("u", "s", 2)
    await backend.update_qa_entry("u", "s", "q1", answer="b")
    await backend.create_session_context_entry("u", "s", {"id": "g"})
    assert calls == []


async def test_contended_write_waits_off_the_loop_and_reads_stay_inline(backend, directory):
    await qa(backend, 1)
    calls = count_submits(backend)
    with held_write_lock(directory) as release:
        write = asyncio.create_task(backend.create_qa_entry("u", "s", question="late", answer="a"))
        await asyncio.sleep(0.1)  # the loop runs while the write waits for the lock
        assert not write.done()
        assert [e.qa_id for e in await backend.get_all_qa_entries("u", "s")] == ["q0"]  # WAL read, inline
        assert len(calls) == 1
        release.set()
        await write
    assert [e.question for e in await backend.get_all_qa_entries("u", "s")] == ["q0", "late"]
    await qa(backend, 1, prefix="after")
    assert len(calls) == 1  # uncontended again: back inline


async def test_write_that_cannot_get_the_lock_fails_cleanly(directory, clock):
    async with DiskCache(directory, lock_timeout=0.2, clock=clock, purge_interval_seconds=0) as backend:
        with held_write_lock(directory):
            with pytest.raises(CacheConnectionError):
                await backend.create_qa_entry("u", "s", question="q", answer="a")
        assert await backend.get_all_qa_entries("u", "s") == []
        await qa(backend, 1)  # usable afterwards
