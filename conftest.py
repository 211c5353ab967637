"""Root conftest: rewrite asserts in the shipped test helpers (they run as third-party tests)."""

import pytest

pytest.register_assert_rewrite(
    "memlab.testing.analysis_suite",
    "memlab.testing.checker",
    "memlab.testing.conformance",
    "memlab.testing.embedder_suite",
    "memlab.testing.machines",
    "memlab.testing.policy_suites",
    "memlab.testing.reranker_suite",
    "memlab.testing.retriever_suite",
    "memlab.testing.session_suite",
)
