"""The TTL contract, as properties, on every registered backend and on the pure policies.

Expiry counts from the session's last write of a kind, never from a read: an entry
is gone 1.0·TTL after that write, and visible for at least (1 - slack)·TTL
(slack 0.05 for ``lazy_slack``, 0 for ``sliding``, 0.5 for the custom policy defined
here, which backends know only by its declared rule). TTL 0 stores no expiry and
writes none. Time moves only through a FakeClock.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sqlite3
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.cache._base import CacheBackend
from memlab.exceptions import ConfigError
from memlab.testing import FakeClock
from memlab.testing.suppliers import BACKENDS, supply_backend
from memlab.ttl import LazySlackTTL, NoTTL, SlidingTTL, TTLPolicy

TTL = 1000.0
U, S = "u1", "s1"
YEAR = 365 * 86400.0



class CustomSlackTTL(TTLPolicy):
    """A policy from outside memlab's built-ins: re-stamps once expiry lags the target by ``slack``·TTL."""

    name = "custom_slack"

    def __init__(self, seconds: float | None, slack: float = 0.5) -> None:
        super().__init__(seconds)
        self.slack = slack

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        if self.seconds is None:
            return None
        return now + timedelta(seconds=(1 - self.slack) * self.seconds)


POLICIES: dict[str, Callable[[], TTLPolicy]] = {
    "sliding": lambda: SlidingTTL(TTL),
    "lazy_slack": lambda: LazySlackTTL(TTL),
    "custom": lambda: CustomSlackTTL(TTL),
}

BACKEND_SETTINGS = settings(max_examples=30, deadline=None)


# -- per-backend probes of the stored expiry (add one for a new backend) ------------------


def _memory_expiries(backend) -> dict:
    return {key: state.expires_at for key, state in backend._data.items()}


def _sqlite_expiries(backend) -> dict:
    rows = backend._runner._inline.execute("SELECT user_id, session_id, kind, expires_at FROM cache_session_state").fetchall()
    return {(user, session, kind): expires_at for user, session, kind, expires_at in rows}


async def _postgres_expiries(backend) -> dict:
    def read(db):
        cursor = db._conn.cursor()
        cursor.execute("SELECT user_id, session_id, kind, expires_at FROM cache_session_state")
        return cursor.fetchall()

    rows = await backend._runner.run(read, write=False)
    return {(user, session, kind): expires_at for user, session, kind, expires_at in rows}


async def _redis_expiries(backend) -> dict:
    client = backend._client
    found = {}
    async for key in client.scan_iter(match="memlab_meta:*"):
        qa_exp, ctx_exp = await client.hmget(key, "qa_exp", "ctx_exp")
        found[(key, "qa")], found[(key, "context")] = qa_exp, ctx_exp
    return found


def _fs_expiries(backend) -> dict:
    cache = backend._fast
    return {key: json.loads(cache.get(key))["exp"] for key in cache.iterkeys() if "#meta:" in key}


EXPIRY_PROBES: dict[str, Callable[[CacheBackend], dict | Awaitable[dict]]] = {
    "memory": _memory_expiries,
    "sqlite": _sqlite_expiries,
    "postgres": _postgres_expiries,
    "fakeredis": _redis_expiries,
    "redis": _redis_expiries,
    "redis-cluster": _redis_expiries,
    "fs": _fs_expiries,
}


async def _probe(name: str, backend) -> dict:
    found = EXPIRY_PROBES[name](backend)
    return await found if inspect.isawaitable(found) else found

PROBED_BACKENDS = [
    name if name in EXPIRY_PROBES else pytest.param(name, marks=pytest.mark.skip(reason=f"no stored-expiry probe for {name}"))
    for name in BACKENDS
]


@asynccontextmanager
async def fresh_backend(name: str, ttl: TTLPolicy, clock: FakeClock):
    with tempfile.TemporaryDirectory(prefix="memlab-ttl-") as tmp:
        async with supply_backend(name, tmp_path=tmp, ttl=ttl, clock=clock, purge_interval_seconds=TTL / 2) as backend:
            yield backend


def run(coroutine):
    with asyncio.Runner() as runner:
        return runner.run(coroutine)


# -- strategies ---------------------------------------------------------------------------

