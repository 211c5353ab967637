from __future__ import annotations

from datetime import datetime, timedelta, timezone

from memlab.exceptions import ValidationError


class FakeClock:
    """A clock that moves only when told to: ``FakeClock(start).advance(seconds)``.

    ``now()`` and ``monotonic()`` advance together, so TTL expiry and sweep
    throttling can both be tested without sleeping.
    """

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=timezone.utc)
        if start.tzinfo is None:
            raise ValidationError(f"FakeClock start must be timezone-aware, got {start!r}")
        self._now = start.astimezone(timezone.utc)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> datetime:
        """Move time forward by ``seconds`` (>= 0) and return the new ``now()``."""
        if seconds < 0:
            raise ValidationError(f"FakeClock.advance needs seconds >= 0, got {seconds!r}")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        return self._now
