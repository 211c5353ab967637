"""The benchmarks' own errors: raised only by :mod:`memlab.bench` (and the grid workloads of
:mod:`memlab.experiments` that run them), never by the library.

Still :class:`~memlab.exceptions.MemlabError` s, drawn apart from the core tree::

    MemlabError
    └── BenchmarkError(RuntimeError)         a benchmark subject could not run
        ├── BackendSkipped                   a cache backend cannot be benchmarked here (the message says why)
        └── SubjectFailed                    a benchmark subject raised during a repeat (``error`` is what)
"""

from __future__ import annotations

from memlab.exceptions import MemlabError

__all__ = ["BackendSkipped", "BenchmarkError", "SubjectFailed"]


class BenchmarkError(MemlabError, RuntimeError):
    """A benchmark could not measure one of its subjects."""


class BackendSkipped(BenchmarkError):
    """A cache backend cannot be benchmarked here; the message says why."""


class SubjectFailed(BenchmarkError):
    """A benchmark subject (``label``) raised during a repeat; ``error`` is what it raised."""

    def __init__(self, label: str, error: BaseException) -> None:
        super().__init__(f"{label}: {type(error).__name__}: {error}")
        self.label, self.error = label, error
