"""The statistics every report uses: one percentile (benchmarks, the quality evaluation, experiment workloads); intervals and paired tests are in :mod:`memlab.stats`."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["percentile"]


def percentile(values: Sequence[float], q: float, *, scale: float = 1.0) -> float | None:
    """The ``q``-th percentile (numpy's linear rule) of ``values`` times ``scale`` (1000 turns seconds into ms); None for no values."""
    import numpy as np

    return float(np.percentile(list(values), q)) * scale if len(values) else None
