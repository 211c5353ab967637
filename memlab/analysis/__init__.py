"""Turn analysis: the analysis modes, the turn analyzer and the deterministic conversational rewrite.

:class:`AnalysisMode` strategies (``concurrent`` / ``sequential`` / ``off``, built by
``memlab.config.build_analysis_mode``) sequence one session turn; :func:`analyze_turn`
makes its one structured call (:class:`SessionTurnAnalysis`).
"""

from __future__ import annotations

# --- Research primitives: pure functions, no I/O (DESIGN.md "Research primitives") ---
from memlab.analysis._rewrite import MAX_QUERY_CHARS, build_conversational_query

_PRIMITIVES = ["MAX_QUERY_CHARS", "build_conversational_query"]
# --- end research primitives ---

from memlab.analysis._analyzer import (  # noqa: E402
    ContextUpdate,
    ServedContextRating,
    SessionTurnAnalysis,
    TurnAnalysisResult,
    analyze_turn,
    coerce_rating_or_none,
    offline_turn_analysis,
)
from memlab.analysis._base import ACK, AnalysisMode, TurnPort, TurnState, should_answer_turn  # noqa: E402
from memlab.analysis._concurrent import ConcurrentMode  # noqa: E402
from memlab.analysis._off import OffMode  # noqa: E402
from memlab.analysis._sequential import SequentialMode  # noqa: E402

__all__ = [
    *_PRIMITIVES,
    "ACK",
    "AnalysisMode",
    "ConcurrentMode",
    "ContextUpdate",
    "OffMode",
    "SequentialMode",
    "ServedContextRating",
    "SessionTurnAnalysis",
    "TurnAnalysisResult",
    "TurnPort",
    "TurnState",
    "analyze_turn",
    "coerce_rating_or_none",
    "offline_turn_analysis",
    "should_answer_turn",
]
