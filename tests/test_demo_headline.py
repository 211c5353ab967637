"""The mode demo's headline states the measured ratio and names a cause only when the numbers support it (issue 24, deliverable 7)."""

from __future__ import annotations

import pandas as pd
import pytest

from memlab.demo._modes import CAUSE_RATIO, MODE_COLUMN, Machine, _headline

MACHINE = Machine(cpus=2, load_before=9.5, load_after=10.2, embedder="memlab/minilm")


def _summary(concurrent_ms: float, sequential_ms: float) -> pd.DataFrame:
    return pd.DataFrame([
        {MODE_COLUMN: "concurrent", "latency_p50_ms": concurrent_ms, "answered": 24, "turns": 24, "tokens_per_turn": 750},
        {MODE_COLUMN: "sequential", "latency_p50_ms": sequential_ms, "answered": 14, "turns": 24, "tokens_per_turn": 590},
    ])


def test_a_clear_overlap_is_explained():
    [first, _] = _headline(_summary(320, 528), MACHINE)
    assert "0.61x the time" in first and "runs beside the answer" in first and "no cause" not in first


@pytest.mark.parametrize(("concurrent", "ratio"), [(496, "0.94x"), (734, "1.10x")])
def test_a_weak_or_reversed_difference_states_the_ratio_and_the_machine_and_claims_no_cause(concurrent, ratio):
    [first, _] = _headline(_summary(concurrent, 528 if concurrent < 528 else 667), MACHINE)
    assert ratio in first and "no cause is claimed" in first and "beside the answer instead" not in first
    assert "2 CPUs" in first and "9.50 -> 10.20" in first and "memlab/minilm" in first


def test_the_cause_threshold_is_inclusive():
    [first, _] = _headline(_summary(CAUSE_RATIO * 400, 400), MACHINE)
    assert "runs beside the answer" in first
