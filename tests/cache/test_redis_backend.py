"""RedisCache: its own checks, on fakeredis always and on a real server when one is given.

Real Redis runs when ``MEMLAB_TEST_REDIS_URL`` is set (``make test`` starts one); without
it those cases skip, except under ``CI=true`` where a missing server is a failure. Tests
that start their own ``redis-server`` (wrong password, TLS, restart) need the binary too.

The stress check and benchmark can also be run by hand::

    python tests/cache/test_redis_backend.py bench redis://127.0.0.1:6391/0
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from datetime import datetime

import pytest
import redis
import redis.asyncio as aioredis

from memlab.cache._memory import MemoryCache
from memlab.cache._redis import RedisCache, redis_connection_kwargs
from memlab.exceptions import (
    BackendError,
    CacheConnectionError,
    ConfigError,
    SessionParameterValidationError,
    SessionQAEntryValidationError,
    ValidationError,
)
from memlab.models import SessionQAEntry
from memlab.testing import FakeClock
from memlab.testing.suppliers import missing, server_url
from memlab.ttl import LazySlackTTL, NoTTL, SlidingTTL, TTLPolicy

#: operations per lockstep run against MemoryCache (raise it to hunt for disagreements)
LOCKSTEP_STEPS = int(os.environ.get("MEMLAB_LOCKSTEP_STEPS", "250"))


def real_url() -> str:
    return server_url("MEMLAB_TEST_REDIS_URL")


def redis_binary() -> str:
    real_url()  # these cases belong to the real-server run
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server binary not found")
    return binary


def fake_module():
    try:
        import fakeredis
        import lupa  # noqa: F401 - fakeredis runs Lua scripts through lupa
    except ImportError as exc:
        pytest.fail(f"RedisCache tests need fakeredis with Lua: pip install 'fakeredis[lua]' ({exc})")
    return fakeredis


# -- fixtures ---------------------------------------------------------------------------------


class Harness:
    """Builds opened RedisCache instances on one store (a FakeServer or the real server)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.created: list[RedisCache] = []
        if kind == "fake":
            self.fakeredis = fake_module()
            self.server = self.fakeredis.FakeServer()
        else:
            self.url = real_url()

    def raw(self):
        if self.kind == "fake":
            return self.fakeredis.aioredis.FakeRedis(server=self.server, decode_responses=True)
        return aioredis.Redis.from_url(self.url, decode_responses=True)

    async def make(self, **kwargs) -> RedisCache:
        kwargs.setdefault("clock", FakeClock())
        kwargs.setdefault("ttl", SlidingTTL(3600))
        if self.kind == "fake":
            cache = RedisCache(client=self.raw(), **kwargs)
        else:
            cache = RedisCache(self.url, **kwargs)
        await cache.open()
        self.created.append(cache)
        return cache

    async def close(self) -> None:
        for cache in self.created:
            await cache.close()
            if cache._client is not None:  # injected fakeredis client: ours to close
                await cache._client.aclose()


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.server)])
async def harness(request):
    h = Harness(request.param)
    if h.kind == "real":
        cleaner = await h.make()
        await cleaner.prune()
    yield h
    if h.kind == "real":
        cleaner = await h.make()
        await cleaner.prune()
    await h.close()


async def qa(cache, user, session, qa_id, question="q", answer="a", **kw):
    return await cache.create_qa_entry(user, session, question=question, answer=answer, qa_id=qa_id, **kw)


async def ids(cache, user="u", session="s", last_n=None):
    return [entry.qa_id for entry in await cache.get_latest_qa_entries(user, session, last_n)]


# -- QA turns -------------------------------------------------------------------------------


async def test_append_order_last_n_and_validation(harness):
    cache = await harness.make()
    for i in range(5):
        await qa(cache, "u", "s", f"q{i}", question=f"question {i}")
    assert await ids(cache) == [f"q{i}" for i in range(5)]
    assert await ids(cache, last_n=1) == ["q4"]
    assert await ids(cache, last_n=3) == ["q2", "q3", "q4"]
    assert await ids(cache, last_n=50) == [f"q{i}" for i in range(5)]
    assert [e.question for e in await cache.get_all_qa_entries("u", "s")][-1] == "question 4"
    for bad in (0, -1, True, 1.0):
        with pytest.raises(SessionParameterValidationError):
            await cache.get_latest_qa_entries("u", "s", bad)
    assert await cache.get_all_qa_entries("u", "other") == []


