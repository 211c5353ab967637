"""SQLCache on a real PostgreSQL server (``MEMLAB_TEST_POSTGRES_URL``).

Skipped with a reason when the variable is unset, failed under ``CI=true``
(``make test`` / ``scripts/with-servers.sh`` start a throw-away server). Every
test uses its own user/session ids and prunes what it wrote.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from contextlib import asynccontextmanager

import pytest
from sqlalchemy.engine import make_url

from memlab._clock import SystemClock
from memlab._sqlrun import PG_RETRIES, PostgresRunner
from memlab.cache._sql import SWEEP_LOCK_KEY, SQLCache
from memlab.config import CacheConfig, StackConfig, build_cache_backend
from memlab.exceptions import CacheConnectionError, ConfigError, SessionQAEntryValidationError
from memlab.testing import FakeClock
from memlab.testing.suppliers import server_url
from memlab.ttl import LazySlackTTL, NoTTL, SlidingTTL

pytestmark = pytest.mark.server

TTL = 3600.0


@pytest.fixture
def pg_url() -> str:
    return server_url("MEMLAB_TEST_POSTGRES_URL")


@pytest.fixture
def ids():
    """Fresh ``(user_id, session_id)`` for this test."""
    tag = uuid.uuid4().hex[:12]
    return f"user-{tag}", f"session-{tag}"


@pytest.fixture
async def make_cache(pg_url):
    """``await make_cache(**kwargs)`` -> an open SQLCache; all are pruned and closed afterwards."""
    caches: list[SQLCache] = []

    async def make(url: str | None = None, **kwargs) -> SQLCache:
        kwargs.setdefault("clock", FakeClock())
        kwargs.setdefault("ttl", LazySlackTTL(TTL))
        kwargs.setdefault("purge_interval_seconds", 0)
        cache = SQLCache(url or pg_url, **kwargs)
        await cache.open()
        caches.append(cache)
        return cache

    yield make
    if caches:
        cleaner = SQLCache(pg_url)
        await cleaner.open()
        await cleaner.prune()
        await cleaner.close()
    for cache in caches:
        try:
            await cache.close()
        except CacheConnectionError:
            pass


async def _raw(pg_url: str):
    import asyncpg

    return await asyncpg.connect(make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False))


# -- construction (no server needed) -------------------------------------------------


def test_url_forms_and_names():
    assert SQLCache("postgresql+asyncpg://u:pw@db.example:5432/memlab").name == "postgres"
    assert SQLCache("postgresql://u:pw@db.example/memlab").name == "postgres"
    assert SQLCache("postgres://u:pw@db.example/memlab").name == "postgres"
    assert SQLCache("sqlite:///tmp/x/cache.db").name == "sqlite"
    cache = SQLCache("postgresql://alice:s3cret@db.example/memlab")
    assert "s3cret" not in repr(cache) and "s3cret" not in cache.display_url


def test_unsupported_driver_is_a_config_error_without_the_password():
    with pytest.raises(ConfigError) as err:
        SQLCache("postgresql+psycopg2://alice:s3cret@db.example/memlab")
    assert "s3cret" not in str(err.value)


def test_config_takes_cache_db_url_first(monkeypatch):
    monkeypatch.setenv("DB_PROVIDER", "postgres")
    config = StackConfig(cache=CacheConfig(backend="postgres", db_url="postgresql://a:pw@h1/one"))
    cache = build_cache_backend(config, SystemClock())
    assert cache.name == "postgres" and cache.display_url == "postgresql://a:***@h1/one"
    assert cache.ttl.name == "lazy_slack"


def test_config_builds_the_url_from_db_settings(monkeypatch):
    for name, value in {"db_provider": "postgres", "DB_HOST": "dbhost", "DB_PORT": "6543", "DB_USERNAME": "me",
                        "DB_PASSWORD": "p@ss:word/", "DB_NAME": "mydb"}.items():
        monkeypatch.setenv(name, value)
    cache = build_cache_backend(StackConfig(cache=CacheConfig(backend="postgres")), SystemClock())
    assert cache.display_url == "postgresql+asyncpg://me:***@dbhost:6543/mydb"
    assert make_url(cache.url).password == "p@ss:word/"


def test_config_without_a_url_or_db_provider_is_an_error(monkeypatch):
    monkeypatch.delenv("DB_PROVIDER", raising=False)
    monkeypatch.setenv("DB_PASSWORD", "s3cret")
    with pytest.raises(ConfigError, match="postgres cache needs CACHE_DB_URL or DB_PROVIDER=postgres") as err:
        build_cache_backend(StackConfig(cache=CacheConfig(backend="postgres")), SystemClock())
    assert "s3cret" not in str(err.value)
    monkeypatch.setenv("DB_PROVIDER", "sqlite")
    with pytest.raises(ConfigError):
        build_cache_backend(StackConfig(cache=CacheConfig(backend="postgres")), SystemClock())


# -- behaviour -----------------------------------------------------------------------


async def test_append_read_and_log(make_cache, ids):
    cache = await make_cache()
    user, session = ids
    made = [await cache.create_qa_entry(user, session, question=f"q{i}", answer=f"a{i}") for i in range(5)]
    assert [e.qa_id for e in await cache.get_all_qa_entries(user, session)] == [e.qa_id for e in made]
    assert [e.question for e in await cache.get_latest_qa_entries(user, session, 2)] == ["q3", "q4"]
    assert await cache.get_latest_qa_entries(user, "other-session") == []
    assert await cache.get_all_qa_entries("other-user", session) == []

    log = await cache.read_qa_log(user, session)
    assert log.reset and [e.question for e in log.entries] == [f"q{i}" for i in range(5)]
    await cache.create_qa_entry(user, session, question="q5", answer="a5")
    later = await cache.read_qa_log(user, session, log.cursor)
    assert not later.reset and [e.question for e in later.entries] == ["q5"]

    with pytest.raises(SessionQAEntryValidationError):
        await cache.create_qa_entry(user, session, question="dup", answer="x", qa_id=made[0].qa_id)
    assert len(await cache.get_all_qa_entries(user, session)) == 6


async def test_update_feedback_and_delete(make_cache, ids):
    cache = await make_cache()
    user, session = ids
    entry = await cache.create_qa_entry(user, session, question="q", answer="a", memify_metadata={"a": 1})
    log = await cache.read_qa_log(user, session)
    assert await cache.update_qa_entry(user, session, entry.qa_id, feedback_score=4, memify_metadata={"b": True})
    stored = (await cache.get_all_qa_entries(user, session))[0]
    assert stored.feedback_score == 4 and stored.memify_metadata == {"a": 1, "b": True}
    assert (await cache.read_qa_log(user, session, log.cursor)).reset  # a change other than an append

    with pytest.raises(SessionQAEntryValidationError):
        await cache.update_qa_entry(user, session, entry.qa_id, feedback_score=9)
    assert await cache.delete_feedback(user, session, entry.qa_id)
    assert (await cache.get_all_qa_entries(user, session))[0].feedback_score is None
    assert not await cache.update_qa_entry(user, session, "missing", feedback_score=1)
    assert await cache.delete_qa_entry(user, session, entry.qa_id)
    assert not await cache.delete_qa_entry(user, session, entry.qa_id)
    assert await cache.get_all_qa_entries(user, session) == []


async def test_context_upsert_keeps_first_position(make_cache, ids):
    cache = await make_cache()
    user, session = ids
    await cache.create_session_context_entry(user, session, {"id": "g1", "v": 1})
    await cache.create_session_context_entry(user, session, {"id": "g2", "v": 1})
    await cache.create_session_context_entry(user, session, {"id": "g1", "v": 2})
    assert await cache.get_session_context_entries(user, session) == [{"id": "g1", "v": 2}, {"id": "g2", "v": 1}]
    assert await cache.update_session_context_entry(user, session, "g2", {"w": 3})
    assert await cache.delete_session_context_entry(user, session, "g1")
    assert await cache.get_session_context_entries(user, session) == [{"id": "g2", "v": 1, "w": 3}]
    assert await cache.delete_session(user, session)
    assert not await cache.delete_session(user, session)


async def test_ttl_slides_lazily_and_dead_sessions_restart(make_cache, ids):
    clock = FakeClock()
    cache = await make_cache(clock=clock, ttl=LazySlackTTL(TTL, slack=0.05))
    user, session = ids
    await cache.create_qa_entry(user, session, question="q0", answer="a")  # stamps now + TTL
    clock.advance(0.03 * TTL)
    await cache.create_qa_entry(user, session, question="q1", answer="a")  # within slack: no re-stamp
    clock.advance(0.97 * TTL)  # exactly the first expiry: dead (expires_at == now is dead)
    assert await cache.get_all_qa_entries(user, session) == []

    await cache.create_qa_entry(user, session, question="q2", answer="a")  # scoped purge, fresh session
    assert [e.question for e in await cache.get_all_qa_entries(user, session)] == ["q2"]
    clock.advance(0.06 * TTL)
    await cache.create_qa_entry(user, session, question="q3", answer="a")  # lags > slack: re-stamped
    clock.advance(0.97 * TTL)  # past q2's stamp, before q3's
    assert [e.question for e in await cache.get_all_qa_entries(user, session)] == ["q2", "q3"]
    assert await cache.get_latest_qa_entries(user, session, 1) != []  # reads do not slide
    clock.advance(0.03 * TTL + 1)
    assert await cache.get_all_qa_entries(user, session) == []


@pytest.mark.parametrize("policy", [SlidingTTL(TTL), NoTTL()], ids=["sliding", "none"])
async def test_other_ttl_policies_on_the_one_statement_path(make_cache, ids, policy):
    clock = FakeClock()
    cache = await make_cache(clock=clock, ttl=policy)
    user, session = ids
    for i in range(3):
        await cache.create_qa_entry(user, session, question=f"q{i}", answer="a")
        clock.advance(0.5 * TTL)
    clock.advance(0.4 * TTL)  # 0.9 TTL after the last write
    assert len(await cache.get_all_qa_entries(user, session)) == 3
    clock.advance(0.2 * TTL)
    assert len(await cache.get_all_qa_entries(user, session)) == (3 if isinstance(policy, NoTTL) else 0)


async def _count_rows(pg_url: str, user: str) -> int:
    conn = await _raw(pg_url)
    try:
        return await conn.fetchval("SELECT count(*) FROM cache_qa_entries WHERE user_id = $1", user)
    finally:
        await conn.close()


async def test_sweep_skips_while_another_process_holds_the_advisory_lock(make_cache, pg_url, ids):
    clock = FakeClock()
    cache = await make_cache(clock=clock)
    user, _ = ids
    for i in range(3):
        await cache.create_qa_entry(user, f"s{i}", question="q", answer="a")
    clock.advance(TTL + 1)
    other = await _raw(pg_url)
    try:
        assert await other.fetchval("SELECT pg_try_advisory_lock($1)", SWEEP_LOCK_KEY)
        assert await cache.sweep() == 0
        assert await _count_rows(pg_url, user) == 3
        await other.execute("SELECT pg_advisory_unlock($1)", SWEEP_LOCK_KEY)
    finally:
        await other.close()
    assert await cache.sweep() >= 3
    assert await _count_rows(pg_url, user) == 0


async def test_prune_removes_everything(make_cache, pg_url, ids):
    cache = await make_cache()
    user, session = ids
    await cache.create_qa_entry(user, session, question="q", answer="a")
    await cache.create_session_context_entry(user, session, {"id": "g"})
    await cache.prune()
    assert await cache.get_all_qa_entries(user, session) == []
    assert await cache.get_session_context_entries(user, session) == []
    assert await _count_rows(pg_url, user) == 0


# -- concurrency -----------------------------------------------------------------------


async def test_concurrent_updates_of_one_entry_lose_nothing(make_cache, ids):
    cache = await make_cache(clock=None)  # real clock
    user, session = ids
    entry = await cache.create_qa_entry(user, session, question="q", answer="a")

    async def rate(i: int) -> bool:
        return await cache.update_qa_entry(
            user, session, entry.qa_id, feedback_score=i % 5 + 1, memify_metadata={f"k{i}": i}
        )

    assert all(await asyncio.gather(*(rate(i) for i in range(50))))
    (stored,) = await cache.get_all_qa_entries(user, session)  # parses: the entry is valid
    assert stored.qa_id == entry.qa_id and 1 <= stored.feedback_score <= 5
    assert stored.memify_metadata == {f"k{i}": i for i in range(50)}  # every merge landed


async def test_incremental_log_misses_nothing_under_concurrent_appends(make_cache, ids):
    cache = await make_cache(clock=None)
    user, session = ids
    await cache.create_qa_entry(user, session, question="first", answer="a")
    seen: list[str] = []
    done = asyncio.Event()

    async def writer(w: int) -> None:
        for i in range(40):
            await cache.create_qa_entry(user, session, question=f"w{w}-{i}", answer="a")

    async def reader() -> None:
        cursor = None
        while True:
            final = done.is_set()
            log = await cache.read_qa_log(user, session, cursor)
            if log.reset:
                seen.clear()
            seen.extend(e.qa_id for e in log.entries)
            cursor = log.cursor
            if final:
                return
            await asyncio.sleep(0)

    reading = asyncio.create_task(reader())
    await asyncio.gather(*(writer(w) for w in range(6)))
    done.set()
    await reading
    assert seen == [e.qa_id for e in await cache.get_all_qa_entries(user, session)]
    assert len(seen) == 1 + 6 * 40


# -- failures ------------------------------------------------------------------------


async def test_deadlock_is_retried_and_the_transaction_rerun(make_cache, pg_url, ids):
    cache = await make_cache(clock=None)
    user, _ = ids
    for name in ("x", "y"):
        await cache.create_qa_entry(user, name, question="q", answer="a")
    runner: PostgresRunner = cache._runner
    attempts = {"ab": 0, "ba": 0}

    def locker(first: str, second: str, tag: str):
        def work(db) -> str:
            attempts[tag] += 1
            db.raw(f"SELECT 1 FROM cache_session_state WHERE user_id = '{user}' AND session_id = '{first}' FOR UPDATE")
            db.raw("SELECT pg_sleep(0.3)")
            db.raw(f"SELECT 1 FROM cache_session_state WHERE user_id = '{user}' AND session_id = '{second}' FOR UPDATE")
            return tag

        return work

    results = await asyncio.gather(
        runner.run(locker("x", "y", "ab"), write=True), runner.run(locker("y", "x", "ba"), write=True)
    )
    assert sorted(results) == ["ab", "ba"]
    assert attempts["ab"] + attempts["ba"] == 3  # exactly one victim, re-run once


async def test_retries_give_up_after_three(make_cache):
    cache = await make_cache()
    runner: PostgresRunner = cache._runner
    calls = []

    class SerializationFailure(Exception):
        sqlstate = "40001"

    def work(db):
        calls.append(time.monotonic())
        db.raw("SELECT 1")
        raise SerializationFailure("could not serialize access")

    with pytest.raises(SerializationFailure):
        await runner.run(work, write=True)
    assert len(calls) == 1 + PG_RETRIES
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert all(gap >= 0.9 * 0.05 * 2**i for i, gap in enumerate(gaps)), gaps  # backoff 0.05 * 2**attempt
    assert await runner.execute("qa_last_n", {"user_id": "u", "session_id": "s", "now": 0.0, "last_n": 1}, write=False) == []


class _Proxy:
    """A TCP forwarder to the server that can be taken down (refusing connections and
    cutting live ones) and brought back on the same port, or made a black hole."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.blackhole = False
        self._server = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    async def _serve(self, reader, writer) -> None:
        self._writers.add(writer)
        if self.blackhole:
            return  # accepted, never answered
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.add(up_writer)

        async def pipe(src, dst) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@asynccontextmanager
