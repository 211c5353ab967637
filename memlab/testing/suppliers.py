"""Backend suppliers: every cache backend, built the same way, for tests.

``supply_backend(name, tmp_path=...)`` is an async context manager that yields an
**open** :class:`~memlab.cache.CacheBackend` and, on exit, prunes what it stored
and closes it::

    async with supply_backend("sqlite", tmp_path=tmp_path, clock=FakeClock()) as cache:
        await cache.create_qa_entry("u1", "s1", question="q", answer="a")

``SUPPLIERS`` maps a backend name to a :class:`Supplier`; ``BACKENDS`` lists the
names (the conformance tests are parametrized over it). Adding a backend is one
registry entry: write an ``@asynccontextmanager`` function that takes a
:class:`SupplyArgs` and yields a constructed, *not yet opened* backend (set up
and tear down whatever the backend needs around the ``yield``), then add
``"name": Supplier(that_function)`` to ``SUPPLIERS``. Backends on a real server
read their URL with :func:`server_url`, which skips the test when the variable is
unset (and fails it under ``CI=true``).

Two supplies with the same ``tmp_path`` must reach the same store (a second
handle, as a second process would have), unless the supplier is registered with
``shared=False`` because the backend keeps its data inside the instance
(``memory``). Suppliers must not wipe data on entry, or a second handle would
erase the first one's rows; :func:`supply_backend` prunes on exit instead.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from memlab._clock import Clock
from memlab.cache._base import CacheBackend
from memlab.ttl import TTLPolicy

__all__ = ["BACKENDS", "SUPPLIERS", "Supplier", "SupplyArgs", "server_url", "supply_backend"]

#: values of ``CI`` that mean "running in CI": a missing test server fails instead of skipping
_CI_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class SupplyArgs:
    """What every supplier receives: where to put files, and the backend's common options."""

    tmp_path: Path
    ttl: TTLPolicy | None = None
    clock: Clock | None = None
    purge_interval_seconds: float = 900.0

    @property
    def common(self) -> dict:
        """Keyword arguments every :class:`CacheBackend` constructor takes."""
        return {"ttl": self.ttl, "clock": self.clock, "purge_interval_seconds": self.purge_interval_seconds}


@dataclass(frozen=True)
class Supplier:
    """One registry entry: ``build(args)`` is an async context manager yielding an unopened backend.

    ``shared``: two builds with the same ``tmp_path`` see the same stored data
    (False for backends whose store is the instance itself).
    """

    build: Callable[[SupplyArgs], AbstractAsyncContextManager[CacheBackend]]
    shared: bool = True

    def __call__(self, args: SupplyArgs) -> AbstractAsyncContextManager[CacheBackend]:
        return self.build(args)


def server_url(env_var: str) -> str:
    """The server URL in ``env_var``; skips the calling test when unset (fails under ``CI=true``)."""
    import pytest

    url = os.environ.get(env_var, "").strip()
    if url:
        return url
    reason = f"{env_var} is not set; run the tests under scripts/with-servers.sh (or `make test`) to start the server"
    if os.environ.get("CI", "").strip().lower() in _CI_TRUE:
        pytest.fail(f"CI is set but {reason}", pytrace=False)
    pytest.skip(reason)


# -- suppliers ---------------------------------------------------------------------


@asynccontextmanager
async def _memory(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache._memory import MemoryCache

    yield MemoryCache(**args.common)


@asynccontextmanager
async def _sqlite(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache._sql import SQLCache

    yield SQLCache(f"sqlite:///{Path(args.tmp_path) / 'cache.db'}", **args.common)


@asynccontextmanager
async def _fs(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache._disk import DiskCache

    yield DiskCache(Path(args.tmp_path) / "fs-cache", **args.common)


#: one in-process fake Redis server per tmp_path, so two handles share a store
_FAKE_REDIS_SERVERS: dict[Path, object] = {}


@asynccontextmanager
async def _fakeredis(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    import fakeredis

    from memlab.cache._redis import RedisCache

    server = _FAKE_REDIS_SERVERS.setdefault(Path(args.tmp_path), fakeredis.FakeServer())
    client = fakeredis.aioredis.FakeRedis(server=server)
    try:
        yield RedisCache(client=client, **args.common)
    finally:
        await client.aclose()


@asynccontextmanager
async def _redis(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache._redis import RedisCache

    yield RedisCache(server_url("MEMLAB_TEST_REDIS_URL"), **args.common)


@asynccontextmanager
async def _postgres(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache._sql import SQLCache

    yield SQLCache(server_url("MEMLAB_TEST_POSTGRES_URL"), **args.common)


#: backend name -> how to build it for a test
SUPPLIERS: dict[str, Supplier] = {
    "memory": Supplier(_memory, shared=False),
    "sqlite": Supplier(_sqlite),
    "fs": Supplier(_fs),
    "fakeredis": Supplier(_fakeredis),
    "redis": Supplier(_redis),
    "postgres": Supplier(_postgres),
}

#: names of every registered backend, in registry order
BACKENDS: tuple[str, ...] = tuple(SUPPLIERS)


@asynccontextmanager
async def supply_backend(
    name: str,
    *,
    tmp_path: Path,
    ttl: TTLPolicy | None = None,
    clock: Clock | None = None,
    purge_interval_seconds: float = 900.0,
) -> AsyncIterator[CacheBackend]:
    """Yield an open backend called ``name``; prune its data and close it on exit.

    The test may close the backend itself; it is reopened for the final prune.
    """
    try:
        supplier = SUPPLIERS[name]
    except KeyError:
        raise ValueError(f"no supplier for cache backend {name!r}; registered: {', '.join(SUPPLIERS)}") from None
    args = SupplyArgs(Path(tmp_path), ttl, clock, purge_interval_seconds)
    async with supplier(args) as backend:
        await backend.open()
        try:
            yield backend
        finally:
            try:
                await backend.open()
                await backend.prune()
            finally:
                await backend.close()
