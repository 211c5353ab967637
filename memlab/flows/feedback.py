"""Feedback that moves retrieval: rated turns re-weight the graph elements they used (cognee's feedback weights).

Applying (:meth:`FeedbackWeights.apply`, run by ``improve()`` and background
self-improvement when ``recall.feedback_influence`` is above 0, as upstream): each turn
of the session rated 1-5 whose ``memify_metadata.feedback_weights_applied`` is not True
and that used graph elements moves each element's weight ``w`` (0.5 when never rated)
to ``round(clip(w + alpha * (r - w), 0, 1), 4)`` with ``r = (score - 1) / 4`` and
``alpha`` = ``session.feedback_alpha``; the turn is then marked applied (with the score
it applied). ``add_feedback`` resets the mark, so a re-rated turn moves them again.

Ranking (:func:`memlab.retrievers.feedback_blend`, applied to graph completion's
triplets): with influence ``f`` > 0, a triplet's distance ``d`` (0 best) becomes
``2 * ((1 - f) * d / 2 + f * (1 - w))``, ``w`` the mean weight of its nodes and edge
(``NEUTRAL_WEIGHT`` for one never rated); at ``f = 0`` nothing changes and no weight is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memlab.retrievers import NEUTRAL_WEIGHT

__all__ = ["APPLIED_FLAG", "FeedbackApplied", "FeedbackWeights", "moved"]

APPLIED_FLAG = "feedback_weights_applied"


def moved(weight: float, score: int, alpha: float) -> float:
    """``weight`` after one turn rated ``score`` (1-5) at learning rate ``alpha``."""
    target = (score - 1) / 4
    return round(min(1.0, max(0.0, weight + alpha * (target - weight))), 4)


@dataclass(frozen=True)
class FeedbackApplied:
    """What one :meth:`FeedbackWeights.apply` did: rated turns applied, elements moved."""

    turns: int = 0
    elements: int = 0


class FeedbackWeights:
    """Applies a session's ratings to the weights ``store`` keeps (a :class:`~memlab.relational.FeedbackWeightRepository`)."""

    def __init__(self, sessions: Any, store: Any, *, alpha: float) -> None:
        self.sessions = sessions
        self.store = store
        self.alpha = alpha

    async def apply(self, user_id: Any, session_id: str) -> FeedbackApplied:
        """Apply the session's rated turns not applied yet (module docstring)."""
        entries = await self.sessions.get_session(user_id, session_id=session_id)
        pending = [entry for entry in entries if _eligible(entry)]
        if not pending:
            return FeedbackApplied()
        ids = {element for entry in pending for element in _elements(entry)}
        weights = await self.store.weights(ids)
        changed: dict[str, float] = {}
        for entry in pending:  # oldest first: each turn moves what the earlier ones left
            for element in _elements(entry):
                current = changed.get(element, weights.get(element, NEUTRAL_WEIGHT))
                changed[element] = moved(current, int(entry.feedback_score), self.alpha)
        await self.store.set_weights(changed)
        for entry in pending:
            await self.sessions.update_qa(
                user_id, entry.qa_id, session_id=session_id,
                memify_metadata={APPLIED_FLAG: True, "feedback_weights_applied_score": int(entry.feedback_score)},
            )
        return FeedbackApplied(len(pending), len(changed))


def _eligible(entry: Any) -> bool:
    score = entry.feedback_score
    meta = entry.memify_metadata or {}
    return isinstance(score, int) and 1 <= score <= 5 and meta.get(APPLIED_FLAG) is not True and bool(_elements(entry))


def _elements(entry: Any) -> list[str]:
    used = entry.used_graph_element_ids or {}
    return list(dict.fromkeys([*used.get("node_ids", []), *used.get("edge_ids", [])]))
