"""Shipped test tools: a fake clock, the backend conformance suite, backend suppliers, state machines.

``FakeClock`` is light; the rest import pytest / hypothesis and load on first use.
"""

from memlab.testing._clock import FakeClock

__all__ = [
    "BACKENDS",
    "CacheAgreementMachine",
    "CacheBackendSuite",
    "FakeClock",
    "SUPPLIERS",
    "agreement_machine",
    "server_url",
    "supply_backend",
]

_LAZY = {
    "BACKENDS": "memlab.testing.suppliers",
    "SUPPLIERS": "memlab.testing.suppliers",
    "server_url": "memlab.testing.suppliers",
    "supply_backend": "memlab.testing.suppliers",
    "CacheBackendSuite": "memlab.testing.conformance",
    "CacheAgreementMachine": "memlab.testing.machines",
    "agreement_machine": "memlab.testing.machines",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memlab.testing' has no attribute {name!r}")
