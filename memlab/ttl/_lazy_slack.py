from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from memlab.exceptions import ConfigError
from memlab.ttl._base import TTLPolicy


class LazySlackTTL(TTLPolicy):
    """Sliding expiry re-stamped only once it lags the target by more than ``slack``·TTL.

    Entries therefore expire within ``[(1 - slack)·ttl, ttl]`` after the session's
    last write, and a busy session costs one expiry write per ``slack``·TTL instead
    of one per write. The SQL backends' default (slack 0.05).
    """

    name = "lazy_slack"

    @classmethod
    def from_config(cls, config: Any) -> "LazySlackTTL":
        """``lazy_slack`` from the config: ``ttl.seconds`` and ``ttl.slack``."""
        return cls(config.ttl.seconds, slack=config.ttl.slack)

    def __init__(self, seconds: float | None, slack: float = 0.05) -> None:
        super().__init__(seconds)
        if not 0 <= slack < 1:
            raise ConfigError(f"ttl slack must be in [0, 1), got {slack!r}")
        self.slack = slack

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        if self.seconds is None:
            return None
        return now + timedelta(seconds=self.seconds) - timedelta(seconds=self.slack * self.seconds)
