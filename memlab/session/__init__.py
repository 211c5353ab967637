"""Session layer: :class:`SessionManager`, the session retrievers, the keyword tokenizer, and the module-level session API.

``memlab.session.get_session / add_feedback / delete_feedback / distill_session`` act on the default
stack (built from the environment), like cognee's ``cognee.session.*``.
"""

from __future__ import annotations

from typing import Any

from memlab.models import DistillResult, SessionQAEntry
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
from memlab.session._manager import HISTORY_LAST_N, SessionManager

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
    "VectorSessionRetriever",
    "context_entries",
    "add_feedback",
    "delete_feedback",
    "distill_session",
    "get_session",
    "matched_tokens",
    "tokenize",
]


async def get_session(session_id: str | None = None, last_n: int | None = None, user: Any = None) -> list[SessionQAEntry]:
    """``stack.session.get_session`` on the default stack."""
    from memlab._default import default_stack

    return await (await default_stack()).session.get_session(session_id=session_id, last_n=last_n, user=user)


async def add_feedback(
    session_id: str | None, qa_id: str, feedback_text: str | None = None, feedback_score: int | None = None, user: Any = None
) -> bool:
    """``stack.session.add_feedback`` on the default stack."""
    from memlab._default import default_stack

    return await (await default_stack()).session.add_feedback(session_id, qa_id, feedback_text, feedback_score, user)


async def delete_feedback(session_id: str | None, qa_id: str, user: Any = None) -> bool:
    """``stack.session.delete_feedback`` on the default stack."""
    from memlab._default import default_stack

    return await (await default_stack()).session.delete_feedback(session_id, qa_id, user)


async def distill_session(session_id: str, dataset: Any = None, user: Any = None, max_batches: int | None = None) -> DistillResult:
    """``stack.session.distill_session`` on the default stack."""
    from memlab._default import default_stack

    return await (await default_stack()).session.distill_session(session_id, dataset, user, max_batches)
