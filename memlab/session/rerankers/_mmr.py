"""``mmr``: maximal marginal relevance over the retriever's top turns (Carbonell and Goldstein, 1998).

Turns are picked one at a time, each the candidate with the highest

    (1 - diversity) * relevance - diversity * max similarity to the turns already picked

where relevance is the retriever's score scaled by the best candidate's (so in ``(0, 1]``)
and similarity the Jaccard overlap of two turns' tokens (:func:`memlab.session.retrievers.entry_tokens`:
question, context and answer). ``diversity = 0`` keeps the retriever's order; ties go to
the candidate the retriever ranked higher. The score of the turn picked ``r``-th is
``1 / r``: the order is the ranking (an MMR value need not fall along it).

What it is for: a session repeats itself (small talk, the same question asked twice, a
topic revisited), and near-duplicate turns can fill the top k between them, crowding out
the second session an aggregation or update question needs.
"""

from __future__ import annotations

from memlab.exceptions import ValidationError
from memlab.session.rerankers._base import DEFAULT_TOP_N, Hit, SessionReranker
from memlab.session.retrievers import entry_tokens

__all__ = ["MMR_DIVERSITY", "MMRSessionReranker", "jaccard"]

#: the weight of the redundancy penalty by default
MMR_DIVERSITY = 0.3


def jaccard(first: set[str], second: set[str]) -> float:
    """``|first & second| / |first | second|``; 0.0 when both are empty."""
    union = len(first | second)
    return len(first & second) / union if union else 0.0


class MMRSessionReranker(SessionReranker):
    """``mmr``: the retriever's top turns reordered by maximal marginal relevance; score ``1 / rank``."""

    name = "mmr"

    def __init__(self, *, diversity: float = MMR_DIVERSITY, top_n: int = DEFAULT_TOP_N) -> None:
        super().__init__(top_n=top_n)
        if isinstance(diversity, bool) or not isinstance(diversity, (int, float)) or not 0.0 <= diversity <= 1.0:
            raise ValidationError(f"MMRSessionReranker: diversity must be a number in [0, 1], got {diversity!r}")
        self.diversity = float(diversity)

    async def _rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        best = max(score for _, score in hits)
        relevance = [score / best for _, score in hits]
        tokens = [entry_tokens(entry) for entry, _ in hits]
        closest = [0.0] * len(hits)
        left = list(range(len(hits)))
        picked: list[int] = []
        while left:
            pick = max(left, key=lambda i: ((1 - self.diversity) * relevance[i] - self.diversity * closest[i], -i))
            picked.append(pick)
            left.remove(pick)
            for i in left:
                closest[i] = max(closest[i], jaccard(tokens[i], tokens[pick]))
        return [(hits[i][0], 1.0 / rank) for rank, i in enumerate(picked, start=1)]

    def __repr__(self) -> str:
        return f"MMRSessionReranker(diversity={self.diversity}, top_n={self.top_n})"