async def _proxy(pg_url: str):
    url = make_url(pg_url)
    proxy = _Proxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.up()
    try:
        yield proxy, url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    finally:
        try:
            await proxy.down()
        except Exception:
            pass


async def test_database_down_fails_fast_and_recovers(make_cache, pg_url, ids):
    user, session = ids
    async with _proxy(pg_url) as (proxy, url):
        cache = await make_cache(url, connect_timeout=1.0)
        await cache.create_qa_entry(user, session, question="before", answer="a")

        await proxy.down()
        for attempt in range(3):
            started = time.monotonic()
            with pytest.raises(CacheConnectionError):
                await cache.create_qa_entry(user, session, question="while down", answer="a")
            with pytest.raises(CacheConnectionError):
                await cache.get_all_qa_entries(user, session)
            assert time.monotonic() - started < 3.0

        await proxy.up()  # same port
        await cache.create_qa_entry(user, session, question="after", answer="a")
        assert [e.question for e in await cache.get_all_qa_entries(user, session)] == ["before", "after"]


async def test_unresponsive_server_hits_the_connect_timeout(pg_url):
    async with _proxy(pg_url) as (proxy, url):
        proxy.blackhole = True
        cache = SQLCache(url, connect_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(CacheConnectionError) as err:
            await cache.open()
        assert time.monotonic() - started < 5.0
        assert "Timeout" in str(err.value)


async def test_errors_never_show_the_password(pg_url):
    url = make_url(pg_url).set(password="not-the-real-one", port=1)  # nothing listens on port 1
    cache = SQLCache(url.render_as_string(hide_password=False), connect_timeout=1.0)
    with pytest.raises(CacheConnectionError) as err:
        await cache.open()
    assert "not-the-real-one" not in str(err.value)
    assert "not-the-real-one" not in repr(cache)


async def test_payloads_are_stored_as_given(make_cache, pg_url, ids):
    cache = await make_cache()
    user, session = ids
    await cache.create_session_context_entry(user, session, {"id": "ü", "text": "naïve ☃", "n": [1, 2]})
    conn = await _raw(pg_url)
    try:
        payload = await conn.fetchval("SELECT payload FROM cache_session_context WHERE user_id = $1", user)
    finally:
        await conn.close()
    assert json.loads(payload) == {"id": "ü", "text": "naïve ☃", "n": [1, 2]}


# -- plans ---------------------------------------------------------------------------


def _literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


@pytest.mark.slow
async def test_generic_plans_stay_on_the_session_indexes(make_cache, pg_url, ids):
    """One huge session must not turn a small session's reads into table scans.

    PostgreSQL reuses generic plans (made without parameter values) for prepared
    statements; with statistics saying one session owns almost every row, a plain
    ``user_id = $1 AND session_id = $2`` would be planned as a scan. Forced here.
    """
    cache = await make_cache(clock=None)
    user, small = ids
    big = f"{small}-big"
    for i in range(5):
        await cache.create_qa_entry(user, small, question=f"q{i}", answer="a")
        await cache.create_session_context_entry(user, small, {"id": f"g{i}"})
    await cache.create_qa_entry(user, big, question="q", answer="a")
    conn = await _raw(pg_url)
    try:
        await conn.execute(
            "INSERT INTO cache_qa_entries (user_id, session_id, qa_id, payload, created_at) "
            "SELECT $1, $2, 'bulk-' || g, '{}', 0 FROM generate_series(1, 30000) g",
            user,
            big,
        )
        await conn.execute(
            "INSERT INTO cache_session_context (user_id, session_id, entry_id, payload, created_at) "
            "SELECT $1, $2, 'bulk-' || g, '{}', 0 FROM generate_series(1, 30000) g",
            user,
            big,
        )
        await conn.execute("ANALYZE cache_qa_entries; ANALYZE cache_session_context; ANALYZE cache_session_state")
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        params = {
            "user_id": user,
            "session_id": small,
            "now": 0.0,
            "last_n": 10,
            "cursor_epoch": 1,
            "after": 3,
        }
        statements = cache._runner.statements
        for i, name in enumerate(["qa_last_n", "qa_all", "qa_log", "context_all", "qa_purge", "context_purge", "state_delete_session"]):
            sql, args = statements.bind(name, params)
            await conn.execute(f"PREPARE plan_{i} AS {sql}")
            plan = "\n".join(
                row[0] for row in await conn.fetch(f"EXPLAIN EXECUTE plan_{i}({', '.join(map(_literal, args))})")
            )
            assert "$1" in plan, plan  # really the generic plan
            assert "Seq Scan on cache_qa_entries" not in plan and "cache_qa_entries_pkey" not in plan, f"{name}:\n{plan}"
            assert "Seq Scan on cache_session_context" not in plan, f"{name}:\n{plan}"
    finally:
        await conn.close()
    assert [e.question for e in await cache.get_latest_qa_entries(user, small, 2)] == ["q3", "q4"]


async def test_plans_made_on_a_tiny_table_are_index_scans(make_cache, pg_url, ids):
    """A plan cached while the tables are small (fresh or just vacuumed) must not scan them whole.

    The cache's connections keep each statement's generic plan; made on a table
    of a page or two, PostgreSQL would pick a sequential scan and keep it as the
    table grows. Checked on the cache's own connection, generic plans forced.
    """
    cache = await make_cache()
    user, session = ids
    await cache.prune()
    conn = await _raw(pg_url)
    try:
        await conn.execute("VACUUM ANALYZE cache_qa_entries, cache_session_context, cache_session_state")
    finally:
        await conn.close()
    await cache.create_qa_entry(user, session, question="q", answer="a")
    await cache.create_session_context_entry(user, session, {"id": "g"})
    params = {
        "user_id": user,
        "session_id": session,
        "kind": "qa",
        "key": "k",
        "payload": "{}",
        "created_at": 0.0,
        "now": 0.0,
        "ttl_on": True,
        "cutoff": 0.0,
        "new_expiry": 1.0,
        "last_n": 10,
        "cursor_epoch": 1,
        "after": 3,
    }
    names = ["qa_last_n", "qa_all", "qa_log", "context_all", "state_lock", "qa_get", "qa_write_fast", "qa_write_fast_restamp"]
    runner: PostgresRunner = cache._runner
    lease = await runner._checkout()
    try:
        driver = lease.driver
        await driver.execute("SET plan_cache_mode = force_generic_plan")
        for i, name in enumerate(names):
            sql, args = runner.statements.bind(name, params)
            await driver.execute(f"PREPARE tiny_{i} AS {sql}")
            plan = "\n".join(row[0] for row in await driver.fetch(f"EXPLAIN EXECUTE tiny_{i}({', '.join(map(_literal, args))})"))
            await driver.execute(f"DEALLOCATE tiny_{i}")
            assert re.search(r"\$\d", plan), plan  # really the generic plan
            assert "Seq Scan" not in plan, f"{name}:\n{plan}"
        await driver.execute("RESET plan_cache_mode")
    finally:
        runner._checkin(lease)
