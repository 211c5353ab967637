"""Benchmark of :class:`~memlab.graph.VectorIndex` single-query latency and recall on clustered unit vectors.

``vector_search_latency()`` builds a collection of ``n`` clustered unit vectors
(added in batches, as ingestion would), then times ``queries`` single top-k
searches of fresh vectors drawn from the same clusters, and measures recall@k
against exact float32 search. Synthetic and embedder-free, so any ``dim``
works; the benchmark on real (hashing-embedded corpus) vectors, with the raw
faiss ceiling beside it, is ``memlab bench ingest``
(:func:`memlab.bench.ingest.vector_rows`).
"""

from __future__ import annotations

import math
import time
from typing import Any

import faiss
import numpy as np

from memlab.exceptions import ValidationError
from memlab.graph._vectors import VectorIndex

__all__ = ["clustered_unit_vectors", "vector_search_latency"]


def clustered_unit_vectors(n: int, dim: int, *, clusters: int, spread: float = 1.0, seed: int = 0) -> np.ndarray:
    """``n`` float32 unit rows around ``clusters`` random unit centres (noise of norm ~``spread`` before normalising)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.standard_normal((n, dim), dtype=np.float32) * np.float32(spread / math.sqrt(dim))
    vectors = centres[rng.integers(0, clusters, size=n)] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def vector_search_latency(
    n: int = 100_000,
    dim: int = 256,
    top_k: int = 15,
    queries: int = 200,
    seed: int = 0,
    *,
    batch: int = 10_000,
    spread: float = 1.0,
) -> dict[str, Any]:
    """Single-query latency and recall of a ``VectorIndex`` of ``n`` clustered vectors.

    ``spread`` is the cluster noise (see :func:`clustered_unit_vectors`; 2.0
    makes neighbours much harder to separate than 1.0). Returns ``n, dim,
    top_k, queries, mode, build_s`` (all adds, in batches of ``batch``),
    ``p50_ms, p95_ms`` (one query at a time), ``recall_at_k`` (mean over the
    queries, against exact float32 search) and ``spread``.
    """
    for name, value in {"n": n, "dim": dim, "top_k": top_k, "queries": queries, "batch": batch}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(f"{name} must be a positive int, got {value!r}")
    if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not spread > 0:
        raise ValidationError(f"spread must be a positive number, got {spread!r}")
    clusters = max(2, round(math.sqrt(n)))
    data = clustered_unit_vectors(n + queries, dim, clusters=clusters, spread=spread, seed=seed)
    vectors, probes = data[:n], data[n:]
    ids = [f"v{i}" for i in range(n)]

    index = VectorIndex(dim, space=f"bench-{dim}")
    start = time.perf_counter()
    for offset in range(0, n, batch):
        index.add(ids[offset : offset + batch], vectors[offset : offset + batch])
    build_s = time.perf_counter() - start

    index.search(probes[0], top_k)  # warm-up
    timings = np.empty(queries)
    for row in range(queries):
        begin = time.perf_counter()
        index.search(probes[row], top_k)
        timings[row] = time.perf_counter() - begin

    k = min(top_k, n)
    _, exact_rows = faiss.knn(probes, vectors, k, metric=faiss.METRIC_INNER_PRODUCT)
    found = index.search_many(probes, k)
    recall = float(np.mean([len({ids[i] for i in truth} & {key for key, _ in got}) / k for truth, got in zip(exact_rows, found)]))
    return {
        "n": n,
        "dim": dim,
        "top_k": top_k,
        "queries": queries,
        "mode": index.mode,
        "build_s": round(build_s, 3),
        "p50_ms": round(float(np.percentile(timings, 50)) * 1000, 3),
        "p95_ms": round(float(np.percentile(timings, 95)) * 1000, 3),
        "recall_at_k": round(recall, 4),
        "spread": spread,
    }
