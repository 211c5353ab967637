"""CHUNKS and SUMMARIES: the nearest chunks / chunk summaries by vector distance (``1 - cosine``)."""

from __future__ import annotations

from typing import Any

from memlab.exceptions import ValidationError
from memlab.retrievers._base import RetrievalScope, Retriever, SearchResultItem, vector_items
from memlab.retrievers._types import SearchType

__all__ = ["ChunksRetriever", "SummariesRetriever", "check_request"]


def check_request(query: Any, scope: RetrievalScope) -> bool:
    """Validate a ``get_context`` call; False when it can only give ``[]`` (blank query, ``top_k`` 0).

    Raises :class:`~memlab.exceptions.ValidationError` naming the value when
    ``query`` is not a ``str`` or ``scope.top_k`` is not an ``int >= 0``.
    """
    if not isinstance(query, str):
        raise ValidationError(f"query must be a str, got {query!r}")
    top_k = scope.top_k
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValidationError(f"top_k must be an int >= 0, got {top_k!r}")
    return bool(query.strip()) and top_k > 0


class ChunksRetriever(Retriever):
    """``CHUNKS``: the ``top_k`` chunks nearest the query (collection ``chunks``), over every dataset."""

    search_type = SearchType.CHUNKS

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        if not check_request(query, scope):
            return []
        return await vector_items(query, scope, "chunks")


class SummariesRetriever(Retriever):
    """``SUMMARIES``: the ``top_k`` chunk summaries nearest the query (collection ``summaries``)."""

    search_type = SearchType.SUMMARIES

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        if not check_request(query, scope):
            return []
        return await vector_items(query, scope, "summaries")
