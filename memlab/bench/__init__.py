"""Benchmarks behind ``memlab bench``; each returns plain dict rows for DataFrames.

``memlab.bench.cache``: cache backend throughput and storage, each backend beside
the raw ceiling of its store (:func:`~memlab.bench.cache.bench_cache`).
"""

from memlab.bench.cache import (
    CacheBenchSpec,
    bench_cache,
    default_backends,
    format_table,
    run_bench_cache,
    skipped_backends,
    to_frame,
)

__all__ = [
    "CacheBenchSpec",
    "bench_cache",
    "default_backends",
    "format_table",
    "run_bench_cache",
    "skipped_backends",
    "to_frame",
]
