"""Recall scope: which memory sources a recall reads, and in what order (SPEC §9.1).

Scope names: ``auto``, ``graph``, ``session``, ``trace``, ``session_context``, ``all``,
``session_first``, ``tools``, ``code`` and the deprecated ``graph_context`` (read as
``graph``). ``tools`` and ``code`` are names whose sources memlab does not have: the
caller refuses them (``trace`` reads the session's agent trace steps).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from memlab.exceptions import ValidationError

__all__ = ["SCOPE_NAMES", "normalize_scope", "resolve_sources"]

#: Every name :func:`normalize_scope` accepts.
SCOPE_NAMES = (
    "auto",
    "graph",
    "session",
    "trace",
    "session_context",
    "all",
    "session_first",
    "tools",
    "code",
    "graph_context",
)
#: What ``"all"`` expands to, before ``tools`` / ``session_first`` are appended.
_ALL_SOURCES = ("graph", "session", "trace", "session_context")


def normalize_scope(scope: str | Sequence[str] | None) -> list[str]:
    """The scope as a de-duplicated list of names, in the caller's order.

    ``None`` -> ``["auto"]``. ``graph_context`` becomes ``graph`` and emits a
    ``DeprecationWarning``. ``all`` becomes ``[graph, session, trace, session_context]``,
    followed by ``tools`` and then ``session_first`` when those were also given; every
    other name given with ``all`` (``code`` included) is dropped. Raises
    :class:`~memlab.exceptions.ValidationError` for an unknown name, a non-string entry or
    an empty list.
    """
    if scope is None:
        return ["auto"]
    names = [scope] if isinstance(scope, str) else scope
    if not isinstance(names, Sequence) or not names:
        raise ValidationError(f"scope must be a name or a non-empty list of names, got {scope!r}")
    given: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in SCOPE_NAMES:
            raise ValidationError(f"unknown scope {name!r}; valid scopes: {', '.join(SCOPE_NAMES)}")
        if name == "graph_context":
            warnings.warn("scope 'graph_context' is deprecated; use 'graph'", DeprecationWarning, stacklevel=2)
            name = "graph"
        if name not in given:
            given.append(name)
    if "all" in given:
        return [*_ALL_SOURCES, *(name for name in ("tools", "session_first") if name in given)]
    return given


def resolve_sources(
    scope_list: Sequence[str], *, session_id: str | None, has_datasets: bool, has_query_type: bool
) -> tuple[list[str], bool]:
    """``(sources in run order, short_circuit)`` for a list from :func:`normalize_scope`.

    With ``short_circuit`` the caller stops after the first source that returned anything
    (so a non-empty session skips graph and every later source).

    * ``["auto"]``: with ``session_id`` and neither datasets nor a query type ->
      ``([session, graph], True)``; with ``session_id`` and datasets or a query type ->
      ``([session, graph], False)``; without ``session_id`` -> ``([graph], False)``.
    * ``auto`` next to other names (SPEC-silent): replaced in place by its sources, without
      short-circuit, then de-duplicated.
    * containing ``session_first`` -> ``([session, graph, *rest], True)``, ``rest`` being the
      other names in order.
    * otherwise the names as given, ``False``.
    """
    auto_sources = ["session", "graph"] if session_id is not None else ["graph"]
    if list(scope_list) == ["auto"]:
        return auto_sources, session_id is not None and not has_datasets and not has_query_type
    sources: list[str] = []
    for name in scope_list:
        for source in auto_sources if name == "auto" else [name]:
            if source not in sources:
                sources.append(source)
    if "session_first" in sources:
        rest = [name for name in sources if name not in ("session", "graph", "session_first")]
        return ["session", "graph", *rest], True
    return sources, False