async def test_duplicate_qa_id_is_rejected_and_writes_nothing(harness):
    cache = await harness.make()
    await qa(cache, "u", "s", "same", answer="first")
    with pytest.raises(SessionQAEntryValidationError):
        await qa(cache, "u", "s", "same", answer="second")
    entries = await cache.get_all_qa_entries("u", "s")
    assert [(e.qa_id, e.answer) for e in entries] == [("same", "first")]


async def test_sessions_are_per_user_and_colons_do_not_collide(harness):
    cache = await harness.make()
    await qa(cache, "a:b", "c", "one")
    await qa(cache, "a", "b:c", "two")
    await qa(cache, "a%3Ab", "c", "three")
    assert await ids(cache, "a:b", "c") == ["one"]
    assert await ids(cache, "a", "b:c") == ["two"]
    assert await ids(cache, "a%3Ab", "c") == ["three"]
    assert await cache.delete_session("a:b", "c") is True
    assert await ids(cache, "a", "b:c") == ["two"]


async def test_update_merges_and_invalid_update_changes_nothing(harness):
    cache = await harness.make()
    await qa(cache, "u", "s", "x", memify_metadata={"keep": True})
    assert await cache.update_qa_entry("u", "s", "x", answer="new", feedback_score=4, memify_metadata={"flag": False})
    (entry,) = await cache.get_all_qa_entries("u", "s")
    assert (entry.answer, entry.question, entry.feedback_score) == ("new", "q", 4)
    assert entry.memify_metadata == {"keep": True, "flag": False}
    with pytest.raises(SessionQAEntryValidationError):
        await cache.update_qa_entry("u", "s", "x", feedback_score=9)
    assert (await cache.get_all_qa_entries("u", "s"))[0] == entry
    assert await cache.update_qa_entry("u", "s", "missing", answer="z") is False
    assert await cache.delete_feedback("u", "s", "x") is True
    (entry,) = await cache.get_all_qa_entries("u", "s")
    assert entry.feedback_score is None and entry.feedback_text is None


async def test_delete_keeps_the_index_right(harness):
    cache = await harness.make()
    for i in range(8):
        await qa(cache, "u", "s", f"q{i}")
    for gone in ("q0", "q7", "q3", "q5"):  # first, last, middle (front half), middle (back half)
        assert await cache.delete_qa_entry("u", "s", gone) is True
    assert await cache.delete_qa_entry("u", "s", "q3") is False
    assert await ids(cache) == ["q1", "q2", "q4", "q6"]
    for left in ("q1", "q2", "q4", "q6"):  # every position still maps to its own turn
        assert await cache.update_qa_entry("u", "s", left, answer=f"answer {left}")
    await qa(cache, "u", "s", "q9")
    assert await cache.update_qa_entry("u", "s", "q9", answer="answer q9")
    entries = await cache.get_all_qa_entries("u", "s")
    assert [(e.qa_id, e.answer) for e in entries] == [(q, f"answer {q}") for q in ("q1", "q2", "q4", "q6", "q9")]
    for q in ("q1", "q2", "q4", "q6", "q9"):
        assert await cache.delete_qa_entry("u", "s", q)
    assert await ids(cache) == []
    await qa(cache, "u", "s", "q1")  # ids are free again once deleted
    assert await ids(cache) == ["q1"]


# -- session context ---------------------------------------------------------------------------


async def test_context_upsert_keeps_position_and_last_writer_wins(harness):
    cache = await harness.make()
    for entry_id in ("a", "b", "c"):
        assert await cache.create_session_context_entry("u", "s", {"id": entry_id, "v": 1}) == entry_id
    await cache.create_session_context_entry("u", "s", {"id": "a", "v": 2})
    generated = await cache.create_session_context_entry("u", "s", {"v": 3})
    uuid.UUID(generated)
    entries = await cache.get_session_context_entries("u", "s")
    assert [(e["id"], e["v"]) for e in entries] == [("a", 2), ("b", 1), ("c", 1), (generated, 3)]
    assert await cache.update_session_context_entry("u", "s", "b", {"v": 5, "extra": "x"})
    assert await cache.update_session_context_entry("u", "s", "nope", {"v": 5}) is False
    assert await cache.delete_session_context_entry("u", "s", "a") is True
    assert await cache.delete_session_context_entry("u", "s", "a") is False
    await cache.create_session_context_entry("u", "s", {"id": "a", "v": 9})  # re-inserted: goes last
    entries = await cache.get_session_context_entries("u", "s")
    assert [e["id"] for e in entries] == ["b", "c", generated, "a"]
    assert entries[0] == {"id": "b", "v": 5, "extra": "x"}


