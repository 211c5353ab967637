"""Every built-in TTL policy against the shipped TTLPolicySuite, and proof the suite can fail."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memlab.testing import TTLPolicySuite
from memlab.ttl import LazySlackTTL, NoTTL, SlidingTTL, TTLPolicy


class TestSliding(TTLPolicySuite):
    @pytest.fixture
    def ttl_policy(self) -> TTLPolicy:
        return SlidingTTL(3600)


class TestLazySlack(TTLPolicySuite):
    @pytest.fixture
    def ttl_policy(self) -> TTLPolicy:
        return LazySlackTTL(3600)


class TestLazySlackWide(TTLPolicySuite):
    @pytest.fixture
    def ttl_policy(self) -> TTLPolicy:
        return LazySlackTTL(90.5, slack=0.9)


class TestNone(TTLPolicySuite):
    @pytest.fixture
    def ttl_policy(self) -> TTLPolicy:
        return NoTTL()


class TestSlidingDisabled(TTLPolicySuite):
    @pytest.fixture
    def ttl_policy(self) -> TTLPolicy:
        return SlidingTTL(None)


class _LateCutoff(TTLPolicy):
    """Broken on purpose: the cutoff lies after the new expiry, so writes could move expiry back."""

    name = "late_cutoff"

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        return None if self.seconds is None else now + timedelta(seconds=2 * self.seconds)


def test_the_suite_rejects_a_cutoff_after_the_new_expiry() -> None:
    with pytest.raises(AssertionError):
        TTLPolicySuite().test_cutoff_bounds(ttl_policy=_LateCutoff(3600))
