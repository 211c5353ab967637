"""SQLite cache: acknowledged writes survive SIGKILL; storage stays bounded."""

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest

from memlab.cache import SQLCache
from memlab.testing import FakeClock
from memlab.ttl import LazySlackTTL

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from memlab.cache import SQLCache

    async def main(path):
        cache = SQLCache(f"sqlite:///{path}")
        await cache.open()
        i = 0
        while True:
            entry = await cache.create_qa_entry("u", "s", question=f"q{i}", answer="x" * 200)
            print(entry.qa_id, flush=True)  # acknowledged: the call returned
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


def test_sigkill_mid_write_keeps_every_acknowledged_entry(tmp_path):
    path = tmp_path / "cache.db"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    acknowledged = []
    try:
        for line in child.stdout:
            acknowledged.append(line.strip())
            if len(acknowledged) >= 300:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
    assert len(acknowledged) == 300

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()

    async def read():
        cache = SQLCache(f"sqlite:///{path}")
        await cache.open()
        try:
            return [e.qa_id for e in await cache.get_all_qa_entries("u", "s")]
        finally:
            await cache.close()

    stored = asyncio.run(read())
    assert stored[: len(acknowledged)] == acknowledged  # every ack is there, in order
    assert len(stored) == len(set(stored))


@pytest.mark.slow
async def test_storage_bounded_under_100k_appends_and_sweep_removes_rows(tmp_path):
    path = tmp_path / "cache.db"
    clock = FakeClock()
    cache = SQLCache(f"sqlite:///{path}", clock=clock, ttl=LazySlackTTL(3600), purge_interval_seconds=600)
    await cache.open()
    wal = path.with_name("cache.db-wal")
    peak_wal = 0
    for i in range(100_000):
        await cache.create_qa_entry("u", f"s{i % 500}", question=f"q{i}", answer="x" * 200)
        if i % 1000 == 0:
            clock.advance(30)  # 100 batches → 3000 s: sessions expire and sweeps run as time passes
            peak_wal = max(peak_wal, wal.stat().st_size if wal.exists() else 0)
    assert peak_wal < 64 * 1024 * 1024

    clock.advance(timedelta(hours=2).total_seconds())
    removed = await cache.sweep()
    assert removed > 0
    await cache.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT COUNT(*) FROM cache_qa_entries").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM cache_session_state").fetchone() == (0,)
    finally:
        conn.close()


def test_connections_racing_to_switch_a_fresh_file_to_wal_all_succeed(tmp_path):
    """SQLite refuses one of two connections racing for WAL's exclusive lock without waiting; open retries it."""
    import threading

    from memlab._sqlrun import SQLiteRunner

    for attempt in range(60):
        path = tmp_path / f"race{attempt}.db"
        errors: list[BaseException] = []

        def configure() -> None:
            conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
            try:
                SQLiteRunner._configure(conn, 0)
                assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            except BaseException as exc:  # collected: a thread's failure must fail the test
                errors.append(exc)
            finally:
                conn.close()

        threads = [threading.Thread(target=configure) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
