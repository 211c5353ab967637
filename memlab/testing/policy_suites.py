"""Conformance suites for the strategy families :class:`~memlab.merge.MergePolicy` and :class:`~memlab.ttl.TTLPolicy`.

Subclass a suite in a test module and provide its fixture; the suite's tests check
only what the family's base contract promises for every policy::

    import pytest
    from memlab.testing.policy_suites import MergePolicySuite, TTLPolicySuite

    class TestMyMerge(MergePolicySuite):
        @pytest.fixture
        def merge_policy(self):
            return MyMerge()

    class TestMyTTL(TTLPolicySuite):
        @pytest.fixture
        def ttl_policy(self):
            return MyTTL(3600)

Policy-specific rules (a reserve, an order) belong in the policy's own tests. The
fixture must return a stateless policy: hypothesis reuses it across examples.
Register the module for assertion rewriting in your root ``conftest.py``:
``pytest.register_assert_rewrite("memlab.testing.policy_suites")``.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.exceptions import ValidationError
from memlab.merge import MergePolicy, identity
from memlab.ttl import TTLPolicy

__all__ = ["MergePolicySuite", "TTLPolicySuite"]

_SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])


class _Item:
    """A result object read through attributes (``.id``)."""

    def __init__(self, item_id: Any, text: str) -> None:
        self.id = item_id
        self.text = text

    def __repr__(self) -> str:
        return f"_Item(id={self.id!r}, text={self.text!r})"


def _make_item(kind: str, item_id: str | None, text: str) -> Any:
    if kind == "object":
        return _Item(item_id, text)
    if item_id is None:
        return {"text": text}
    return {"id": item_id, "text": text}


# a small id alphabet so the lanes overlap and repeat; None: an item without identity
_ITEMS = st.builds(
    _make_item,
    st.sampled_from(["dict", "object"]),
    st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d", "e", " a ", "f"])),
    st.text(max_size=3),
)
_LANES = st.one_of(st.none(), st.lists(_ITEMS, max_size=8))
_LIMITS = st.one_of(st.none(), st.integers(min_value=0, max_value=10))
_RESERVES = st.one_of(st.none(), st.integers(min_value=-2, max_value=10))


def _ids(items: list[Any]) -> list[int]:
    return [id(item) for item in items]


def _snapshot(lane: list[Any] | None) -> tuple[list[int], list[dict[str, Any]]] | None:
    """A lane's item objects and their fields, to detect mutation."""
    if lane is None:
        return None
    return _ids(lane), [dict(vars(item)) if isinstance(item, _Item) else dict(item) for item in lane]


