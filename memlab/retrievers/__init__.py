"""Retrieval layer: search types, query routing, the skill gate and recall scope.

Importing this package is light (stdlib only).
"""

from __future__ import annotations

# --- Research primitives: pure functions, no I/O (DESIGN.md "Research primitives") ---
from memlab.retrievers._routing import RouteDecision, route_query
from memlab.retrievers._types import SearchType, parse_search_type

_PRIMITIVES = [
    "RouteDecision",
    "SearchType",
    "parse_search_type",
    "route_query",
]
# --- end research primitives ---

__all__ = [*_PRIMITIVES]
