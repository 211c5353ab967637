"""TTL policy family: ``sliding`` (exact), ``lazy_slack`` (SQL default), ``none``."""

from memlab.ttl._base import TTLPolicy
from memlab.ttl._lazy_slack import LazySlackTTL
from memlab.ttl._none import NoTTL
from memlab.ttl._sliding import SlidingTTL

__all__ = ["LazySlackTTL", "NoTTL", "SlidingTTL", "TTLPolicy"]
