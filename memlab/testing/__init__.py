"""Shipped test tools: a fake clock, the backend and policy conformance suites, backend suppliers, state machines, a fast stack config.

``FakeClock`` is light; the rest import pytest / hypothesis and load on first use.
"""

from memlab._imports import lazy_getattr
from memlab.testing._clock import FakeClock

__all__ = [
    "BACKENDS",
    "CacheAgreementMachine",
    "CacheBackendSuite",
    "FakeClock",
    "MergePolicySuite",
    "SUPPLIERS",
    "TTLPolicySuite",
    "agreement_machine",
    "fast_config",
    "postgres_database",
    "server_url",
    "supply_backend",
]

_LAZY = {
    "BACKENDS": "memlab.testing.suppliers",
    "SUPPLIERS": "memlab.testing.suppliers",
    "server_url": "memlab.testing.suppliers",
    "supply_backend": "memlab.testing.suppliers",
    "CacheBackendSuite": "memlab.testing.conformance",
    "MergePolicySuite": "memlab.testing.policy_suites",
    "TTLPolicySuite": "memlab.testing.policy_suites",
    "CacheAgreementMachine": "memlab.testing.machines",
    "agreement_machine": "memlab.testing.machines",
    "fast_config": "memlab.testing._config",
    "postgres_database": "memlab.testing.databases",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
