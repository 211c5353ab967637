"""Every registered cache backend against the shipped conformance suite."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from memlab.cache._base import CacheBackend
from memlab.testing.conformance import CacheBackendSuite
from memlab.testing.suppliers import BACKENDS, SUPPLIERS, SupplyArgs, server_url, supply_backend

Hook = Callable[[CacheBackend, str, str], Awaitable[None]]
CORRUPT = "{not json"


# -- hooks that store an unreadable row, per backend (add one for a new backend) -----


async def _memory_qa(backend, user, session):
    backend._data[(user, session, "qa")].rows["corrupt-row"] = CORRUPT


async def _memory_context(backend, user, session):
    backend._data[(user, session, "context")].rows["corrupt-row"] = CORRUPT


def _sqlite_insert(table: str, key: str) -> Hook:
    async def hook(backend, user, session):
        backend._runner._inline.execute(
            f"INSERT INTO {table} (user_id, session_id, {key}, payload, created_at) VALUES (?, ?, ?, ?, ?)",
            (user, session, "corrupt-row", CORRUPT, backend.clock.now().timestamp()),
        )

    return hook


def _postgres_insert(table: str, key: str) -> Hook:
    async def hook(backend, user, session):
        stamp = backend.clock.now().timestamp()
        sql = (
            f"INSERT INTO {table} (user_id, session_id, {key}, payload, created_at) "
            f"VALUES ('{user}', '{session}', 'corrupt-row', '{CORRUPT}', {stamp})"
        )
        await backend._runner.run(lambda db: db.raw(sql), write=True)

    return hook


async def _redis_qa(backend, user, session):
    """Append an unreadable QA row the way a foreign writer would (no index entry)."""
    await backend._client.rpush(backend._session_keys(user, session).qa, CORRUPT)


async def _redis_context(backend, user, session):
    """Store an unreadable context row at the next insert position."""
    keys = backend._session_keys(user, session)  # the plain or the cluster (hash-tagged) layout
    seq = await backend._client.hincrby(keys.meta, "ctx_seq", 1)
    await backend._client.hset(keys.ctx, "corrupt-row", CORRUPT)
    await backend._client.zadd(keys.ctx_order, {"corrupt-row": seq})


def _fs_row(kind: str) -> Hook:
    async def hook(backend, user, session):
        backend._fast.set(backend._keys(kind, user, session).row(999_999_999_999), CORRUPT)

    return hook


def _inner(hook: Hook) -> Hook:
    """``hook`` applied to the backend a wrapper (``tapes``) stores in."""

    async def delegated(backend, user, session):
        await hook(backend.inner, user, session)

    return delegated


CORRUPT_QA_ROW: dict[str, Hook] = {
    "memory": _memory_qa,
    "sqlite": _sqlite_insert("cache_qa_entries", "qa_id"),
    "postgres": _postgres_insert("cache_qa_entries", "qa_id"),
    "fakeredis": _redis_qa,
    "redis": _redis_qa,
    "redis-cluster": _redis_qa,
    "fs": _fs_row("qa"),
    "tapes": _inner(_fs_row("qa")),
    "tapes-memory": _inner(_memory_qa),
}
CORRUPT_CONTEXT_ROW: dict[str, Hook] = {
    "memory": _memory_context,
    "sqlite": _sqlite_insert("cache_session_context", "entry_id"),
    "postgres": _postgres_insert("cache_session_context", "entry_id"),
    "fakeredis": _redis_context,
    "redis": _redis_context,
    "redis-cluster": _redis_context,
    "fs": _fs_row("context"),
    "tapes": _inner(_fs_row("context")),
    "tapes-memory": _inner(_memory_context),
}

#: backends that wrap another one (``backend.inner``)
WRAPPERS = frozenset({"tapes", "tapes-memory"})
#: suite tests a wrapper cannot pass by design, with the reason
WRAPPER_SKIPS: dict[str, str] = {
    "test_first_write_sweeps_then_throttled": (
        "it counts calls of the wrapper's sweep attribute, but the write-time sweep is the inner backend's own "
        "(its writes call its sweep); the inner backend passes this test under its own name"
    ),
}


def _hook(hooks: dict[str, Hook], name: str, what: str) -> Hook:
    if name not in hooks:
        pytest.skip(f"no hook to store a corrupt {what} row in the {name} backend")
    return hooks[name]


class TestCacheBackends(CacheBackendSuite):
    @pytest.fixture(params=BACKENDS)
    def backend_name(self, request) -> str:
        return request.param

    @pytest.fixture(autouse=True)
    def _skip_what_a_wrapper_hides(self, request, backend_name) -> None:
        reason = WRAPPER_SKIPS.get(request.node.originalname)
        if reason is not None and backend_name in WRAPPERS:
            pytest.skip(reason)

    @pytest.fixture
    async def backend(self, backend_name, tmp_path, ttl, clock, purge_interval_seconds):
        async with supply_backend(
            backend_name, tmp_path=tmp_path, ttl=ttl, clock=clock, purge_interval_seconds=purge_interval_seconds
        ) as cache:
            yield cache

    @pytest.fixture
    async def second_backend(self, backend, backend_name, tmp_path, ttl, clock, purge_interval_seconds):
        if not SUPPLIERS[backend_name].shared:
            pytest.skip(f"a {backend_name} backend's store is the instance: there is no second handle")
        async with supply_backend(
            backend_name, tmp_path=tmp_path, ttl=ttl, clock=clock, purge_interval_seconds=purge_interval_seconds
        ) as cache:
            yield cache

    @pytest.fixture
    def corrupt_qa_row(self, backend_name) -> Hook:
        return _hook(CORRUPT_QA_ROW, backend_name, "QA")

    @pytest.fixture
    def corrupt_context_row(self, backend_name) -> Hook:
        return _hook(CORRUPT_CONTEXT_ROW, backend_name, "context")


# -- the supplier helpers themselves ------------------------------------------------------


def test_server_url_returns_the_variable(monkeypatch):
    monkeypatch.setenv("MEMLAB_TEST_FAKE_URL", " redis://127.0.0.1:1/0 ")
    assert server_url("MEMLAB_TEST_FAKE_URL") == "redis://127.0.0.1:1/0"


@pytest.mark.parametrize(
    "ci, outcome", [(None, pytest.skip.Exception), ("false", pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_server_url_missing_skips_but_fails_in_ci(monkeypatch, ci, outcome):
    monkeypatch.delenv("MEMLAB_TEST_FAKE_URL", raising=False)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="MEMLAB_TEST_FAKE_URL"):
        server_url("MEMLAB_TEST_FAKE_URL")


async def test_supply_backend_rejects_unknown_names(tmp_path):
    with pytest.raises(ValueError, match="registered:"):
        async with supply_backend("no-such-backend", tmp_path=tmp_path):
            pass  # pragma: no cover


@pytest.mark.parametrize("name", BACKENDS)
async def test_supply_backend_prunes_and_closes_on_exit(name, tmp_path):
    async with supply_backend(name, tmp_path=tmp_path) as cache:
        await cache.create_qa_entry("u1", "s1", question="q", answer="a")
        await cache.close()  # closing early is allowed
    if SUPPLIERS[name].shared:
        async with supply_backend(name, tmp_path=tmp_path) as again:
            assert await again.get_all_qa_entries("u1", "s1") == []


class TestDocumentedFixturePattern:
    """The fixture pattern of the CacheBackendSuite docstring (``yield cache; await cache.prune()``), on every backend.

    Only the suite tests that close the backend themselves are collected here: those are
    the ones that could break a teardown that still uses the backend.
    """

    ttl = CacheBackendSuite.ttl
    clock = CacheBackendSuite.clock
    purge_interval_seconds = CacheBackendSuite.purge_interval_seconds
    test_invalid_arguments_raise_before_any_io = CacheBackendSuite.test_invalid_arguments_raise_before_any_io
    test_open_and_close_are_idempotent = CacheBackendSuite.test_open_and_close_are_idempotent

    @pytest.fixture(params=BACKENDS)
    async def backend(self, request, tmp_path, ttl, clock, purge_interval_seconds):
        async with SUPPLIERS[request.param](SupplyArgs(tmp_path, ttl, clock, purge_interval_seconds)) as unopened:
            async with unopened as cache:  # exactly the docstring's pattern from here on
                yield cache
                await cache.prune()