#: gaps in seconds (millisecond grain), with the window edges drawn often
_gaps = st.one_of(
    st.integers(0, int(1.2 * TTL * 1000)).map(lambda ms: ms / 1000),
    st.sampled_from([0.0, 0.95 * TTL - 0.001, 0.95 * TTL, 0.5 * TTL - 0.001, 0.5 * TTL, TTL - 0.001, TTL, TTL + 0.001]),
)
_write_ops = st.sampled_from(["qa", "update", "delete_feedback", "ctx", "ctx_update", "read"])
_steps = st.lists(st.tuples(_gaps, _write_ops), max_size=20)


class Tracker:
    """Last sliding write per kind, and the promise that follows from it."""

    def __init__(self, ttl: TTLPolicy, clock: FakeClock) -> None:
        self.ttl, self.clock = ttl, clock
        self.last: dict[str, datetime | None] = {"qa": None, "ctx": None}
        self.live_for = ttl.seconds - getattr(ttl, "slack", 0.0) * ttl.seconds

    def wrote(self, kind: str) -> None:
        self.last[kind] = self.clock.now()

    def check(self, kind: str, visible: bool) -> None:
        last = self.last[kind]
        if last is None:
            assert not visible
            return
        age = (self.clock.now() - last).total_seconds()
        if age >= self.ttl.seconds:
            assert not visible, f"{kind} still visible {age} s after its last write (TTL {self.ttl.seconds})"
        elif age < self.live_for:
            assert visible, f"{kind} gone {age} s after its last write (guaranteed for {self.live_for})"


async def _visible(backend: CacheBackend) -> dict[str, bool]:
    return {
        "qa": bool(await backend.get_all_qa_entries(U, S)),
        "ctx": bool(await backend.get_session_context_entries(U, S)),
    }


async def _apply(backend: CacheBackend, op: str, counter: int, tracker: Tracker) -> None:
    if op == "qa":
        await backend.create_qa_entry(U, S, question="q", answer="a", qa_id=f"q{counter}")
        tracker.wrote("qa")
    elif op in ("update", "delete_feedback"):
        turns = await backend.get_all_qa_entries(U, S)
        if turns:
            if op == "update":
                assert await backend.update_qa_entry(U, S, turns[0].qa_id, feedback_score=1 + counter % 5)
            else:
                assert await backend.delete_feedback(U, S, turns[0].qa_id)
            tracker.wrote("qa")
    elif op == "ctx":
        await backend.create_session_context_entry(U, S, {"id": f"c{counter % 3}", "n": counter})
        tracker.wrote("ctx")
    elif op == "ctx_update":
        entries = await backend.get_session_context_entries(U, S)
        if entries:
            assert await backend.update_session_context_entry(U, S, entries[0]["id"], {"n": counter})
            tracker.wrote("ctx")
    else:  # reads only: they must not count as writes
        await backend.get_latest_qa_entries(U, S, 1)
        await backend.read_qa_log(U, S)


# -- backends: the visibility window ----------------------------------------------------


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("name", BACKENDS)
@BACKEND_SETTINGS
@given(steps=_steps)
def test_entries_live_within_the_window_after_the_last_write(name, policy, steps):
    """Never visible at or after 1.0·TTL past the last write; always before (1 - slack)·TTL."""

    async def scenario():
        clock, ttl = FakeClock(), POLICIES[policy]()
        tracker = Tracker(ttl, clock)
        async with fresh_backend(name, ttl, clock) as backend:
            for counter, (gap, op) in enumerate(steps):
                clock.advance(gap)
                for kind, visible in (await _visible(backend)).items():
                    tracker.check(kind, visible)
                await _apply(backend, op, counter, tracker)
            # walk through the edges of each kind's window
            edges = sorted(
                edge
                for last in tracker.last.values()
                if last is not None
                for edge in (last + timedelta(seconds=tracker.live_for - 0.001), last + timedelta(seconds=ttl.seconds))
            )
            for edge in edges:
                if edge > clock.now():
                    clock.advance((edge - clock.now()).total_seconds())
                for kind, visible in (await _visible(backend)).items():
                    tracker.check(kind, visible)

    run(scenario())


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("name", PROBED_BACKENDS)
@BACKEND_SETTINGS
@given(writes=st.lists(_gaps, min_size=1, max_size=5), reads=st.lists(_gaps, min_size=1, max_size=6))
def test_reads_never_move_the_stored_expiry(name, policy, writes, reads):
    async def scenario():
        clock, ttl = FakeClock(), POLICIES[policy]()
        async with fresh_backend(name, ttl, clock) as backend:
            for i, gap in enumerate(writes):
                clock.advance(gap)
                await backend.create_qa_entry(U, S, question="q", answer="a", qa_id=f"q{i}")
                await backend.create_session_context_entry(U, S, {"id": f"c{i}"})
            for gap in reads:
                clock.advance(gap)
                before = await _probe(name, backend)
                await backend.get_all_qa_entries(U, S)
                await backend.get_latest_qa_entries(U, S, 2)
                await backend.read_qa_log(U, S)
                await backend.get_session_context_entries(U, S)
                assert await _probe(name, backend) == before

    run(scenario())