class MergePolicySuite:
    """The :class:`~memlab.merge.MergePolicy` contract; subclasses provide a ``merge_policy`` fixture."""

    @pytest.fixture
    def merge_policy(self) -> MergePolicy:
        raise NotImplementedError("a MergePolicySuite subclass must provide a `merge_policy` fixture")

    @_SETTINGS
    @given(raw=_LANES, rewrite=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_result_never_exceeds_limit(self, merge_policy: MergePolicy, raw: Any, rewrite: Any, limit: Any, reserve: Any) -> None:
        result = merge_policy.merge(raw, rewrite, limit, reserve)
        assert isinstance(result, list), f"merge returned {type(result).__name__}, not a list"
        if limit is not None:
            assert len(result) <= limit, f"{len(result)} items returned with limit={limit}: {result!r}"

    @_SETTINGS
    @given(raw=_LANES, rewrite=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_no_identity_twice(self, merge_policy: MergePolicy, raw: Any, rewrite: Any, limit: Any, reserve: Any) -> None:
        result = merge_policy.merge(raw, rewrite, limit, reserve)
        seen: set[Hashable] = set()
        for item in result:
            key = identity(item)
            if key is None:
                continue
            assert key not in seen, f"identity {key!r} appears twice in {result!r}"
            seen.add(key)

    @_SETTINGS
    @given(raw=_LANES, rewrite=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_items_come_from_the_lanes(self, merge_policy: MergePolicy, raw: Any, rewrite: Any, limit: Any, reserve: Any) -> None:
        given_items = {id(item) for item in (raw or []) + (rewrite or [])}
        result = merge_policy.merge(raw, rewrite, limit, reserve)
        for item in result:
            assert id(item) in given_items, f"{item!r} is not one of the given item objects"
        assert len(set(_ids(result))) == len(result), f"an item object appears twice in {result!r}"

    @_SETTINGS
    @given(raw=_LANES, rewrite=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_does_not_mutate_the_lanes(self, merge_policy: MergePolicy, raw: Any, rewrite: Any, limit: Any, reserve: Any) -> None:
        before = (_snapshot(raw), _snapshot(rewrite))
        result = merge_policy.merge(raw, rewrite, limit, reserve)
        assert result is not raw and result is not rewrite, "merge must return a new list"
        assert (_snapshot(raw), _snapshot(rewrite)) == before, "merge mutated a lane or its items"

    @_SETTINGS
    @given(raw=_LANES, rewrite=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_deterministic(self, merge_policy: MergePolicy, raw: Any, rewrite: Any, limit: Any, reserve: Any) -> None:
        first = merge_policy.merge(raw, rewrite, limit, reserve)
        again = merge_policy.merge(raw, rewrite, limit, reserve)
        assert _ids(again) == _ids(first), f"two merges of the same lanes differ: {first!r} vs {again!r}"
        raw_copy = None if raw is None else list(raw)
        rewrite_copy = None if rewrite is None else tuple(rewrite)
        other = merge_policy.merge(raw_copy, rewrite_copy, limit, reserve)
        assert _ids(other) == _ids(first), f"equal lanes in other containers merged differently: {first!r} vs {other!r}"

    @_SETTINGS
    @given(raw=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_failed_rewrite_lane_is_an_empty_lane(self, merge_policy: MergePolicy, raw: Any, limit: Any, reserve: Any) -> None:
        failed = merge_policy.merge(raw, None, limit, reserve)
        empty = merge_policy.merge(raw, [], limit, reserve)
        assert _ids(failed) == _ids(empty), f"rewrite=None gave {failed!r}, rewrite=[] gave {empty!r}"

    @_SETTINGS
    @given(rewrite=_LANES, limit=_LIMITS, reserve=_RESERVES)
    def test_failed_raw_lane_is_accepted(self, merge_policy: MergePolicy, rewrite: Any, limit: Any, reserve: Any) -> None:
        # Whether a failed raw lane may fall back to the rewrite lane is each policy's rule
        # (raw_only does); the base contract only promises its guarantees hold.
        result = merge_policy.merge(None, rewrite, limit, reserve)
        assert limit is None or len(result) <= limit
        assert {id(item) for item in result} <= {id(item) for item in rewrite or []}

    @_SETTINGS
    @given(limit=_LIMITS, reserve=_RESERVES)
    def test_no_items_give_an_empty_list(self, merge_policy: MergePolicy, limit: Any, reserve: Any) -> None:
        for raw, rewrite in ((None, None), ([], []), (None, []), ([], None)):
            result = merge_policy.merge(raw, rewrite, limit, reserve)
            assert result == [], f"merge({raw!r}, {rewrite!r}) returned {result!r}"

    @_SETTINGS
    @given(raw=_LANES, rewrite=_LANES, reserve=_RESERVES)
    def test_zero_limit_gives_an_empty_list(self, merge_policy: MergePolicy, raw: Any, rewrite: Any, reserve: Any) -> None:
        assert merge_policy.merge(raw, rewrite, 0, reserve) == []

    def test_dicts_and_objects_are_both_read(self, merge_policy: MergePolicy) -> None:
        as_dict = {"id": "x", "text": "dict"}
        as_object = _Item("x", "object")
        for raw, rewrite in (([as_dict], [as_object]), ([as_object], [as_dict])):
            result = merge_policy.merge(raw, rewrite, None)
            assert len(result) == 1, f"a dict and an object with the same id were both kept: {result!r}"
        for lane in ([as_dict, _Item("x", "again")], [as_object, {"id": "x"}]):
            assert len(merge_policy.merge(lane, None, None)) <= 1

    @pytest.mark.parametrize(
        "args",
        [
            ("not a lane", [], None),
            ([], b"bytes", None),
            ({"id": "a"}, [], None),
            ([], 3, None),
            ([], [], -1),
            ([], [], 1.5),
            ([], [], True),
            ([], [], "3"),
            ([], [], 3, "1"),
            ([], [], 3, 1.0),
        ],
        ids=["raw-str", "rewrite-bytes", "raw-mapping", "rewrite-int", "limit-negative", "limit-float",
             "limit-bool", "limit-str", "reserve-str", "reserve-float"],
    )
    def test_bad_arguments_raise_validation_error(self, merge_policy: MergePolicy, args: tuple[Any, ...]) -> None:
        with pytest.raises(ValidationError):
            merge_policy.merge(*args)


_NOW = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc))
_STEPS = st.lists(st.integers(min_value=0, max_value=10 * 86_400_000), min_size=1, max_size=12)  # milliseconds
_OFFSETS = st.one_of(st.none(), st.integers(min_value=-10 * 86_400_000, max_value=10 * 86_400_000))


def _ms(value: int) -> timedelta:
    return timedelta(milliseconds=value)


class TTLPolicySuite:
    """The :class:`~memlab.ttl.TTLPolicy` contract; subclasses provide a ``ttl_policy`` fixture.

    The fixture's policy may be enabled (a lifetime) or disabled (never expires).
    """

    @pytest.fixture
    def ttl_policy(self) -> TTLPolicy:
        raise NotImplementedError("a TTLPolicySuite subclass must provide a `ttl_policy` fixture")

    @_SETTINGS
    @given(now=_NOW)
    def test_enabled_matches_the_lifetime(self, ttl_policy: TTLPolicy, now: datetime) -> None:
        assert ttl_policy.enabled == (ttl_policy.seconds is not None)
        if ttl_policy.seconds is not None:
            assert ttl_policy.seconds > 0, f"an enabled policy has lifetime {ttl_policy.seconds!r}"

    @_SETTINGS
    @given(now=_NOW)
    def test_expiry_after_write_is_now_plus_ttl(self, ttl_policy: TTLPolicy, now: datetime) -> None:
        expiry = ttl_policy.expiry_after_write(now)
        if ttl_policy.seconds is None:
            assert expiry is None, f"a disabled policy stamped {expiry!r}"
        else:
            assert expiry == now + timedelta(seconds=ttl_policy.seconds)

    @_SETTINGS
    @given(now=_NOW, later=st.integers(min_value=0, max_value=10 * 86_400_000))
    def test_expiry_is_monotone_in_the_write_time(self, ttl_policy: TTLPolicy, now: datetime, later: int) -> None:
        first, second = ttl_policy.expiry_after_write(now), ttl_policy.expiry_after_write(now + _ms(later))
        if first is not None and second is not None:
            assert first <= second, f"a later write earns an earlier expiry: {first} then {second}"

    @_SETTINGS
    @given(now=_NOW)
    def test_cutoff_bounds(self, ttl_policy: TTLPolicy, now: datetime) -> None:
        cutoff = ttl_policy.restamp_cutoff(now)
        if not ttl_policy.enabled:
            assert cutoff is None, f"a disabled policy has cutoff {cutoff!r}"
            return
        expiry = ttl_policy.expiry_after_write(now)
        assert cutoff is not None, "an enabled policy has no cutoff: no write would ever stamp"
        assert expiry is not None
        assert now <= cutoff <= expiry, f"cutoff {cutoff} outside [now={now}, expiry={expiry}]"

    @_SETTINGS
    @given(now=_NOW, offset=_OFFSETS)
    def test_needs_restamp_follows_the_cutoff(self, ttl_policy: TTLPolicy, now: datetime, offset: int | None) -> None:
        current = None if offset is None else now + _ms(offset)
        cutoff = ttl_policy.restamp_cutoff(now)
        expected = cutoff is not None and (current is None or current < cutoff)
        assert ttl_policy.needs_restamp(current, now) == expected
        if ttl_policy.needs_restamp(current, now) and current is not None:
            new = ttl_policy.expiry_after_write(now)
            assert new is not None and new > current, f"a re-stamp moved expiry back from {current} to {new}"

    @_SETTINGS
    @given(start=_NOW, steps=_STEPS, read_after=st.integers(min_value=0, max_value=10 * 86_400_000))
    def test_writes_keep_expiry_within_bounds(self, ttl_policy: TTLPolicy, start: datetime, steps: list[int], read_after: int) -> None:
        # a backend's view: one stored expiry, writes at rising times, a dead kind purged on write
        stored: datetime | None = None
        now = start
        for step in steps:
            now += _ms(step)
            if stored is not None and not ttl_policy.is_live(stored, now):
                stored = None
            before = stored
            if ttl_policy.needs_restamp(stored, now):
                stored = ttl_policy.expiry_after_write(now)
            if before is not None and stored is not None:
                assert stored >= before, f"a write moved expiry back from {before} to {stored}"
        read = now + _ms(read_after)
        if not ttl_policy.enabled:
            assert stored is None and ttl_policy.is_live(stored, read), "a disabled policy let a kind expire"
            return
        cutoff, latest = ttl_policy.restamp_cutoff(now), ttl_policy.expiry_after_write(now)
        assert stored is not None and cutoff is not None and latest is not None
        assert cutoff <= stored <= latest, f"expiry {stored} outside [{cutoff}, {latest}] after the last write at {now}"
        assert ttl_policy.is_live(stored, now), "the kind is dead right after a write"

    @_SETTINGS
    @given(now=_NOW, offset=st.integers(min_value=-86_400_000, max_value=86_400_000))
    def test_is_live(self, ttl_policy: TTLPolicy, now: datetime, offset: int) -> None:
        expires_at = now + _ms(offset)
        assert ttl_policy.is_live(expires_at, now) == (expires_at > now)
        assert ttl_policy.is_live(None, now)
