"""Issue 6 item 7: merge-policy invariants on arbitrary lanes, and build_conversational_query's contract.

Lanes hold dicts with an ``"id"`` drawn from a small alphabet (so lanes overlap and
repeat ids) and anonymous dicts (no identity, each a distinct record). A lane may be
None (failed). The expected values are computed here from the invariants, not from
the policies' code.
"""

from __future__ import annotations

from itertools import count

from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.analysis import MAX_QUERY_CHARS, build_conversational_query
from memlab.merge import DualLaneMerge, RawOnlyMerge, RRFMerge, conversational_reserve

_serial = count()
ITEM = st.one_of(
    st.sampled_from("abcdefghij").map(lambda i: {"id": i, "n": next(_serial)}),
    st.just(None).map(lambda _: {"text": "anonymous", "n": next(_serial)}),
)
LANE = st.one_of(st.none(), st.lists(ITEM, max_size=14))
TOP_K = st.integers(min_value=0, max_value=16)


def key(item: dict) -> object:
    return item["id"] if "id" in item else ("anonymous", item["n"])


def distinct(lane: list[dict] | None) -> list[dict]:
    """The lane's first occurrence of each identity, in order."""
    seen: set[object] = set()
    out = []
    for item in lane or ():
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return out


def keys(items: list[dict]) -> list[object]:
    return [key(item) for item in items]


def check_common(result: list[dict], raw: list[dict] | None, rewrite: list[dict] | None, top_k: int | None) -> None:
    """Invariants every policy keeps: unique identities, original objects, the raw object for shared ids."""
    assert len(set(keys(result))) == len(result), "an identity appears twice"
    if top_k is not None:
        assert len(result) <= top_k
    raw_first = {key(item): item for item in distinct(raw)}
    rewrite_first = {key(item): item for item in distinct(rewrite)}
    for item in result:
        assert item is raw_first.get(key(item)) or (key(item) not in raw_first and item is rewrite_first[key(item)])


@settings(max_examples=400)
@given(st.integers(min_value=0, max_value=10_000))
def test_reserve_is_a_third_above_two(top_k: int) -> None:
    assert conversational_reserve(top_k) == (max(1, top_k // 3) if top_k > 2 else 0)


@settings(max_examples=400)
@given(LANE, LANE, st.one_of(TOP_K, st.none()))
def test_dual_lane_invariants(raw: list[dict] | None, rewrite: list[dict] | None, top_k: int | None) -> None:
    result = DualLaneMerge().merge(raw, rewrite, top_k)
    check_common(result, raw, rewrite, top_k)
    primary, secondary = distinct(raw), distinct(rewrite)
    primary_keys = set(keys(primary))
    shared = [item for item in primary if key(item) in set(keys(secondary))]
    ranked_primary = shared + [item for item in primary if item not in shared]
    secondary_only = [item for item in secondary if key(item) not in primary_keys]
    unique = len(primary) + len(secondary_only)
    assert len(result) == (unique if top_k is None else min(top_k, unique))
    # both lanes, then raw-only, then rewrite-only, each group in its lane's order
    n_primary = sum(key(item) in primary_keys for item in result)
    assert keys(result[:n_primary]) == keys(ranked_primary[:n_primary])
    assert keys(result[n_primary:]) == keys(secondary_only[: len(result) - n_primary])
    # the reserve, capped by what the rewrite lane has
    reserve = min(conversational_reserve(top_k), len(secondary_only))
    assert len(result) - n_primary >= reserve
    if n_primary < len(ranked_primary):  # raw items were left out: rewrite-only items hold only the reserve
        assert len(result) - n_primary == reserve
    if not primary or not secondary:
        assert keys(result) == keys((primary or secondary)[:top_k])


@settings(max_examples=400)
@given(LANE, LANE, st.one_of(TOP_K, st.none()))
def test_rrf_invariants(raw: list[dict] | None, rewrite: list[dict] | None, top_k: int | None) -> None:
    result = RRFMerge().merge(raw, rewrite, top_k)
    check_common(result, raw, rewrite, top_k)
    primary, secondary = distinct(raw), distinct(rewrite)
    unique = len(set(keys(primary)) | set(keys(secondary)))
    assert len(result) == (unique if top_k is None else min(top_k, unique))
    assert result == RRFMerge().merge(raw, rewrite, None)[:top_k]
    # items found by one lane only keep that lane's order
    raw_only = [k for k in keys(result) if k in keys(primary) and k not in keys(secondary)]
    rewrite_only = [k for k in keys(result) if k in keys(secondary) and k not in keys(primary)]
    assert raw_only == [k for k in keys(primary) if k in raw_only]
    assert rewrite_only == [k for k in keys(secondary) if k in rewrite_only]
    if not primary or not secondary:
        assert keys(result) == keys((primary or secondary)[:top_k])


@settings(max_examples=400)
@given(LANE, LANE, st.one_of(TOP_K, st.none()), st.one_of(st.none(), st.integers(-3, 20)))
def test_raw_only_invariants(raw: list[dict] | None, rewrite: list[dict] | None, top_k: int | None, reserve: int | None) -> None:
    result = RawOnlyMerge().merge(raw, rewrite, top_k, reserve)
    check_common(result, raw, rewrite, top_k)
    lane = distinct(rewrite if raw is None else raw)
    assert len(result) == (len(lane) if top_k is None else min(top_k, len(lane)))
    assert result == lane[:top_k]


# --- build_conversational_query -------------------------------------------------------

WHITESPACE = st.sampled_from([" ", "  ", "\n", "\t", " \r\n ", "\u00a0", "\u2003"])
SHORT = st.text(max_size=30)
LONG = st.builds(lambda unit, n: unit * n, st.text(min_size=1, max_size=6), st.integers(0, 900))
TEXT = st.one_of(SHORT, LONG)
TURNS = st.lists(st.tuples(TEXT, TEXT), max_size=4)


def normalize(text: str) -> str:
    return " ".join(text.split())


@settings(max_examples=300)
@given(TEXT, TURNS)
def test_rewrite_contract(raw: str, turns: list[tuple[str, str]]) -> None:
    rewrite = build_conversational_query(raw, turns)
    assert len(rewrite) <= MAX_QUERY_CHARS
    assert build_conversational_query(raw, turns) == rewrite  # deterministic
    current = normalize(raw)
    prior = [(q, a) for q, a in turns[-2:] if normalize(q) or normalize(a)]
    if not prior:
        assert rewrite == current[:MAX_QUERY_CHARS]
    elif len(f"Current user request: {current}") <= MAX_QUERY_CHARS:
        assert rewrite.endswith(f"Current user request: {current}")


@settings(max_examples=300)
@given(TEXT, TURNS, WHITESPACE, WHITESPACE)
def test_rewrite_normalisation_is_idempotent(raw: str, turns: list[tuple[str, str]], left: str, right: str) -> None:
    rewrite = build_conversational_query(raw, turns)
    normalised = build_conversational_query(normalize(raw), [(normalize(q), normalize(a)) for q, a in turns])
    padded = build_conversational_query(left + raw.replace(" ", left) + right, [(right + q, a + left) for q, a in turns])
    assert rewrite == normalised == padded
