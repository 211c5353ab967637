"""normalize_scope / resolve_sources: recall scope to ordered sources (SPEC §9.1)."""

from __future__ import annotations

import pytest

from memlab.exceptions import ValidationError
from memlab.retrievers import normalize_scope, resolve_sources

ALL = ["graph", "session", "trace", "session_context"]
VALID = ["auto", "graph", "session", "trace", "session_context", "all", "session_first", "tools", "code", "graph_context"]

# --- normalize_scope --------------------------------------------------------------------------


def test_none_is_auto() -> None:
    assert normalize_scope(None) == ["auto"]


@pytest.mark.parametrize("name", [name for name in VALID if name not in ("all", "graph_context")])
def test_a_single_name_as_str_or_list(name: str) -> None:
    assert normalize_scope(name) == [name]
    assert normalize_scope([name]) == [name]


def test_order_preserving_dedup() -> None:
    assert normalize_scope(["session", "graph", "session", "trace", "graph"]) == ["session", "graph", "trace"]
    assert normalize_scope(("tools", "code")) == ["tools", "code"]


def test_graph_context_is_deprecated_graph() -> None:
    with pytest.warns(DeprecationWarning, match="graph_context") as record:
        assert normalize_scope("graph_context") == ["graph"]
    assert record[0].filename == __file__  # stacklevel=2: the warning points at the caller
    with pytest.warns(DeprecationWarning):
        assert normalize_scope(["graph", "session", "graph_context"]) == ["graph", "session"]


def test_all_expands() -> None:
    assert normalize_scope("all") == ALL
    assert normalize_scope(["all"]) == ALL


def test_all_keeps_tools_then_session_first_and_drops_everything_else() -> None:
    assert normalize_scope(["all", "tools"]) == [*ALL, "tools"]
    assert normalize_scope(["session_first", "all"]) == [*ALL, "session_first"]
    assert normalize_scope(["session_first", "tools", "all"]) == [*ALL, "tools", "session_first"]
    assert normalize_scope(["all", "code"]) == ALL
    assert normalize_scope(["trace", "all", "code", "auto", "graph"]) == ALL


@pytest.mark.parametrize("scope", ["everything", "Graph", "", ["graph", "nope"], ["graph", 3]])
def test_unknown_name_is_named_with_the_valid_ones(scope: object) -> None:
    with pytest.raises(ValidationError) as raised:
        normalize_scope(scope)  # type: ignore[arg-type]
    message = str(raised.value)
    bad = scope if isinstance(scope, str) else scope[1]  # type: ignore[index]
    assert repr(bad) in message
    assert all(name in message for name in VALID)


@pytest.mark.parametrize("scope", [[], (), 5, {"graph"}])
def test_empty_list_or_non_sequence_is_rejected(scope: object) -> None:
    with pytest.raises(ValidationError, match="non-empty list"):
        normalize_scope(scope)  # type: ignore[arg-type]


# --- resolve_sources --------------------------------------------------------------------------


def resolve(scope: list[str], session_id: str | None = None, datasets: bool = False, query_type: bool = False):
    return resolve_sources(scope, session_id=session_id, has_datasets=datasets, has_query_type=query_type)


def test_auto_with_session_only_short_circuits() -> None:
    assert resolve(["auto"], session_id="s1") == (["session", "graph"], True)


@pytest.mark.parametrize(("datasets", "query_type"), [(True, False), (False, True), (True, True)])
def test_auto_with_session_and_datasets_or_query_type_runs_both(datasets: bool, query_type: bool) -> None:
    assert resolve(["auto"], session_id="s1", datasets=datasets, query_type=query_type) == (["session", "graph"], False)


@pytest.mark.parametrize(("datasets", "query_type"), [(False, False), (True, False), (False, True)])
def test_auto_without_session_is_graph_only(datasets: bool, query_type: bool) -> None:
    assert resolve(["auto"], datasets=datasets, query_type=query_type) == (["graph"], False)


def test_session_first_puts_session_and_graph_first_and_short_circuits() -> None:
    assert resolve(["session_first"]) == (["session", "graph"], True)
    assert resolve(["trace", "graph", "session_first", "tools", "session"]) == (["session", "graph", "trace", "tools"], True)
    assert resolve(normalize_scope(["all", "session_first"]), session_id="s1", datasets=True) == (
        ["session", "graph", "trace", "session_context"],
        True,
    )


def test_explicit_scope_is_kept_as_given() -> None:
    assert resolve(["trace", "graph"], session_id="s1") == (["trace", "graph"], False)
    assert resolve(normalize_scope("all")) == (ALL, False)
    assert resolve(["tools", "code"]) == (["tools", "code"], False)


def test_auto_among_other_names_expands_in_place_without_short_circuit() -> None:
    assert resolve(["trace", "auto"]) == (["trace", "graph"], False)
    assert resolve(["auto", "graph", "trace"], session_id="s1") == (["session", "graph", "trace"], False)
    assert resolve(["auto", "session_first", "tools"], session_id="s1") == (["session", "graph", "tools"], True)