# -- TTL ------------------------------------------------------------------------------------


async def test_ttl_counts_from_last_write_per_kind(harness):
    clock = FakeClock()
    cache = await harness.make(clock=clock, ttl=SlidingTTL(100))
    await qa(cache, "u", "s", "q0")
    await cache.create_session_context_entry("u", "s", {"id": "c"})
    clock.advance(60)
    assert await ids(cache) == ["q0"]  # reads never slide
    await qa(cache, "u", "s", "q1")  # slides qa only
    clock.advance(40)  # context: exactly at expiry -> dead; qa: 40 s after its last write
    assert await cache.get_session_context_entries("u", "s") == []
    assert await cache.update_session_context_entry("u", "s", "c", {"x": 1}) is False
    assert await ids(cache) == ["q0", "q1"]
    assert await cache.update_qa_entry("u", "s", "q0", answer="slid")
    clock.advance(99)
    assert await ids(cache) == ["q0", "q1"]
    clock.advance(1)
    assert await ids(cache) == []
    assert await cache.delete_qa_entry("u", "s", "q0") is False
    assert await cache.delete_session("u", "s") is False
    await qa(cache, "u", "s", "q0")  # scoped purge: the dead turns are gone, the id is free
    assert await ids(cache) == ["q0"]


async def test_delete_context_does_not_slide(harness):
    clock = FakeClock()
    cache = await harness.make(clock=clock, ttl=SlidingTTL(100))
    await cache.create_session_context_entry("u", "s", {"id": "a"})
    await cache.create_session_context_entry("u", "s", {"id": "b"})
    clock.advance(90)
    assert await cache.delete_session_context_entry("u", "s", "a")
    clock.advance(10)
    assert await cache.get_session_context_entries("u", "s") == []


async def test_sweep_removes_dead_rows_and_keys(harness):
    clock = FakeClock()
    cache = await harness.make(clock=clock, ttl=SlidingTTL(100), purge_interval_seconds=0)
    for i in range(3):
        await qa(cache, "u", "dies", f"q{i}")
    await cache.create_session_context_entry("u", "dies", {"id": "c"})
    clock.advance(50)
    await qa(cache, "u", "lives", "q0")
    clock.advance(50)
    assert await cache.sweep() == 4
    assert await cache.sweep() == 0
    raw = harness.raw()
    keys = sorted(await raw.keys("*dies*"))
    await raw.aclose()
    assert keys == []
    assert await ids(cache, "u", "lives") == ["q0"]


async def test_first_write_sweeps_then_throttled(harness):
    clock = FakeClock()
    writer = await harness.make(clock=clock, ttl=SlidingTTL(10))
    await qa(writer, "u", "old", "q0")
    clock.advance(10)
    fresh = await harness.make(clock=clock, ttl=SlidingTTL(10), purge_interval_seconds=900)
    await qa(fresh, "u", "new", "q0")  # first write of this instance sweeps "old"
    raw = harness.raw()
    assert await raw.exists("agent_sessions:u:old") == 0
    await qa(writer, "u", "old2", "q0")
    clock.advance(10)
    await qa(fresh, "u", "new2", "q0")  # within the interval: no sweep
    assert await raw.exists("agent_sessions:u:old2") == 1
    await raw.aclose()


async def test_no_ttl_policy_stores_no_expiry(harness):
    clock = FakeClock()
    cache = await harness.make(clock=clock, ttl=NoTTL())
    await qa(cache, "u", "s", "q0")
    await cache.create_session_context_entry("u", "s", {"id": "c"})
    clock.advance(10**9)
    assert await ids(cache) == ["q0"]
    assert await cache.sweep() == 0
    raw = harness.raw()
    ttls = {key: await raw.pttl(key) for key in await raw.keys("*:u:s")}
    await raw.aclose()
    assert len(ttls) == 5 and set(ttls.values()) == {-1}


async def test_native_expiry_is_set_and_never_shorter_than_logical(harness):
    cache = await harness.make(ttl=SlidingTTL(600))
    await qa(cache, "u", "s", "q0")
    await cache.create_session_context_entry("u", "s", {"id": "c"})
    raw = harness.raw()
    ttls = {key: await raw.pttl(key) for key in await raw.keys("*:u:s")}
    await raw.aclose()
    assert len(ttls) == 5
    for key, ms in ttls.items():
        assert 600_000 < ms <= 601_000, (key, ms)


