"""Cache backend family: where session turns and guidance are stored.

Implementations are imported lazily (``memlab.cache.SQLCache`` loads SQLAlchemy
only when first touched).
"""

from memlab._imports import lazy_getattr
from memlab.cache._base import CacheBackend, QALog

__all__ = ["CacheBackend", "DiskCache", "MemoryCache", "QALog", "RedisCache", "SQLCache", "SQL_SCHEMA", "TapesCache", "redis_client", "redis_connection_kwargs"]

_LAZY = {
    "DiskCache": "memlab.cache._disk",
    "MemoryCache": "memlab.cache._memory",
    "RedisCache": "memlab.cache._redis",
    "redis_client": "memlab.cache._redis",
    "redis_connection_kwargs": "memlab.cache._redis",
    "SQLCache": "memlab.cache._sql",
    "SQL_SCHEMA": "memlab.cache._sql",
    "TapesCache": "memlab.cache._tapes",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