# -- backends: TTL 0 ------------------------------------------------------------------------

_no_ttl_ops = st.lists(
    st.tuples(st.integers(0, 3).map(lambda k: [0.0, 1.0, YEAR, 50 * YEAR][k]), st.sampled_from(["qa", "update", "ctx", "ctx_update", "read"])),
    max_size=15,
)


@pytest.mark.parametrize("name", PROBED_BACKENDS)
@BACKEND_SETTINGS
@given(steps=_no_ttl_ops)
def test_no_ttl_never_expires_and_never_stamps(name, steps):

    async def scenario():
        clock = FakeClock()
        statements: list[str] = []
        async with fresh_backend(name, NoTTL(), clock) as backend:
            inline = getattr(getattr(backend, "_runner", None), "_inline", None)
            if isinstance(inline, sqlite3.Connection):
                inline.set_trace_callback(statements.append)
            qa_ids, ctx_ids, qa_updated = [], set(), False
            for counter, (gap, op) in enumerate(steps):
                clock.advance(gap)
                if op == "qa":
                    qa_ids.append(f"q{counter}")
                    await backend.create_qa_entry(U, S, question="q", answer="a", qa_id=qa_ids[-1])
                elif op == "update" and qa_ids:
                    assert await backend.update_qa_entry(U, S, qa_ids[0], feedback_text=str(counter))
                    qa_updated = True
                elif op == "ctx":
                    ctx_ids.add(f"c{counter % 3}")
                    await backend.create_session_context_entry(U, S, {"id": f"c{counter % 3}"})
                elif op == "ctx_update" and ctx_ids:
                    assert await backend.update_session_context_entry(U, S, min(ctx_ids), {"n": counter})
                assert [e.qa_id for e in await backend.get_all_qa_entries(U, S)] == qa_ids
                assert {e["id"] for e in await backend.get_session_context_entries(U, S)} == ctx_ids
                assert all(expiry is None for expiry in (await _probe(name, backend)).values())
            assert await backend.sweep() == 0
            if isinstance(inline, sqlite3.Connection):
                inline.set_trace_callback(None)
        stamps = [sql for sql in statements if sql.lstrip().upper().startswith("UPDATE CACHE_SESSION_STATE")]
        if not qa_updated:
            assert stamps == []  # appends and context writes issue no state write at all
        # changing a turn renews the change-feed epoch, never the expiry
        assert all("expires_at=NULL" in sql for sql in stamps), stamps

    run(scenario())


# -- pure policies --------------------------------------------------------------------------

_times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc)
)
_seconds = st.integers(1, 10 * int(YEAR)) | st.floats(0.001, 10 * YEAR)
_slacks = st.floats(0.0, 0.99)


@given(seconds=_seconds, current=st.none() | _times, now=_times)
def test_sliding_restamps_whenever_behind_the_target(seconds, current, now):
    policy = SlidingTTL(seconds)
    target = policy.expiry_after_write(now)
    assert target == now + timedelta(seconds=seconds)
    assert policy.needs_restamp(current, now) == (current is None or current < target)


