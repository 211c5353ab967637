"""Issue 26 item 4: ``memlab.stats``: bootstrap intervals and paired tests keep their promises on any values.

Values are per-question metrics: recall-like fractions in ``[0, 1]`` and hit-like 0/1,
with None for a question that has no value. Resample counts are kept small so each
example runs in milliseconds; the properties do not depend on the count.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.exceptions import ValidationError
from memlab.stats import (
    DEFAULT_RESAMPLES,
    bootstrap_interval,
    format_p,
    mcnemar_p,
    paired_difference,
)

FRACTION = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
HIT = st.sampled_from([0.0, 1.0])
VALUES = st.lists(st.one_of(FRACTION, st.none()), min_size=1, max_size=80)
HITS = st.lists(HIT, min_size=1, max_size=80)
RESAMPLES = st.integers(min_value=1, max_value=300)
SEED = st.integers(min_value=0, max_value=2**32 - 1)
CONFIDENCE = st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99])


@settings(max_examples=150, deadline=None)
@given(values=VALUES, resamples=RESAMPLES, seed=SEED, confidence=CONFIDENCE)
def test_the_interval_contains_the_mean_of_the_values_present(values, resamples, seed, confidence):
    interval = bootstrap_interval(values, resamples=resamples, seed=seed, confidence=confidence)
    present = [value for value in values if value is not None]
    if not present:
        assert interval is None
        return
    assert interval is not None
    assert interval.estimate == pytest.approx(sum(present) / len(present))
    assert interval.lo <= interval.estimate <= interval.hi and interval.estimate in interval
    assert min(present) - 1e-12 <= interval.lo and interval.hi <= max(present) + 1e-12  # means of draws of the values
    assert interval.n == len(present) and interval.resamples == resamples


@settings(max_examples=60, deadline=None)
@given(values=VALUES, seed=SEED)
def test_the_same_seed_gives_the_same_interval_and_a_wider_confidence_a_wider_one(values, seed):
    first = bootstrap_interval(values, resamples=200, seed=seed)
    assert first == bootstrap_interval(values, resamples=200, seed=seed)
    if first is not None:
        wide = bootstrap_interval(values, resamples=200, seed=seed, confidence=0.99)
        narrow = bootstrap_interval(values, resamples=200, seed=seed, confidence=0.5)
        assert wide is not None and narrow is not None
        assert wide.lo <= first.lo <= narrow.lo and narrow.hi <= first.hi <= wide.hi


@settings(max_examples=100, deadline=None)
@given(values=VALUES, resamples=RESAMPLES, seed=SEED)
def test_identical_retrievers_differ_by_nothing_with_p_1(values, resamples, seed):
    found = paired_difference(values, list(values), resamples=resamples, seed=seed)
    if all(value is None for value in values):
        assert found is None
        return
    assert found is not None
    assert found.difference == 0.0 and found.lo <= 0.0 <= found.hi and found.p_value == 1.0
    assert not found.significant()


@settings(max_examples=100, deadline=None)
@given(hits=HITS, seed=SEED)
def test_identical_hit_columns_give_mcnemar_p_1(hits, seed):
    found = paired_difference(hits, list(hits), test="mcnemar", resamples=50, seed=seed)
    assert found is not None and found.p_value == 1.0 and (found.a_only, found.b_only) == (0, 0)
    assert found.lo <= 0.0 <= found.hi


@settings(max_examples=60, deadline=None)
@given(
    base=st.lists(st.floats(min_value=0.0, max_value=0.5, allow_nan=False), min_size=30, max_size=80),
    gain=st.floats(min_value=0.3, max_value=0.5),
    seed=SEED,
)
def test_a_clearly_better_retriever_gets_p_below_005(base, gain, seed):
    better = [value + gain for value in base]
    found = paired_difference(better, base, resamples=500, seed=seed)
    assert found is not None and found.p_value < 0.05 and found.significant()
    assert found.lo > 0 and found.difference == pytest.approx(gain)
    worse = paired_difference(base, better, resamples=500, seed=seed)
    assert worse is not None and worse.p_value < 0.05 and worse.hi < 0


@settings(max_examples=60, deadline=None)
@given(misses=st.integers(min_value=8, max_value=60), ties=st.lists(HIT, max_size=40), seed=SEED)
def test_a_retriever_that_hits_where_the_other_misses_gets_mcnemar_p_below_005(misses, ties, seed):
    a = [1.0] * misses + ties
    b = [0.0] * misses + ties
    found = paired_difference(a, b, test="mcnemar", resamples=200, seed=seed)
    assert found is not None and (found.a_only, found.b_only) == (misses, 0)
    assert found.p_value == pytest.approx(2 / 2**misses) and found.p_value < 0.05 and found.lo > 0


@given(a_only=st.integers(min_value=0, max_value=200), b_only=st.integers(min_value=0, max_value=200))
def test_mcnemar_is_symmetric_and_a_probability(a_only, b_only):
    p = mcnemar_p(a_only, b_only)
    assert p == mcnemar_p(b_only, a_only) and 0 < p <= 1
    if a_only == b_only:
        assert p == 1.0


def test_mcnemar_matches_the_binomial_by_hand():
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(5, 0) == pytest.approx(2 / 32)
    assert mcnemar_p(7, 2) == pytest.approx(2 * (1 + 9 + 36) / 512)


def test_pairs_with_a_missing_side_are_left_out_and_bad_input_is_refused():
    found = paired_difference([1.0, None, 0.0, 1.0], [0.0, 1.0, None, 0.0], test="mcnemar", resamples=10)
    assert found is not None and found.n == 2 and (found.a_mean, found.b_mean) == (1.0, 0.0)
    assert paired_difference([None], [1.0]) is None
    with pytest.raises(ValidationError, match="as many"):
        paired_difference([1.0], [1.0, 0.0])
    with pytest.raises(ValidationError, match="0 or 1"):
        paired_difference([0.5], [1.0], test="mcnemar")
    with pytest.raises(ValidationError, match="test must be"):
        paired_difference([0.5], [1.0], test="t")  # type: ignore[arg-type]
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValidationError, match="resamples"):
            bootstrap_interval([1.0], resamples=bad)  # type: ignore[arg-type]
    for bad in (0, 1, 1.5, math.nan):
        with pytest.raises(ValidationError, match="confidence"):
            bootstrap_interval([1.0], confidence=bad)


def test_defaults_and_formatting():
    interval = bootstrap_interval([0.0, 1.0] * 50)
    assert interval is not None and interval.resamples == DEFAULT_RESAMPLES and interval.confidence == 0.95
    assert str(interval) == f"0.500 [{interval.lo:.3f}, {interval.hi:.3f}]"
    assert format_p(0.0004) == "p < 0.001" and format_p(0.0412) == "p = 0.041"
