"""TTL policies: when a session's stored entries expire.

Contract (the same on every backend): expiry counts from the session's last
*write*, never from a read. Each backend keeps one expiry per (user, session,
kind), where kind is the table or list written (``qa``, ``context``); a write
stamps a new expiry when :meth:`TTLPolicy.needs_restamp` says so, and a read
treats the session as gone once ``now >= expires_at``.

A policy declares its rule rather than running it: :meth:`TTLPolicy.restamp_cutoff`
gives the moment below which a write at ``now`` replaces the stored expiry with
:meth:`TTLPolicy.expiry_after_write`, so a backend can apply the rule inside its
store (a SQL predicate, a Lua comparison) for any policy. Since the cutoff is never
later than the new expiry, the rule only ever moves an expiry later (a write to a
dead kind purges it and starts it afresh, live): a kind found live stays live until
that expiry, and every backend may serve reads without re-checking the policy.
"""

from __future__ import annotations

import abc
from datetime import datetime, timedelta
from typing import Any


class TTLPolicy(abc.ABC):
    """Decides the expiry a write stamps. Pure and cheap; no I/O."""

    #: configuration name of the policy
    name: str = ""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds if seconds and seconds > 0 else None

    @classmethod
    def from_config(cls, config: Any) -> "TTLPolicy":
        """This policy as a :class:`~memlab.config.StackConfig` describes it: ``config.ttl.seconds``."""
        return cls(config.ttl.seconds)

    @property
    def enabled(self) -> bool:
        """True when entries expire at all."""
        return self.seconds is not None

    def expiry_after_write(self, now: datetime) -> datetime | None:
        """The exact expiry a write at ``now`` earns: ``now + ttl`` (or None: never)."""
        return now + timedelta(seconds=self.seconds) if self.seconds else None

    @abc.abstractmethod
    def restamp_cutoff(self, now: datetime) -> datetime | None:
        """The rule: a write at ``now`` re-stamps a stored expiry that is None or earlier than this.

        The new stamp is ``expiry_after_write(now)``. None when TTL is disabled (no
        write ever stamps); otherwise never later than ``expiry_after_write(now)``,
        so a re-stamp never moves an expiry backwards, and entries expire within
        ``[cutoff - now, ttl]`` after the session's last write.
        """

    def needs_restamp(self, current: datetime | None, now: datetime) -> bool:
        """Whether a write at ``now`` must replace the stored expiry ``current`` (None: nothing stamped yet)."""
        cutoff = self.restamp_cutoff(now)
        return cutoff is not None and (current is None or current < cutoff)

    @staticmethod
    def is_live(expires_at: datetime | None, now: datetime) -> bool:
        """A session kind is readable while ``expires_at`` is None or strictly after ``now``."""
        return expires_at is None or expires_at > now
