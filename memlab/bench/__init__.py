"""Benchmarks behind ``memlab bench``; each returns plain dict rows for DataFrames.

``memlab.bench.cache``: cache backend throughput and storage, each backend beside
the raw ceiling of its store (:func:`~memlab.bench.cache.bench_cache`).

Importing this package registers :func:`memlab.bench.quality_eval.evaluate_retriever` as
the evaluation ``stack.frames.quality`` runs (:func:`memlab.frames.register_quality_evaluator`):
the stack itself imports nothing from here.
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
from memlab.bench.quality_eval import evaluate_retriever as _evaluate_retriever
from memlab.frames import register_quality_evaluator

register_quality_evaluator(_evaluate_retriever)

__all__ = [
    "CacheBenchSpec",
    "bench_cache",
    "default_backends",
    "format_table",
    "run_bench_cache",
    "skipped_backends",
    "to_frame",
]
