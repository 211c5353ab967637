"""``recency``: a prior for the later of the retriever's top turns.

Score = ``(1 - weight) * relevance + weight * recency``: relevance is the retriever's
score scaled by the best candidate's (``(0, 1]``), recency the turn's place in time among
the candidates (``0`` the oldest, ``1`` the newest, by the turn's stored ``time``; equal
times share a place; one candidate is ``1``). ``weight`` is in ``[0, 1)``, so every score
is > 0; equal scores keep the retriever's order.

What it is for: a user's facts change (a new address, a new job) and the newer statement
is usually the one a question means; a lexical or semantic retriever scores both alike.
"""

from __future__ import annotations

from memlab.exceptions import ValidationError
from memlab.session.rerankers._base import DEFAULT_TOP_N, Hit, SessionReranker

__all__ = ["RECENCY_WEIGHT", "RecencySessionReranker"]

#: the weight of the recency prior by default
RECENCY_WEIGHT = 0.2


class RecencySessionReranker(SessionReranker):
    """``recency``: the retriever's top turns with a prior for the newer ones; score = the blend (module docstring)."""

    name = "recency"

    def __init__(self, *, weight: float = RECENCY_WEIGHT, top_n: int = DEFAULT_TOP_N) -> None:
        super().__init__(top_n=top_n)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight < 1.0:
            raise ValidationError(f"RecencySessionReranker: weight must be a number in [0, 1), got {weight!r}")
        self.weight = float(weight)

    async def _rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        best = max(score for _, score in hits)
        times = sorted({entry.time for entry, _ in hits})
        place = {time: index / (len(times) - 1) if len(times) > 1 else 1.0 for index, time in enumerate(times)}
        scored = [(entry, (1 - self.weight) * score / best + self.weight * place[entry.time]) for entry, score in hits]
        return sorted(scored, key=lambda pair: -pair[1])

    def __repr__(self) -> str:
        return f"RecencySessionReranker(weight={self.weight}, top_n={self.top_n})"
