"""``dual_lane``: the seed's merge of the raw and rewrite lanes (SPEC §6.5)."""

from __future__ import annotations

from typing import Any

from memlab.merge._base import MergePolicy, distinct

__all__ = ["DualLaneMerge", "conversational_reserve"]


def conversational_reserve(limit: int | None) -> int:
    """Slots reserved for rewrite-only items: 0 when ``limit`` is falsy or <= 2, else ``max(1, limit // 3)``."""
    if not limit or limit <= 2:
        return 0
    return max(1, limit // 3)


class DualLaneMerge(MergePolicy):
    """Raw-lane items first, with about a third of ``limit`` reserved for rewrite-only items.

    Rank order: items in both lanes (the raw object is kept) by raw rank, then
    raw-only items by raw rank, then rewrite-only items by rewrite rank. Within a
    lane only the first occurrence of an identity counts. With ``limit=None`` the whole
    ranked list is returned. Otherwise ``reserve`` (None: :func:`conversational_reserve`
    of ``limit``) is clamped to ``[0, limit]``; the first ``reserve`` rewrite-only items
    are taken, then raw-lane items up to ``limit`` minus those taken, then more
    rewrite-only items if slots remain. The output keeps rank order, so reserved
    rewrite-only items always follow every raw-lane item. A failed (None) or empty lane
    leaves the other lane's first ``limit`` distinct items, in order.
    """

    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        primary = distinct(raw or ())
        secondary = distinct(rewrite or ())
        primary_keys = {key for key, _ in primary if key is not None}
        in_both = {key for key, _ in secondary if key in primary_keys}
        primary_items = [item for key, item in primary if key in in_both] + [item for key, item in primary if key not in in_both]
        secondary_only = [item for key, item in secondary if key not in in_both]
        if limit is None:
            return primary_items + secondary_only
        if reserve is None:
            reserve = conversational_reserve(limit)
        taken = min(max(0, reserve), limit, len(secondary_only))
        kept_primary = primary_items[: limit - taken]
        return kept_primary + secondary_only[: limit - len(kept_primary)]