async def test_key_layout(harness):
    clock = FakeClock()
    cache = await harness.make(clock=clock, ttl=SlidingTTL(100))
    entry = await qa(cache, "user-1", "sess-1", "q0")
    await cache.create_session_context_entry("user-1", "sess-1", {"id": "c1", "v": 1})
    raw = harness.raw()
    expected = {
        "agent_sessions:user-1:sess-1": "list",
        "session_context:user-1:sess-1": "hash",
        "memlab_ctx_order:user-1:sess-1": "zset",
        "memlab_qa_index:user-1:sess-1": "hash",
        "memlab_meta:user-1:sess-1": "hash",
    }
    assert {key: await raw.type(key) for key in await raw.keys("*")} == expected
    (stored,) = await raw.lrange("agent_sessions:user-1:sess-1", 0, -1)
    assert SessionQAEntry.model_validate_json(stored) == entry
    assert json.loads(await raw.hget("session_context:user-1:sess-1", "c1")) == {"id": "c1", "v": 1}
    assert await raw.hgetall("memlab_qa_index:user-1:sess-1") == {"q0": "0"}
    meta = await raw.hgetall("memlab_meta:user-1:sess-1")
    expires = (clock.now() - datetime(1970, 1, 1, tzinfo=clock.now().tzinfo)).total_seconds() + 100
    assert int(meta["qa_exp"]) == int(meta["ctx_exp"]) == int(expires * 1_000_000)
    assert set(meta) == {"qa_epoch", "qa_exp", "ctx_seq", "ctx_exp"}
    await raw.aclose()


async def test_prune_removes_only_memlab_keys(harness):
    cache = await harness.make()
    await qa(cache, "u", "s", "q0")
    await cache.create_session_context_entry("u", "s", {"id": "c"})
    raw = harness.raw()
    await raw.set("someone_else:key", "v")
    await raw.rpush("agent_traces:u:s", "not ours")
    await cache.prune()
    assert sorted(await raw.keys("*")) == ["agent_traces:u:s", "someone_else:key"]
    await raw.delete("someone_else:key", "agent_traces:u:s")
    await raw.aclose()
    assert await ids(cache) == []


# -- change feed ----------------------------------------------------------------------------


async def test_read_qa_log_cursor(harness):
    clock = FakeClock()
    cache = await harness.make(clock=clock, ttl=SlidingTTL(100))
    log = await cache.read_qa_log("u", "s")
    assert (log.entries, log.reset) == ([], True)
    await qa(cache, "u", "s", "q0")
    await qa(cache, "u", "s", "q1")
    first = await cache.read_qa_log("u", "s")
    assert ([e.qa_id for e in first.entries], first.reset) == (["q0", "q1"], True)
    await qa(cache, "u", "s", "q2")
    log = await cache.read_qa_log("u", "s", first.cursor)
    assert ([e.qa_id for e in log.entries], log.reset) == (["q2"], False)
    again = await cache.read_qa_log("u", "s", log.cursor)
    assert (again.entries, again.reset, again.cursor) == ([], False, log.cursor)
    await cache.update_qa_entry("u", "s", "q1", answer="changed")
    log = await cache.read_qa_log("u", "s", log.cursor)
    assert (len(log.entries), log.reset) == (3, True)
    stale = log.cursor
    await cache.delete_session("u", "s")
    for i in range(3):
        await qa(cache, "u", "s", f"q{i}")
    assert (await cache.read_qa_log("u", "s", stale)).reset is True  # the epoch never repeats
    clock.advance(100)
    log = await cache.read_qa_log("u", "s", stale)
    assert (log.entries, log.reset) == ([], True)


# -- agreement with MemoryCache ---------------------------------------------------------------


class StampOnceTTL(TTLPolicy):
    """A custom policy (not built in): expiry fixed by the first write of a live kind."""

    name = "stamp_once"

    def restamp_cutoff(self, now):
        return now if self.enabled else None  # a live kind's expiry is never before now


