from __future__ import annotations

from datetime import datetime, timedelta

from memlab.exceptions import ConfigError
from memlab.ttl._base import TTLPolicy


class LazySlackTTL(TTLPolicy):
    """Sliding expiry re-stamped only once it lags the target by more than ``slack``·TTL.

    Entries therefore expire within ``[(1 - slack)·ttl, ttl]`` after the session's
    last write, and a busy session costs one expiry write per ``slack``·TTL instead
    of one per write. The SQL backends' default (slack 0.05).
    """

    name = "lazy_slack"

    def __init__(self, seconds: float | None, slack: float = 0.05) -> None:
        super().__init__(seconds)
        if not 0 <= slack < 1:
            raise ConfigError(f"ttl slack must be in [0, 1), got {slack!r}")
        self.slack = slack

    def needs_restamp(self, current: datetime | None, now: datetime) -> bool:
        if not self.enabled:
            return False
        if current is None:
            return True
        cutoff = self.expiry_after_write(now) - timedelta(seconds=self.slack * self.seconds)
        return current < cutoff
