"""TTL policies: when a session's stored entries expire.

Contract (the same on every backend): expiry counts from the session's last
*write*, never from a read. Each backend keeps one expiry per (user, session,
kind), where kind is the table or list written (``qa``, ``context``); a write
stamps a new expiry when :meth:`TTLPolicy.needs_restamp` says so, and a read
treats the session as gone once ``now >= expires_at``.
"""

from __future__ import annotations

import abc
from datetime import datetime, timedelta


class TTLPolicy(abc.ABC):
    """Decides the expiry a write stamps. Pure and cheap; no I/O."""

    #: configuration name of the policy
    name: str = ""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds if seconds and seconds > 0 else None

    @property
    def enabled(self) -> bool:
        """True when entries expire at all."""
        return self.seconds is not None

    def expiry_after_write(self, now: datetime) -> datetime | None:
        """The exact expiry a write at ``now`` earns: ``now + ttl`` (or None: never)."""
        return now + timedelta(seconds=self.seconds) if self.seconds else None

    @abc.abstractmethod
    def needs_restamp(self, current: datetime | None, now: datetime) -> bool:
        """Whether a write at ``now`` must replace the stored expiry ``current``.

        ``current`` is None when nothing is stamped yet (or the session was written
        with expiry off). Implementations must keep the stored expiry within the
        window they promise, never move it backwards, and never demand a write when
        TTL is disabled.
        """

    @staticmethod
    def is_live(expires_at: datetime | None, now: datetime) -> bool:
        """A session kind is readable while ``expires_at`` is None or strictly after ``now``."""
        return expires_at is None or expires_at > now
