"""Every built-in merge policy against the shipped MergePolicySuite, and proof the suite can fail."""

from __future__ import annotations

from typing import Any

import pytest

from memlab.merge import DualLaneMerge, MergePolicy, RawOnlyMerge, RRFMerge
from memlab.testing import MergePolicySuite


class TestDualLane(MergePolicySuite):
    @pytest.fixture
    def merge_policy(self) -> MergePolicy:
        return DualLaneMerge()


class TestRawOnly(MergePolicySuite):
    @pytest.fixture
    def merge_policy(self) -> MergePolicy:
        return RawOnlyMerge()


class TestRRF(MergePolicySuite):
    @pytest.fixture
    def merge_policy(self) -> MergePolicy:
        return RRFMerge()


class TestRRFZeroK(MergePolicySuite):
    @pytest.fixture
    def merge_policy(self) -> MergePolicy:
        return RRFMerge(k=0)


class _Concatenate(MergePolicy):
    """Broken on purpose: both lanes end to end, no de-duplication, no limit."""

    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        return (raw or []) + (rewrite or [])


def test_the_suite_rejects_a_policy_that_exceeds_the_limit() -> None:
    with pytest.raises(AssertionError):
        MergePolicySuite().test_result_never_exceeds_limit(merge_policy=_Concatenate())


def test_the_suite_rejects_a_policy_that_keeps_duplicates() -> None:
    with pytest.raises(AssertionError):
        MergePolicySuite().test_no_identity_twice(merge_policy=_Concatenate())
