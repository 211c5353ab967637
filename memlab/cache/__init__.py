"""Cache backend family: where session turns and guidance are stored.

Implementations are imported lazily (``memlab.cache.SQLCache`` loads SQLAlchemy
only when first touched).
"""

from memlab.cache._base import CacheBackend, QALog

__all__ = ["CacheBackend", "MemoryCache", "QALog", "SQLCache"]

_LAZY = {"MemoryCache": "memlab.cache._memory", "SQLCache": "memlab.cache._sql"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memlab.cache' has no attribute {name!r}")
