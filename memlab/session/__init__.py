"""Session layer: :class:`SessionManager`, the session retrievers, the keyword tokenizer, :func:`traced` (agent trace
steps), and the module-level session API.

``memlab.session.get_session / add_feedback / delete_feedback / distill_session / add_trace / get_traces``
act on the default stack (built from the environment), like cognee's ``cognee.session.*``. They live with
the rest of the module-level API in :mod:`memlab._default` and load on first access, so the session layer
never imports the stack that is built on it.
"""

from __future__ import annotations

from memlab._imports import lazy_getattr
from memlab.session._api import SessionAPI
from memlab.session._guidance import AppliedGuidance, Guidance, ServedGuidance, context_entries
from memlab.session.retrievers import (
    BM25SessionRetriever,
    HybridSessionRetriever,
    KeywordIndex,
    KeywordSessionRetriever,
    SessionRetriever,
    VectorSessionRetriever,
    matched_tokens,
)
from memlab.text import session_tokens as tokenize
from memlab.session._manager import HISTORY_LAST_N, SessionManager, trace_entries
from memlab.session._traced import TraceStep, Tracer, traced

__all__ = [
    "AppliedGuidance",
    "BM25SessionRetriever",
    "Guidance",
    "HISTORY_LAST_N",
    "HybridSessionRetriever",
    "KeywordIndex",
    "KeywordSessionRetriever",
    "ServedGuidance",
    "SessionAPI",
    "SessionManager",
    "SessionRetriever",
    "TraceStep",
    "Tracer",
    "VectorSessionRetriever",
    "context_entries",
    "add_feedback",
    "add_trace",
    "delete_feedback",
    "distill_session",
    "get_session",
    "get_traces",
    "matched_tokens",
    "tokenize",
    "trace_entries",
    "traced",
]

_LAZY = {
    name: "memlab._default" for name in ("add_feedback", "add_trace", "delete_feedback", "distill_session", "get_session", "get_traces")
}

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
