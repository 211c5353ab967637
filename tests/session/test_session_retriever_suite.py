"""Every built-in session retriever against the shipped SessionRetrieverSuite, and proof the suite can fail."""

from __future__ import annotations

from typing import Any

import pytest

from memlab.embeddings import HashingEmbedder
from memlab.models import SessionQAEntry
from memlab.session.retrievers import (
    HYBRID_V1,
    BM25SessionRetriever,
    HybridSessionRetriever,
    KeywordIndex,
    KeywordSessionRetriever,
    SessionRetriever,
    VectorSessionRetriever,
)
from memlab.testing import SessionRetrieverSuite


class TestKeyword(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return KeywordSessionRetriever()


class TestBM25(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return BM25SessionRetriever()


class TestVector(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return VectorSessionRetriever(HashingEmbedder())


class TestHybridBlend(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return HybridSessionRetriever(HashingEmbedder())


class TestHybridV1(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return HybridSessionRetriever(HashingEmbedder(), **HYBRID_V1)  # one vector, the lanes' candidates


class TestHybridUserTurnAll(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return HybridSessionRetriever(HashingEmbedder(), vectors="user+turn", candidates="all")  # two vectors a turn, every turn ranked


class TestHybridRRF(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return HybridSessionRetriever(HashingEmbedder(), fusion="rrf", vectors="user+turn", candidates="all")


class TestHybridRRFLanes(SessionRetrieverSuite):
    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        return HybridSessionRetriever(HashingEmbedder(), fusion="rrf", vectors="turn", candidates="lanes")


class _NewestFirst(SessionRetriever[KeywordIndex]):
    """Broken on purpose: every turn, newest first, score 1 (ties not oldest first, no-match not empty)."""

    name = "newest_first"

    def new_index(self) -> KeywordIndex:
        return KeywordIndex()

    async def search(self, index: KeywordIndex, query: str, top_k: int) -> list[tuple[SessionQAEntry, float]]:
        return [(entry, 1.0) for entry in reversed(index.entries)][: max(top_k, 0)]


def test_the_suite_rejects_ties_newest_first() -> None:
    with pytest.raises(AssertionError):
        SessionRetrieverSuite().test_duplicate_turns_tie_oldest_first(session_retriever=_NewestFirst())


def test_the_suite_rejects_a_match_on_nothing() -> None:
    with pytest.raises(AssertionError):
        SessionRetrieverSuite().test_no_match_gives_nothing(session_retriever=_NewestFirst())
