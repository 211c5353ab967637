"""Triplet completion: answer from the relationship triplets nearest the query by vector only."""

from __future__ import annotations

from memlab.retrievers._base import RetrievalScope, SearchResultItem, vector_items
from memlab.retrievers._completion import AnswerFromContext
from memlab.retrievers._types import SearchType

__all__ = ["TripletCompletionRetriever"]


class TripletCompletionRetriever(AnswerFromContext):
    """``TRIPLET_COMPLETION``: the ``top_k`` nearest ``triplets`` (no graph walk), then one answer call."""

    search_type = SearchType.TRIPLET_COMPLETION
    concurrent_turns = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        return await vector_items(query, scope, "triplets")
