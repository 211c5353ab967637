"""Merge policies against SPEC §6.5: reserve sizes, rank order, identity rules, failed lanes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import memlab.merge
from memlab.exceptions import ValidationError
from memlab.merge import DualLaneMerge, MergePolicy, RawOnlyMerge, RRFMerge, conversational_reserve, identity

POLICIES = [DualLaneMerge(), RawOnlyMerge(), RRFMerge()]


def items(ids: str, lane: str = "") -> list[dict]:
    """One dict per character of ``ids``; ``lane`` tags the object so tests can tell copies apart."""
    return [{"id": i, "lane": lane} for i in ids]


def ids(result: list) -> str:
    return "".join(str(item["id"]) for item in result)


def test_exports() -> None:
    assert sorted(memlab.merge.__all__) == [
        "DualLaneMerge", "MergePolicy", "RRFMerge", "RawOnlyMerge", "conversational_reserve", "identity",
    ]  # fmt: skip
    assert all(isinstance(policy, MergePolicy) for policy in POLICIES)


# --- conversational_reserve ---------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "reserve"),
    [(None, 0), (0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 1), (6, 2), (8, 2), (9, 3), (15, 5), (100, 33)],
)
def test_conversational_reserve(limit: int | None, reserve: int) -> None:
    assert conversational_reserve(limit) == reserve


# --- identity -------------------------------------------------------------------------


def test_identity_of_ids_is_the_stripped_string() -> None:
    assert identity({"id": " a1 "}) == "a1"
    assert identity(SimpleNamespace(id=7)) == identity({"id": "7"}) == "7"


@pytest.mark.parametrize("item", [{}, {"id": None}, {"id": "  "}, SimpleNamespace(), SimpleNamespace(id=""), "text", 3])
def test_items_without_identity(item: object) -> None:
    assert identity(item) is None


def test_identity_of_edges() -> None:
    assert identity({"edge_id": " e1 ", "id": "x"}) == ("edge", "e1")
    assert identity(SimpleNamespace(edge_id="e1")) == ("edge", "e1")
    triple = {"source": "a", "relationship": "knows", "target": "b"}
    assert identity(triple) == ("graph", "a", "knows", "b", True)
    assert identity({**triple, "directed": False}) == ("graph", "a", "knows", "b", False)
    assert identity(SimpleNamespace(source="a", relationship="knows", target="b", directed=None)) == identity(triple)
    # a blank edge id falls through to the endpoints, an incomplete triple to the id
    assert identity({**triple, "edge_id": " "}) == identity(triple)
    assert identity({"source": "a", "target": "b", "id": "n1"}) == "n1"
    # an edge identity never equals an id identity
    assert identity({"edge_id": "e1"}) != identity({"id": "e1"})


def test_edges_merge_by_edge_identity() -> None:
    raw = [{"source": "a", "relationship": "r", "target": "b", "lane": "raw"}, {"edge_id": "e1", "lane": "raw"}]
    rewrite = [{"edge_id": "e1", "lane": "rw"}, {"source": "a", "relationship": "r", "target": "b", "directed": False}]
    merged = DualLaneMerge().merge(raw, rewrite, None)
    assert merged == [raw[1], raw[0], rewrite[1]]  # e1 in both lanes, the undirected edge is rewrite-only


# --- dual_lane ------------------------------------------------------------------------


def test_dual_lane_rank_order_and_reserve() -> None:
    raw, rewrite = items("abcdef", "raw"), items("xcyz", "rw")
    # limit 6 -> reserve 2: both (c), raw-only by raw rank, then two rewrite-only
    assert ids(DualLaneMerge().merge(raw, rewrite, 6)) == "cabdxy"
    assert ids(DualLaneMerge().merge(raw, rewrite, 3)) == "cax"
    assert ids(DualLaneMerge().merge(raw, rewrite, 2)) == "ca"  # no reserve at limit <= 2
    assert ids(DualLaneMerge().merge(raw, rewrite, None)) == "cabdefxyz"


def test_dual_lane_explicit_reserve_is_clamped() -> None:
    raw, rewrite = items("abcd"), items("xyz")
    assert ids(DualLaneMerge().merge(raw, rewrite, 4, reserve=0)) == "abcd"
    assert ids(DualLaneMerge().merge(raw, rewrite, 4, reserve=-3)) == "abcd"
    assert ids(DualLaneMerge().merge(raw, rewrite, 4, reserve=2)) == "abxy"
    assert ids(DualLaneMerge().merge(raw, rewrite, 2, reserve=9)) == "xy"


def test_dual_lane_tops_up_from_either_lane() -> None:
    # fewer rewrite-only items than the reserve: the raw lane fills the slots
    assert ids(DualLaneMerge().merge(items("abcdefgh"), items("ax"), 9)) == "abcdefghx"
    assert ids(DualLaneMerge().merge(items("abcdefgh"), items("ax"), 6)) == "abcdex"
    # a short raw lane: more rewrite-only items than reserved
    assert ids(DualLaneMerge().merge(items("ab"), items("wxyz"), 6)) == "abwxyz"


def test_dual_lane_keeps_the_raw_object_and_first_occurrences() -> None:
    raw = [{"id": "a", "lane": "raw"}, {"id": "b", "lane": "raw"}, {"id": "a", "lane": "raw-dup"}]
    rewrite = [{"id": "b", "lane": "rw"}, {"id": "c", "lane": "rw"}, {"id": "c", "lane": "rw-dup"}]
    merged = DualLaneMerge().merge(raw, rewrite, None)
    assert merged == [raw[1], raw[0], rewrite[1]]
    assert all(result is original for result, original in zip(merged, [raw[1], raw[0], rewrite[1]], strict=True))


def test_dual_lane_never_merges_items_without_identity() -> None:
    anonymous = {"text": "no id"}
    merged = DualLaneMerge().merge([anonymous, {"id": "a"}], [anonymous, {"id": ""}], None)
    assert merged == [anonymous, {"id": "a"}, anonymous, {"id": ""}]
    assert len(DualLaneMerge().merge([anonymous, anonymous], [], None)) == 2


@pytest.mark.parametrize("failed", [None, []])
def test_dual_lane_failed_or_empty_lane_leaves_the_other(failed: list | None) -> None:
    lane = items("abcaxyz")
    assert ids(DualLaneMerge().merge(failed, lane, 4)) == "abcx"
    assert ids(DualLaneMerge().merge(lane, failed, 4)) == "abcx"
    assert DualLaneMerge().merge(None, None, 4) == []


def test_dual_lane_limit_zero() -> None:
    assert DualLaneMerge().merge(items("ab"), items("cd"), 0) == []


def test_merge_accepts_objects_and_tuples() -> None:
    a, b, b2 = SimpleNamespace(id="a"), SimpleNamespace(id="b"), SimpleNamespace(id="b")
    assert DualLaneMerge().merge((a, b), (b2,), 5) == [b, a]


# --- raw_only -------------------------------------------------------------------------


def test_raw_only() -> None:
    raw, rewrite = items("abca"), items("xyz")
    assert ids(RawOnlyMerge().merge(raw, rewrite, 2)) == "ab"
    assert ids(RawOnlyMerge().merge(raw, rewrite, None, reserve=3)) == "abc"
    assert ids(RawOnlyMerge().merge(None, rewrite, 2)) == "xy"
    assert RawOnlyMerge().merge([], rewrite, 2) == []  # an empty raw lane is an answer, not a failure


# --- rrf ------------------------------------------------------------------------------


def test_rrf_fuses_ranks() -> None:
    raw, rewrite = items("abcd", "raw"), items("dcx", "rw")
    # d: 1/64 + 1/61 > c: 1/63 + 1/62 > a: 1/61 > b: 1/62 > x: 1/63
    merged = RRFMerge().merge(raw, rewrite, None)
    assert ids(merged) == "dcabx"
    assert merged[0] is raw[3] and merged[1] is raw[2]
    assert ids(RRFMerge().merge(raw, rewrite, 3, reserve=3)) == "dca"


def test_rrf_ties_go_to_raw_rank() -> None:
    assert ids(RRFMerge().merge(items("ab"), items("xy"), None)) == "axby"
    assert ids(RRFMerge(k=0).merge(items("ab"), items("ba"), None)) == "ab"


def test_rrf_keeps_items_without_identity_apart() -> None:
    anonymous = {"text": "no id"}
    assert RRFMerge().merge([anonymous], [anonymous], None) == [anonymous, anonymous]


@pytest.mark.parametrize("failed", [None, []])
def test_rrf_failed_lane_leaves_the_other(failed: list | None) -> None:
    assert ids(RRFMerge().merge(failed, items("abca"), 2)) == "ab"
    assert ids(RRFMerge().merge(items("abca"), failed, None)) == "abc"


@pytest.mark.parametrize("k", [-1, True, "60", float("nan"), float("inf")])
def test_rrf_rejects_bad_k(k: object) -> None:
    with pytest.raises(ValidationError, match="k must"):
        RRFMerge(k=k)


# --- bad arguments --------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((items("a"), [], -1), "limit must be >= 0, got -1"),
        ((items("a"), [], 2.0), "limit must be an int or None, got 2.0"),
        ((items("a"), [], True), "limit must be an int or None, got True"),
        (("abc", [], 2), "raw must be a sequence of items or None, got 'abc'"),
        ((items("a"), iter([]), 2), "rewrite must be a sequence of items or None"),
        ((items("a"), {"id": "x"}, 2), "rewrite must be a sequence"),
        ((items("a"), [], 2, "1"), "reserve must be an int or None, got '1'"),
    ],
)
def test_bad_arguments(policy: MergePolicy, args: tuple, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        policy.merge(*args)
    assert message in str(raised.value)
