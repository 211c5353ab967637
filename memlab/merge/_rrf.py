"""``rrf``: reciprocal-rank fusion of the two lanes, a research alternative to ``dual_lane``."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from memlab.exceptions import ValidationError
from memlab.merge._base import MergePolicy, distinct

__all__ = ["RRFMerge"]


class RRFMerge(MergePolicy):
    """Rank items by ``sum(1 / (k + rank))`` over the lanes they appear in.

    ``rank`` is 1-based among a lane's distinct items (only the first occurrence of an
    identity counts). Scores are exact fractions; ties go to the better raw rank, then
    the better rewrite rank (absent counts as worst). An item in both lanes is one
    entry and keeps the raw object; items without identity are separate entries scored
    at their own lane rank. The first ``limit`` entries are returned (None: all).
    ``reserve`` is ignored: fusion has no reserved slots.

    ``k`` must be a real number >= 0 (ValidationError otherwise); 60 is the usual value.
    """

    @classmethod
    def from_config(cls, config: Any) -> "RRFMerge":
        """``rrf`` from the config: k is ``merge.rrf_k``."""
        return cls(k=config.merge.rrf_k)

    def __init__(self, k: float = 60) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, float)) or not math.isfinite(k) or k < 0:
            raise ValidationError(f"k must be a finite number >= 0, got {k!r}")
        self.k = k

    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        k = Fraction(self.k)
        worst = math.inf
        # entry: [score, raw rank, rewrite rank, item]
        entries: list[list[Any]] = []
        by_key: dict[Any, list[Any]] = {}
        for lane_index, lane in enumerate((raw, rewrite)):
            for rank, (key, item) in enumerate(distinct(lane or ()), start=1):
                entry = by_key.get(key) if key is not None else None
                if entry is None:
                    entry = [Fraction(0), worst, worst, item]
                    entries.append(entry)
                    if key is not None:
                        by_key[key] = entry
                entry[0] += 1 / (k + rank)
                entry[1 + lane_index] = rank
        entries.sort(key=lambda entry: (-entry[0], entry[1], entry[2]))
        return [entry[3] for entry in entries[:limit]]

    def __repr__(self) -> str:
        return f"RRFMerge(k={self.k!r})"
