"""Root conftest: rewrite asserts in the shipped test helpers (they run as third-party tests)."""

import pytest

pytest.register_assert_rewrite("memlab.testing.conformance", "memlab.testing.machines", "memlab.testing.policy_suites")
