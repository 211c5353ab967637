"""The statistics every report uses: one percentile (benchmarks, the quality evaluation, experiment workloads) and one bootstrap."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["bootstrap_mean", "percentile"]


def percentile(values: Sequence[float], q: float, *, scale: float = 1.0) -> float | None:
    """The ``q``-th percentile (numpy's linear rule) of ``values`` times ``scale`` (1000 turns seconds into ms); None for no values."""
    import numpy as np

    return float(np.percentile(list(values), q)) * scale if len(values) else None


def bootstrap_mean(
    values: Sequence[float], *, resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float] | None:
    """``(mean, low, high)``: the mean of ``values`` and its percentile-bootstrap interval at ``level``; None for no values.

    ``resamples`` resamples of ``len(values)`` draws with replacement from
    ``numpy.random.default_rng(seed)`` (the same values and seed: the same interval).
    Pass per-question differences (``a_i - b_i`` on the same questions) for a paired
    comparison: an interval that excludes 0 says the difference is more than resampling
    noise at that level.
    """
    import numpy as np

    if resamples < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"resamples must be >= 1 and level in (0, 1), got {resamples!r}, {level!r}")
    data = np.asarray(list(values), dtype=np.float64)
    if not data.size:
        return None
    draws = np.random.default_rng(seed).integers(0, data.size, size=(resamples, data.size))
    means = data[draws].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    return float(data.mean()), float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))
