"""Shared test setup: offline LLM settings and hypothesis profiles.

Profiles: ``dev`` (default) and ``ci`` (chosen when ``CI`` is true); pick another
with ``HYPOTHESIS_PROFILE``. Both disable the per-example deadline, since SQLite
and server round trips jitter on shared machines.
"""

from __future__ import annotations

import os

from hypothesis import settings

# litellm must never reach the network in tests (FINDINGS.md, "litellm offline").
for _var, _value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1"}.items():
    os.environ.setdefault(_var, _value)

settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, print_blob=True)
_ci = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if _ci else "dev"))
