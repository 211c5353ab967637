"""Turn analysis: the deterministic conversational rewrite (and, later, analysis modes).

Importing this package is light (stdlib only).
"""

from __future__ import annotations

# --- Research primitives: pure functions, no I/O (DESIGN.md "Research primitives") ---
from memlab.analysis._rewrite import MAX_QUERY_CHARS, build_conversational_query

_PRIMITIVES = ["MAX_QUERY_CHARS", "build_conversational_query"]
# --- end research primitives ---

__all__ = [*_PRIMITIVES]
