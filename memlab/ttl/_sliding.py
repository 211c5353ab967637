from __future__ import annotations

from datetime import datetime

from memlab.ttl._base import TTLPolicy


class SlidingTTL(TTLPolicy):
    """Exact sliding expiry: every write moves expiry to ``now + ttl``."""

    name = "sliding"

    def needs_restamp(self, current: datetime | None, now: datetime) -> bool:
        if not self.enabled:
            return False
        target = self.expiry_after_write(now)
        return current is None or current < target
