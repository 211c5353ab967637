from __future__ import annotations

from datetime import datetime

from memlab.ttl._base import TTLPolicy


class NoTTL(TTLPolicy):
    """Entries never expire; no expiry is stored and no re-stamp write ever happens."""

    name = "none"

    def __init__(self, seconds: float | None = None) -> None:
        super().__init__(None)

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        return None
