"""Merge policies: how the raw-query and rewritten-query result lists become one.

``dual_lane`` (:class:`DualLaneMerge`, the default) follows SPEC §6.5;
:class:`RawOnlyMerge` and :class:`RRFMerge` are research alternatives. Every policy is
pure (no I/O) and merges items by :func:`identity`. Importing this package is light
(stdlib only); ``memlab.config`` maps policy names to these classes.
"""

from __future__ import annotations

from memlab.merge._base import MergePolicy, identity
from memlab.merge._dual_lane import DualLaneMerge, conversational_reserve
from memlab.merge._raw_only import RawOnlyMerge
from memlab.merge._rrf import RRFMerge

__all__ = ["DualLaneMerge", "MergePolicy", "RRFMerge", "RawOnlyMerge", "conversational_reserve", "identity"]
