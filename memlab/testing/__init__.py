"""Shipped test tools: a fake clock, the conformance suites and ``check(obj)``, backend suppliers, state machines, a fast stack config.

``FakeClock`` is light; the rest import pytest / hypothesis and load on first use.
"""

from memlab._imports import lazy_getattr
from memlab.testing._clock import FakeClock

__all__ = [
    "AnalysisModeSuite",
    "BACKENDS",
    "CacheAgreementMachine",
    "CacheBackendSuite",
    "EmbedderSuite",
    "FakeClock",
    "MergePolicySuite",
    "Report",
    "RetrieverSuite",
    "SUPPLIERS",
    "SessionRerankerSuite",
    "SessionRetrieverSuite",
    "TTLPolicySuite",
    "agreement_machine",
    "check",
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
    "Report": "memlab.testing.checker",
    "check": "memlab.testing.checker",
    "RetrieverSuite": "memlab.testing.retriever_suite",
    "EmbedderSuite": "memlab.testing.embedder_suite",
    "AnalysisModeSuite": "memlab.testing.analysis_suite",
    "MergePolicySuite": "memlab.testing.policy_suites",
    "TTLPolicySuite": "memlab.testing.policy_suites",
    "SessionRetrieverSuite": "memlab.testing.session_suite",
    "SessionRerankerSuite": "memlab.testing.reranker_suite",
    "CacheAgreementMachine": "memlab.testing.machines",
    "agreement_machine": "memlab.testing.machines",
    "fast_config": "memlab.testing._config",
    "postgres_database": "memlab.testing.databases",
}


__getattr__ = lazy_getattr(__name__, _LAZY)
