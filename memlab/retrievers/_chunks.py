"""CHUNKS and SUMMARIES: the nearest chunks / chunk summaries by vector distance (``1 - cosine``)."""

from __future__ import annotations

from typing import Any, ClassVar

from memlab.exceptions import ValidationError
from memlab.retrievers._base import RetrievalScope, Retriever, SearchResultItem, vector_items
from memlab.retrievers._types import SearchType

__all__ = ["ChunksRetriever", "CollectionRetriever", "SummariesRetriever", "check_request"]


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


class CollectionRetriever(Retriever):
    """The ``top_k`` elements of one vector ``collection`` nearest the query, over every dataset of the scope.

    With ``scope.distinct="data_id"``: the nearest element of each of the ``top_k``
    nearest documents (one long document cannot fill the list).
    """

    collection: ClassVar[str]
    distinct_sources = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        if not check_request(query, scope):
            return []
        return await vector_items(query, scope, self.collection, distinct=scope.distinct)


class ChunksRetriever(CollectionRetriever):
    """``CHUNKS``: the ``top_k`` chunks nearest the query (collection ``chunks``), over every dataset."""

    search_type = SearchType.CHUNKS
    collection = "chunks"


class SummariesRetriever(CollectionRetriever):
    """``SUMMARIES``: the ``top_k`` chunk summaries nearest the query (collection ``summaries``)."""

    search_type = SearchType.SUMMARIES
    collection = "summaries"
