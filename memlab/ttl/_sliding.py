from __future__ import annotations

from datetime import datetime

from memlab.ttl._base import TTLPolicy


class SlidingTTL(TTLPolicy):
    """Exact sliding expiry: every write moves expiry to ``now + ttl``."""

    name = "sliding"

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        return self.expiry_after_write(now)
