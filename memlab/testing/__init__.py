"""Shipped test tools: a fake clock, the backend conformance suite, backend suppliers, state machines."""

from memlab.testing._clock import FakeClock

__all__ = ["FakeClock"]