@given(seconds=_seconds, slack=_slacks, current=_times, now=_times)
def test_lazy_slack_restamps_only_past_the_slack(seconds, slack, current, now):
    policy = LazySlackTTL(seconds, slack=slack)
    keep_until = now + timedelta(seconds=(1 - slack) * seconds)
    margin = timedelta(milliseconds=1)
    if current <= keep_until - margin:
        assert policy.needs_restamp(current, now)
    if current >= keep_until + margin:
        assert not policy.needs_restamp(current, now)
    assert policy.needs_restamp(None, now)


@given(seconds=_seconds, slack=_slacks, now=_times)
def test_built_in_policies_declare_their_cutoff(seconds, slack, now):
    target = now + timedelta(seconds=seconds)
    assert SlidingTTL(seconds).restamp_cutoff(now) == target
    assert LazySlackTTL(seconds, slack=slack).restamp_cutoff(now) == target - timedelta(seconds=slack * seconds)
    assert NoTTL(seconds).restamp_cutoff(now) is None


@given(seconds=_seconds, slack=_slacks, current=st.none() | _times, now=_times)
def test_needs_restamp_is_the_declared_rule_and_never_moves_expiry_back(seconds, slack, current, now):
    """Any policy, custom ones included: re-stamp iff unset or before the cutoff, which never passes the new stamp."""
    for policy in (SlidingTTL(seconds), LazySlackTTL(seconds, slack=slack), CustomSlackTTL(seconds, slack=slack)):
        cutoff = policy.restamp_cutoff(now)
        assert cutoff <= policy.expiry_after_write(now)
        assert policy.needs_restamp(current, now) == (current is None or current < cutoff)


@given(seconds=_seconds, current=st.none() | _times, now=_times)
def test_lazy_slack_zero_is_sliding(seconds, current, now):
    assert LazySlackTTL(seconds, slack=0.0).needs_restamp(current, now) == SlidingTTL(seconds).needs_restamp(current, now)


@given(
    seconds=st.integers(1, 10 * int(YEAR)),
    slack=_slacks,
    gaps=st.lists(st.integers(0, 20 * int(YEAR)).map(lambda ms: ms / 1000) | st.floats(0, 10 * YEAR), min_size=1, max_size=30),
)
def test_policies_keep_expiry_within_their_window(seconds, slack, gaps):
    """Stamping as told keeps expiry in [(1 - slack)·TTL, TTL] after every write, never moving back."""
    tolerance = timedelta(microseconds=2)  # timedelta rounds to whole microseconds
    policies = (
        (SlidingTTL(seconds), 1.0),
        (LazySlackTTL(seconds, slack=slack), 1.0 - slack),
        (CustomSlackTTL(seconds, slack=slack), 1.0 - slack),
    )
    for policy, low in policies:
        now, expiry = datetime(2026, 1, 1, tzinfo=timezone.utc), None
        for gap in gaps:
            now += timedelta(seconds=gap)
            if policy.needs_restamp(expiry, now):
                stamped = policy.expiry_after_write(now)
                assert expiry is None or stamped >= expiry
                expiry = stamped
            assert now + timedelta(seconds=low * seconds) - tolerance <= expiry <= now + timedelta(seconds=seconds)


@pytest.mark.parametrize("seconds", [0, None, -5, 0.0])
@pytest.mark.parametrize(
    "make", [SlidingTTL, LazySlackTTL, NoTTL, CustomSlackTTL], ids=["sliding", "lazy_slack", "none", "custom"]
)
def test_disabled_policies_never_stamp(make, seconds):
    policy = make(seconds)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert policy.enabled is False
    assert policy.expiry_after_write(now) is None
    assert policy.restamp_cutoff(now) is None
    assert policy.needs_restamp(None, now) is False
    assert policy.needs_restamp(now, now) is False


def test_no_ttl_ignores_seconds():
    assert NoTTL(3600).enabled is False


@pytest.mark.parametrize("slack", [-0.01, 1.0, 1.5])
def test_lazy_slack_must_be_below_one(slack):
    with pytest.raises(ConfigError):
        LazySlackTTL(10, slack=slack)


@given(expires_at=st.none() | _times, now=_times)
def test_is_live_strictly_before_expiry(expires_at, now):
    assert TTLPolicy.is_live(expires_at, now) == (expires_at is None or expires_at > now)
