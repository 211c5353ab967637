"""Every registered backend (but the model itself) agrees with MemoryCache, step by step."""

from __future__ import annotations

from contextlib import asynccontextmanager
from functools import partial

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from memlab.cache._memory import MemoryCache
from memlab.testing.machines import agreement_machine
from memlab.testing.suppliers import BACKENDS, supply_backend

MACHINE_SETTINGS = settings(
    max_examples=50,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("name", [name for name in BACKENDS if name != "memory"])
def test_backend_agrees_with_memory_model(name):
    run_state_machine_as_test(agreement_machine(partial(supply_backend, name), name=name), settings=MACHINE_SETTINGS)


class _ReadsSlideCache(MemoryCache):
    """A deliberately broken backend: reading a session slides its QA expiry."""

    name = "broken"

    async def _read_qa(self, user_id, session_id, last_n, now):
        state = self._get(user_id, session_id, "qa", now)
        if state is not None:
            self._slide(state, now)
        return await super()._read_qa(user_id, session_id, last_n, now)


@asynccontextmanager
async def _broken(*, tmp_path, ttl, clock, purge_interval_seconds):
    async with _ReadsSlideCache(ttl=ttl, clock=clock, purge_interval_seconds=purge_interval_seconds) as cache:
        yield cache


def test_machine_catches_a_broken_backend():
    """The machine has teeth: a backend whose reads slide the TTL is caught (no shrinking, to stay fast)."""
    quick = settings(MACHINE_SETTINGS, max_examples=200, database=None, derandomize=True, phases=[Phase.generate])
    with pytest.raises(AssertionError, match="broken"):
        run_state_machine_as_test(agreement_machine(_broken, name="broken"), settings=quick)
