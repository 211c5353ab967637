"""Shared test setup: offline LLM settings, hypothesis profiles and the fast ``stack`` fixture.

``docs_build`` is ``scripts/docs_build.py``, the docs site's build (what the notebook and
docs-site tests read: the executed notebooks, the built site).

Profiles: ``dev`` (default) and ``ci`` (chosen when ``CI`` is true); pick another
with ``HYPOTHESIS_PROFILE``. Both disable the per-example deadline, since SQLite
and server round trips jitter on shared machines.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from hypothesis import settings

from memlab import MemoryStack
from memlab.testing import FakeClock, fast_config

# litellm must never reach the network in tests (FINDINGS.md, "litellm offline").
for _var, _value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1"}.items():
    os.environ.setdefault(_var, _value)

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, print_blob=True)
_ci = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if _ci else "dev"))


@pytest.fixture
async def stack(tmp_path):
    """An open MemoryStack on :func:`memlab.testing.fast_config` (hashing embedder, offline LLM) and a FakeClock."""
    async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock()) as opened:
        yield opened


@pytest.fixture(scope="session")
def docs_build():
    """``scripts/docs_build.py`` as a module (a script, not a package: loaded from its path)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "docs_build.py"
    spec = importlib.util.spec_from_file_location("docs_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
