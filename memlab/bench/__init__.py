"""Benchmarks behind ``memlab bench``; each returns plain dict rows for DataFrames.

``memlab.bench.cache``: cache backend throughput (:func:`~memlab.bench.cache.bench_cache`).
"""

from memlab.bench.cache import CacheBenchSpec, bench_cache, format_table, run_bench_cache

__all__ = ["CacheBenchSpec", "bench_cache", "format_table", "run_bench_cache"]
