"""One ``memlab bench cache`` operation on the cell's session cache backend, as a grid workload."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments._checks import positive_int, session_reranker, session_retriever
from memlab._stats import percentile
from memlab.experiments._workload import Workload, WorkloadResult

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = ["CACHE_OPERATIONS", "CacheWorkload"]

#: the operations :class:`CacheWorkload` runs (those of ``memlab bench cache`` on one session)
CACHE_OPERATIONS = ("append", "read_last_10", "recall")
_SESSION = "grid-cache"


class CacheWorkload(Workload):
    """One cache operation, ``n`` awaited calls, on the backend the cell's config builds.

    The backend is the cell's ``cache`` object, else it comes from
    :func:`memlab.config.build_cache_backend` (``cache.*`` of the cell, stamping with its
    ``ttl`` object or ``ttl.*``) in the run's fresh data root. It is measured alone, not
    inside a stack (the raw ceiling ``memlab bench cache`` measures too); the texts are the seeded ones
    of ``memlab bench cache`` (:class:`memlab.bench.cache.Workload`, ~250-byte turns).
    Every call is timed on its own (``time.perf_counter``):

    ``append``
        ``n`` turns appended to one session (``create_qa_entry``), after one untimed
        append to another session.
    ``read_last_10``
        the session filled with ``n`` turns (untimed), one untimed read, then ``n``
        reads of its last 10 turns (``get_latest_qa_entries``).
    ``recall``
        the session filled with ``n`` turns (untimed), then ``n`` varied queries through
        ``SessionManager(backend, retriever=<the cell's session retriever>).search(...,
        top_k=top_k)``; the first query builds the retriever's index and is counted.

    ==============  ======  =====================================================
    metric          unit    what
    ==============  ======  =====================================================
    ``ops_per_s``   ops/s   ``n`` / the summed call times
    ``p50_us``      us      median call time
    ``p95_us``      us      p95 call time
    ``n``           ops     timed calls
    ==============  ======  =====================================================

    No per-turn rows. Written sessions are deleted before the backend closes (a server
    backend is left as found). A config with ``cache.enabled`` false is rejected.
    """

    name = "cache"

    def __init__(self, operation: str = "append", n: int = 200, top_k: int = 15) -> None:
        if operation not in CACHE_OPERATIONS:
            raise ValidationError(f"operation must be one of {', '.join(CACHE_OPERATIONS)}, got {operation!r}")
        self.operation = operation
        self.n = positive_int("n", n)
        self.top_k = positive_int("top_k", top_k)

    def fingerprint(self) -> dict[str, Any]:
        return {"operation": self.operation, "n": self.n, "top_k": self.top_k}

    def check(self, config: "StackConfig") -> None:
        if not config.cache.enabled:
            raise ConfigError("the cache workload needs cache.enabled=True (there is no backend to measure)")

    async def run(self, config: "StackConfig", seed: int, objects: Mapping[str, Any] | None = None) -> WorkloadResult:
        from memlab._clock import SystemClock
        from memlab.bench.cache import CacheBenchSpec
        from memlab.bench.cache import Workload as CacheTexts
        from memlab.config import build_cache_backend
        from memlab.session import SessionManager

        given = dict(objects or {})

        spec = CacheBenchSpec(backends=(config.cache.backend,), repeats=1, n=self.n, sessions=1, per_session=1, top_k=self.top_k, seed=seed)
        texts = CacheTexts.make(spec)
        backend = given["cache"] if given.get("cache") is not None else build_cache_backend(config, SystemClock(), ttl=given.get("ttl"))
        if backend is None:  # pragma: no cover - check() rejects the config first
            raise ConfigError("caching is off: no cache backend")
        user = f"grid-{uuid.uuid4().hex[:12]}"
        perf = time.perf_counter
        times: list[float] = []
        try:
            await backend.open()
        except BaseException:
            with contextlib.suppress(Exception):
                await backend.close()
            raise
        try:
            if self.operation == "append":
                question, answer = texts.turns[0]
                await backend.create_qa_entry(user, f"{_SESSION}-warm-up", question=question, answer=answer)
                for question, answer in texts.turns:
                    began = perf()
                    await backend.create_qa_entry(user, _SESSION, question=question, answer=answer)
                    times.append(perf() - began)
            else:
                for question, answer in texts.turns:
                    await backend.create_qa_entry(user, _SESSION, question=question, answer=answer)
                if self.operation == "read_last_10":
                    await backend.get_latest_qa_entries(user, _SESSION, 10)
                    for _ in range(self.n):
                        began = perf()
                        await backend.get_latest_qa_entries(user, _SESSION, 10)
                        times.append(perf() - began)
                else:
                    manager = SessionManager(backend, retriever=session_retriever(config, given), reranker=session_reranker(config, given))
                    for query in texts.queries:
                        began = perf()
                        await manager.search(user, query, session_id=_SESSION, top_k=self.top_k)
                        times.append(perf() - began)
        finally:
            try:
                for session in (_SESSION, f"{_SESSION}-warm-up"):
                    with contextlib.suppress(Exception):  # leave a server as found; never mask the run's own error
                        await backend.delete_session(user, session)
            finally:
                await backend.close()
        total = sum(times)
        metrics: dict[str, float | int | None] = {
            "ops_per_s": len(times) / total if total > 0 else None,
            "p50_us": percentile(times, 50, scale=1e6),
            "p95_us": percentile(times, 95, scale=1e6),
            "n": len(times),
        }
        return WorkloadResult(metrics, {"ops_per_s": "ops/s", "p50_us": "us", "p95_us": "us", "n": "ops"})
