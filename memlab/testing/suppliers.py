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

``redis-cluster`` is the ``redis`` backend with ``cluster=True`` (hash-tagged keys)
on the cluster whose startup node ``MEMLAB_TEST_REDIS_CLUSTER_URL`` names.

``tapes`` and ``tapes-memory`` are the ``tapes`` mirror around a fresh ``fs`` /
``memory`` backend (built by that backend's supplier), posting to a stdlib HTTP
server on 127.0.0.1 that answers 200 and stops when the supply exits.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NoReturn

from memlab._clock import Clock
from memlab.cache import CacheBackend
from memlab.ttl import TTLPolicy

__all__ = ["BACKENDS", "SUPPLIERS", "Supplier", "SupplyArgs", "missing", "server_url", "supply_backend"]

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


def missing(reason: str) -> NoReturn:
    """Skip the calling test for ``reason`` (something a real-server run provides); under ``CI=true`` fail it instead."""
    import pytest

    if os.environ.get("CI", "").strip().lower() in _CI_TRUE:
        pytest.fail(f"CI is set but {reason}", pytrace=False)
    pytest.skip(reason)


def server_url(env_var: str) -> str:
    """The server URL in ``env_var``; skips the calling test when unset (fails under ``CI=true``)."""
    url = os.environ.get(env_var, "").strip()
    if url:
        return url
    missing(f"{env_var} is not set; run the tests under scripts/with-servers.sh (or `make test`) to start the server")


# -- suppliers ---------------------------------------------------------------------


@asynccontextmanager
async def _memory(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache import MemoryCache

    yield MemoryCache(**args.common)


@asynccontextmanager
async def _sqlite(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache import SQLCache

    yield SQLCache(f"sqlite:///{Path(args.tmp_path) / 'cache.db'}", **args.common)


@asynccontextmanager
async def _fs(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache import DiskCache

    yield DiskCache(Path(args.tmp_path) / "fs-cache", **args.common)


@asynccontextmanager
async def _fakeredis(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    """A fake Redis at an address named after ``tmp_path``: fakeredis connects every client of one address
    to one in-process server (as clients of one real server URL), so two handles on a ``tmp_path`` share a store."""
    import fakeredis

    from memlab.cache import RedisCache

    client = fakeredis.aioredis.FakeRedis(host=f"memlab-test:{Path(args.tmp_path)}", version=(8,))
    try:
        yield RedisCache(client=client, **args.common)
    finally:
        await client.aclose()


@asynccontextmanager
async def _redis(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache import RedisCache

    yield RedisCache(server_url("MEMLAB_TEST_REDIS_URL"), **args.common)


@asynccontextmanager
async def _redis_cluster(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    """``redis`` on a Redis Cluster: the URL names one startup node (``scripts/with-servers.sh`` starts three primaries)."""
    from memlab.cache import RedisCache

    yield RedisCache(server_url("MEMLAB_TEST_REDIS_CLUSTER_URL"), cluster=True, **args.common)


@asynccontextmanager
async def _postgres(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
    from memlab.cache import SQLCache

    yield SQLCache(server_url("MEMLAB_TEST_POSTGRES_URL"), **args.common)


class _IngestHandler(BaseHTTPRequestHandler):
    """Answers every POST with 200 (a Tapes ingest service that accepts everything)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the tapes backend pools its connections

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@asynccontextmanager
async def _ingest_server() -> AsyncIterator[str]:
    """Yield the URL of an :class:`_IngestHandler` server on 127.0.0.1 (a free port); it stops on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _IngestHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="memlab-ingest", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _mirrored(inner: Callable[[SupplyArgs], AbstractAsyncContextManager[CacheBackend]]):
    """A supplier of a ``tapes`` cache around the backend ``inner`` supplies, mirroring to a local ingest server."""

    @asynccontextmanager
    async def build(args: SupplyArgs) -> AsyncIterator[CacheBackend]:
        from memlab.cache import TapesCache

        async with _ingest_server() as url, inner(args) as backend:
            yield TapesCache(backend, ingest_url=url)

    return build


#: backend name -> how to build it for a test
SUPPLIERS: dict[str, Supplier] = {
    "memory": Supplier(_memory, shared=False),
    "sqlite": Supplier(_sqlite),
    "fs": Supplier(_fs),
    "fakeredis": Supplier(_fakeredis),
    "redis": Supplier(_redis),
    "redis-cluster": Supplier(_redis_cluster),
    "postgres": Supplier(_postgres),
    "tapes": Supplier(_mirrored(_fs)),
    "tapes-memory": Supplier(_mirrored(_memory), shared=False),
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
