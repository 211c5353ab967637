"""Time sources: the public home of :class:`Clock` and :class:`SystemClock`.

Every time-dependent part of memlab reads one clock, ``stack.clock``: pass one as
``MemoryStack(config, clock=...)`` (tests use :class:`memlab.testing.FakeClock`), or
leave it out for the real clock. A clock is any object with ``now()`` (a
timezone-aware UTC ``datetime``) and ``monotonic()`` (seconds, never going back)::

    from memlab.clock import Clock, SystemClock
"""

from __future__ import annotations

from memlab._clock import Clock, SystemClock

__all__ = ["Clock", "SystemClock"]
