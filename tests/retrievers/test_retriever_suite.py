"""Built-in retrievers against the shipped RetrieverSuite, and proof the suite can fail."""

from __future__ import annotations

import pytest

from memlab.retrievers import (
    ChunksRetriever,
    CompletionRetriever,
    GraphCompletionRetriever,
    HybridCompletionRetriever,
    LexicalChunksRetriever,
    RetrievalScope,
    Retriever,
    SearchResultItem,
    SearchType,
    SummariesRetriever,
    TemporalRetriever,
    TripletCompletionRetriever,
)
from memlab.testing import RetrieverSuite

BUILT_INS = [
    ChunksRetriever,
    SummariesRetriever,
    LexicalChunksRetriever,
    TemporalRetriever,
    CompletionRetriever,
    GraphCompletionRetriever,
    TripletCompletionRetriever,
    HybridCompletionRetriever,
]


class TestBuiltIn(RetrieverSuite):
    @pytest.fixture(params=BUILT_INS, ids=[cls.search_type.value for cls in BUILT_INS])
    def retriever(self, request: pytest.FixtureRequest) -> Retriever:
        return request.param()


class _Repeats(Retriever):
    """Broken on purpose: the same item top_k + 1 times."""

    search_type = SearchType.CHUNKS

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        item = SearchResultItem(id="x", kind="chunk", text=query, score=0.0, dataset_id=scope.dataset_ids[0])
        return [item] * (scope.top_k + 1)


async def test_the_suite_rejects_a_retriever_over_top_k(tmp_path) -> None:
    with pytest.raises(AssertionError):
        await RetrieverSuite().test_context_within_top_k_unique_and_stable(retriever=_Repeats(), tmp_path=tmp_path)