POLICIES = {
    "sliding": lambda: SlidingTTL(50),
    "lazy_slack": lambda: LazySlackTTL(50, slack=0.3),
    "none": NoTTL,
    "custom": lambda: StampOnceTTL(50),
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
async def test_lockstep_with_memory_cache(harness, policy):
    clock = FakeClock()
    model = MemoryCache(ttl=POLICIES[policy](), clock=clock, purge_interval_seconds=30)
    cache = await harness.make(ttl=POLICIES[policy](), clock=clock, purge_interval_seconds=30)
    rng = random.Random(f"redis-lockstep-{policy}")
    users, sessions = ["u", "v:1"], ["s", "t"]
    qa_ids, ctx_ids = [f"q{i}" for i in range(6)], ["c1", "c2", "c3"]
    cursors: dict = {}

    async def both(fn):
        out = []
        for backend in (model, cache):
            try:
                out.append(("ok", await fn(backend)))
            except ValidationError as exc:
                out.append(("error", type(exc)))
        return out

    for step in range(LOCKSTEP_STEPS):
        u, s = rng.choice(users), rng.choice(sessions)
        op = rng.choice(
            ["create"] * 4 + ["read", "update", "feedback", "delete_qa", "delete_session", "ctx_put", "ctx_put",
                              "ctx_update", "ctx_delete", "ctx_read", "log", "sweep", "advance", "advance"]
        )
        if op == "create":
            q, answer = rng.choice(qa_ids), rng.choice(["x", "y"])
            got = await both(lambda b: qa(b, u, s, q, question=f"{step}", answer=answer))
        elif op == "read":
            n = rng.choice([None, 1, 2, 5])
            got = await both(lambda b: b.get_latest_qa_entries(u, s, n))
        elif op == "update":
            q, score = rng.choice(qa_ids), rng.choice([None, 3, 9])
            got = await both(lambda b: b.update_qa_entry(u, s, q, answer=f"a{step}", feedback_score=score,
                                                         memify_metadata={f"k{step % 3}": True}))
        elif op == "feedback":
            q = rng.choice(qa_ids)
            got = await both(lambda b: b.delete_feedback(u, s, q))
        elif op == "delete_qa":
            q = rng.choice(qa_ids)
            got = await both(lambda b: b.delete_qa_entry(u, s, q))
        elif op == "delete_session":
            got = await both(lambda b: b.delete_session(u, s))
        elif op == "ctx_put":
            c = rng.choice(ctx_ids)
            got = await both(lambda b: b.create_session_context_entry(u, s, {"id": c, "step": step}))
        elif op == "ctx_update":
            c = rng.choice(ctx_ids)
            got = await both(lambda b: b.update_session_context_entry(u, s, c, {"u": step}))
        elif op == "ctx_delete":
            c = rng.choice(ctx_ids)
            got = await both(lambda b: b.delete_session_context_entry(u, s, c))
        elif op == "ctx_read":
            got = await both(lambda b: b.get_session_context_entries(u, s))
        elif op == "log":
            logs = []
            for backend in (model, cache):
                log = await backend.read_qa_log(u, s, cursors.get((id(backend), u, s)))
                cursors[(id(backend), u, s)] = log.cursor
                logs.append((log.entries, log.reset))
            got = logs
        elif op == "sweep":
            got = await both(lambda b: b.sweep())
        else:
            clock.advance(rng.choice([0, 1, 10, 25, 49, 50]))
            continue
        assert got[0] == got[1], (step, op, u, s, got)
    for u in users:
        for s in sessions:
            assert await model.get_all_qa_entries(u, s) == await cache.get_all_qa_entries(u, s)
            assert await model.get_session_context_entries(u, s) == await cache.get_session_context_entries(u, s)


# -- concurrency ----------------------------------------------------------------------------


async def test_concurrent_updates_lose_nothing(harness):
    clock = FakeClock()
    caches = [await harness.make(clock=clock) for _ in range(3)]
    await qa(caches[0], "u", "s", "x")
    await caches[0].create_session_context_entry("u", "s", {"id": "c"})
    await asyncio.gather(
        *(caches[i % 3].update_qa_entry("u", "s", "x", memify_metadata={f"k{i}": True}) for i in range(30)),
        *(caches[i % 3].update_session_context_entry("u", "s", "c", {f"k{i}": i}) for i in range(30)),
        *(qa(caches[i % 3], "u", "s", f"n{i}") for i in range(30)),
    )
    entries = await caches[1].get_all_qa_entries("u", "s")
    assert entries[0].memify_metadata == {f"k{i}": True for i in range(30)}
    assert sorted(e.qa_id for e in entries[1:]) == sorted(f"n{i}" for i in range(30))
    (ctx,) = await caches[2].get_session_context_entries("u", "s")
    assert ctx == {"id": "c", **{f"k{i}": i for i in range(30)}}


async def test_custom_policy_survives_concurrent_writers(harness):
    clock = FakeClock()
    caches = [await harness.make(clock=clock, ttl=StampOnceTTL(100)) for _ in range(3)]
    await asyncio.gather(*(qa(caches[i % 3], "u", "s", f"q{i}") for i in range(30)))
    clock.advance(99)
    await qa(caches[0], "u", "s", "late")  # StampOnce: does not move the expiry
    assert len(await caches[1].get_all_qa_entries("u", "s")) == 31
    clock.advance(1)
    assert await caches[2].get_all_qa_entries("u", "s") == []


# -- connection settings and errors -------------------------------------------------------------


@pytest.mark.parametrize(
    ("reqs", "mode"), [("required", ssl.CERT_REQUIRED), ("optional", ssl.CERT_OPTIONAL), ("none", ssl.CERT_NONE)]
)
def test_tls_settings_reach_both_clients(reqs, mode):
    cache = RedisCache(host="cache.example", port=6380, password="pw", ssl=True, ssl_cert_reqs=reqs)
    async_pool = cache._new_client().connection_pool  # the client open() uses
    sync_pool = cache.sync_client().connection_pool
    assert async_pool.connection_class is redis.asyncio.connection.SSLConnection
    assert sync_pool.connection_class is redis.connection.SSLConnection
    for pool in (async_pool, sync_pool):
        kwargs = pool.connection_kwargs
        assert (kwargs["host"], kwargs["port"], kwargs["ssl_cert_reqs"]) == ("cache.example", 6380, mode)
        assert kwargs["socket_connect_timeout"] == 2.0
        assert pool.make_connection().retry.get_retries() == 0
    cache.sync_client().close()


def test_connection_kwargs_from_urls():
    kw = redis_connection_kwargs("rediss://alice:p%40ss@h1:7000/3?ssl_cert_reqs=none", host="ignored")
    assert (kw["host"], kw["port"], kw["db"], kw["username"], kw["password"]) == ("h1", 7000, 3, "alice", "p@ss")
    assert (kw["ssl"], kw["ssl_cert_reqs"]) == (True, ssl.CERT_NONE)
    plain = redis_connection_kwargs("redis://h2", ssl_cert_reqs="optional")
    assert (plain["host"], plain["port"], plain["db"], plain["ssl"]) == ("h2", 6379, 0, False)
    unix = redis_connection_kwargs("unix:///run/redis.sock?db=2")
    assert (unix["unix_socket_path"], unix["db"]) == ("/run/redis.sock", 2) and "host" not in unix
    for bad in ("http://h", "redis://h/0?bogus=1"):
        with pytest.raises(ConfigError):
            redis_connection_kwargs(bad)
    with pytest.raises(ConfigError):
        redis_connection_kwargs(ssl_cert_reqs="sometimes")
    cache = RedisCache("redis://:topsecret@h3:6390/1")
    assert "topsecret" not in repr(cache) and cache.where == "h3:6390"


def test_sync_client_needs_connection_settings():
    fakeredis = fake_module()
    with pytest.raises(ConfigError):
        RedisCache(client=fakeredis.aioredis.FakeRedis()).sync_client()


def test_a_client_that_is_not_redis_asyncio_is_refused():
    with pytest.raises(ConfigError, match="redis.asyncio.Redis.*got Redis"):
        RedisCache(client=redis.Redis())  # the sync client


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_unreachable_server_fails_fast_and_names_the_address():
    port = _free_port()
    cache = RedisCache(host="127.0.0.1", port=port, password="hunter2-secret")
    started = time.monotonic()
    with pytest.raises(CacheConnectionError) as info:
        await cache.open()
    assert time.monotonic() - started < 2.5
    assert f"127.0.0.1:{port}" in str(info.value) and "unreachable" in str(info.value)
    assert "hunter2" not in str(info.value)
    with pytest.raises(CacheConnectionError, match="not open"):
        await cache.get_all_qa_entries("u", "s")


@pytest.mark.server
async def test_a_cancelled_call_leaves_no_reply_for_the_next():
    """A call cancelled between send and reply drops its connection: the next call reads its own reply."""
    cache = RedisCache(real_url())
    await cache.open()
    admin = aioredis.Redis.from_url(real_url(), decode_responses=True)
    session, other = f"s-{uuid.uuid4().hex}", f"o-{uuid.uuid4().hex}"
    try:
        await qa(cache, "u", session, "q0")
        await qa(cache, "u", other, "o0")
        for cancelled in (lambda: ids(cache, session=other), lambda: qa(cache, "u", other, "o1")):
            await admin.client_pause(300, all=True)  # the server holds the next replies back
            blocked = asyncio.ensure_future(cancelled())
            await asyncio.sleep(0.05)  # sent; no reply yet
            blocked.cancel()
            with pytest.raises(asyncio.CancelledError):
                await blocked
            assert await ids(cache, session=session) == ["q0"]  # not the cancelled call's late reply
        await qa(cache, "u", session, "q1")
        assert await ids(cache, session=session) == ["q0", "q1"]
    finally:
        await cache.delete_session("u", session)
        await cache.delete_session("u", other)
        await cache.close()
        await admin.aclose()


async def test_calls_overlapping_on_one_backend_each_get_their_own_reply(harness):
    """Overlapping calls each take a pooled connection of their own."""
    cache = await harness.make()
    await asyncio.gather(*(qa(cache, "u", f"s{i % 4}", f"q{i}") for i in range(40)))
    reads = await asyncio.gather(*(cache.get_all_qa_entries("u", f"s{i % 4}") for i in range(40)))
    for i, entries in enumerate(reads):
        assert sorted(e.qa_id for e in entries) == sorted(f"q{j}" for j in range(40) if j % 4 == i % 4)


async def test_an_injected_client_whose_pool_raises_when_full_makes_calls_wait(harness):
    """redis-py's default pool raises once ``max_connections`` are in use; the backend holds further calls instead."""
    if harness.kind == "fake":
        client = harness.fakeredis.aioredis.FakeRedis(server=harness.server, decode_responses=True, max_connections=4)
    else:
        client = aioredis.Redis.from_url(harness.url, decode_responses=True, max_connections=4)
    cache = RedisCache(client=client, clock=FakeClock())
    await cache.open()
    try:
        await asyncio.gather(*(qa(cache, "u", "s", f"q{i}") for i in range(40)))
        reads = await asyncio.gather(*(ids(cache) for _ in range(40)))
        assert all(sorted(read) == sorted(f"q{i}" for i in range(40)) for read in reads)
    finally:
        await cache.close()
        await client.aclose()


async def test_script_flush_and_reopen(harness):
    cache = await harness.make()
    await qa(cache, "u", "s", "q0")
    raw = harness.raw()
    await raw.script_flush()
    await raw.aclose()
    await qa(cache, "u", "s", "q1")  # NOSCRIPT: loaded again transparently
    await cache.close()
    with pytest.raises(CacheConnectionError, match="not open"):
        await cache.get_all_qa_entries("u", "s")
    await cache.open()
    assert await ids(cache) == ["q0", "q1"]


async def test_connection_loss_and_recovery_on_fakeredis():
    fakeredis = fake_module()
    server = fakeredis.FakeServer()
    client = fakeredis.aioredis.FakeRedis(server=server, decode_responses=True)
    cache = RedisCache(client=client, clock=FakeClock())
    await cache.open()
    await qa(cache, "u", "s", "q0")
    server.connected = False
    with pytest.raises(CacheConnectionError):
        await qa(cache, "u", "s", "q1")
    with pytest.raises(CacheConnectionError):
        await cache.get_all_qa_entries("u", "s")
    server.connected = True
    await qa(cache, "u", "s", "q1")
    assert await ids(cache) == ["q0", "q1"]
    await cache.close()
    await client.aclose()


# -- real servers that the tests start ------------------------------------------------------------


class SpawnedRedis:
    """A throw-away redis-server child process on a free loopback port."""

    def __init__(self, *args: str, tls: tuple[str, str] | None = None) -> None:
        self.binary = redis_binary()
        self.port = _free_port()
        self.args = args
        self.tls = tls
        self.dir = tempfile.mkdtemp(prefix="memlab-redis-")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        port_args = ["--port", str(self.port)]
        if self.tls:
            cert, key = self.tls
            port_args = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", cert, "--tls-key-file", key,
                         "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(
            [self.binary, *port_args, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self.dir,
             *self.args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        pytest.fail(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def spawn():
    servers: list[SpawnedRedis] = []

    def factory(*args: str, tls=None, start=True) -> SpawnedRedis:
        server = SpawnedRedis(*args, tls=tls)
        servers.append(server)
        if start:
            server.start()
        return server

    yield factory
    for server in servers:
        server.cleanup()


@pytest.mark.server
async def test_wrong_password_names_host_port_never_the_password(spawn):
    server = spawn("--requirepass", "right-Pa55word")
    where = f"127.0.0.1:{server.port}"
    for cache in (
        RedisCache(host="127.0.0.1", port=server.port, password="wrong-Pa55word"),
        RedisCache(f"redis://:wrong-Pa55word@127.0.0.1:{server.port}/0"),
        RedisCache(host="127.0.0.1", port=server.port),
    ):
        with pytest.raises(BackendError) as info:
            await cache.open()
        message = str(info.value)
        assert where in message and "authentication failed" in message, message
        assert "Pa55word" not in message and "Pa55word" not in repr(info.value.__cause__)
    good = RedisCache(host="127.0.0.1", port=server.port, password="right-Pa55word")
    async with good:
        assert await good.get_all_qa_entries("u", "s") == []


@pytest.mark.server
async def test_tls_against_plain_server_is_a_named_error():
    url = real_url()
    cache = RedisCache(url, ssl=True, ssl_cert_reqs="none")
    with pytest.raises(BackendError) as info:
        await cache.open()
    host_port = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    assert host_port in str(info.value) and "TLS" in str(info.value)


@pytest.mark.server
async def test_tls_server_both_clients_and_cert_checks(spawn, tmp_path):
    if shutil.which("openssl") is None:
        missing("openssl not found (needed to make a test certificate)")
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
         "-subj", "/CN=localhost"],
        check=True, capture_output=True,
    )
    server = spawn(tls=(cert, key))
    lax = RedisCache(host="127.0.0.1", port=server.port, ssl=True, ssl_cert_reqs="none")
    async with lax:
        await qa(lax, "u", "s", "q0")
        assert await ids(lax) == ["q0"]
        assert lax.sync_client().llen("agent_sessions:u:s") == 1
    strict = RedisCache(f"rediss://127.0.0.1:{server.port}/0")  # required: self-signed is refused
    with pytest.raises(BackendError, match=f"127.0.0.1:{server.port}.*TLS certificate not trusted"):
        await strict.open()
    plain = RedisCache(host="127.0.0.1", port=server.port)
    with pytest.raises(BackendError, match=f"127.0.0.1:{server.port}.*TLS"):
        await plain.open()


@pytest.mark.server
async def test_server_down_then_back_same_instance(spawn):
    from memlab.session import SessionManager

    server = spawn(start=False)
    cache = RedisCache(host="127.0.0.1", port=server.port, clock=FakeClock())
    manager = SessionManager(cache)
    with pytest.raises(CacheConnectionError, match=f"127.0.0.1:{server.port}"):
        await cache.open()
    assert await manager.get_session("u", session_id="s") == []
    server.start()
    assert await manager.add_qa("u", "q", "a", session_id="s") is not None  # opens now
    server.stop()
    with pytest.raises(CacheConnectionError):
        await qa(cache, "u", "s", "q1")
    assert await manager.get_session("u", session_id="s") == []
    assert await manager.add_feedback("u", "missing", feedback_score=3, session_id="s") is False
    server.start()  # same port, empty data (no persistence)
    await qa(cache, "u", "s", "q1")  # same instance, no reopen
    assert await ids(cache) == ["q1"]
    assert len(await manager.get_session("u", session_id="s")) == 1
    await cache.close()


@pytest.mark.server
async def test_stack_degrades_and_recovers_without_restart(spawn, tmp_path):
    """Redis down at start and mid-run: reads give [], writes report failure, recall still answers.

    No self-improvement: a background bridge into the graph would make what recall
    finds depend on when it ran.
    """
    from memlab import MemoryStack, StackConfig
    from memlab.config import CacheConfig

    server = spawn(start=False)
    config = StackConfig(data_root=tmp_path, cache=CacheConfig(backend="redis", host="127.0.0.1", port=server.port))
    async with MemoryStack.from_config(config) as stack:
        assert (await stack.remember("lost", session_id="s", self_improvement=False)).status == "cache_unavailable"
        assert await stack.session.get_session(session_id="s") == []
        assert await stack.recall("lost", session_id="s") == []
        assert await stack.session.add_feedback("s", "qa", "x", 3) is False

        server.start()
        assert (await stack.remember("kept", session_id="s", self_improvement=False)).status == "session_stored"
        assert [r.answer for r in await stack.recall("kept", session_id="s")] == ["kept"]

        server.stop()
        assert (await stack.remember("during outage", session_id="s", self_improvement=False)).status == "cache_unavailable"
        assert await stack.session.get_session(session_id="s") == []
        assert await stack.recall("kept", session_id="s") == []

        server.start()  # a fresh, empty server on the same port
        assert (await stack.remember("back", session_id="s", self_improvement=False)).status == "session_stored"
        assert [e.answer for e in await stack.session.get_session(session_id="s")] == ["back"]
