"""``raw_only``: the raw lane alone; the rewrite lane is a fallback for a failed raw lane."""

from __future__ import annotations

from typing import Any

from memlab.merge._base import MergePolicy, distinct

__all__ = ["RawOnlyMerge"]


class RawOnlyMerge(MergePolicy):
    """The raw lane's first ``limit`` distinct items, in order; ``reserve`` is ignored.

    The rewrite lane is read only when the raw lane failed (``raw is None``); then its
    first ``limit`` distinct items are returned. An empty (successful) raw lane gives
    an empty list.
    """

    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        lane = rewrite if raw is None else raw
        return [item for _, item in distinct(lane or ())][:limit]
