"""Every built-in session reranker, and a toy one standing in for a user's cross-encoder, against the shipped SessionRerankerSuite; proof the suite can fail."""

from __future__ import annotations

import pytest

from memlab.session.rerankers import MMRSessionReranker, SessionReranker
from memlab.testing import SessionRerankerSuite, check


class TestMMR(SessionRerankerSuite):
    @pytest.fixture
    def session_reranker(self) -> SessionReranker:
        return MMRSessionReranker()


class TestMMRAllDiversity(SessionRerankerSuite):
    @pytest.fixture
    def session_reranker(self) -> SessionReranker:
        return MMRSessionReranker(diversity=1.0, top_n=3)


class ShortestFirst(SessionReranker):
    """A toy model-backed reranker (what a cross-encoder subclass looks like): scores 1 / (1 + answer length), drops empty answers."""

    name = "shortest_first"

    async def _rerank(self, query, hits):
        scored = [(entry, 1.0 / (1 + len(entry.answer))) for entry, _ in hits if entry.answer]
        return sorted(scored, key=lambda pair: -pair[1])


class TestToyReranker(SessionRerankerSuite):
    @pytest.fixture
    def session_reranker(self) -> SessionReranker:
        return ShortestFirst(top_n=5)


class _Inventor(SessionReranker):
    """Broken on purpose: returns a turn it was not given, with a score of 0."""

    name = "inventor"

    async def _rerank(self, query, hits):
        from memlab.models import SessionQAEntry

        return [(SessionQAEntry(time="", question="made up", context="", answer="", qa_id="new"), 0.0), *hits]


class _Reversed(SessionReranker):
    """Broken on purpose: the retriever's order reversed, with its scores (not best first)."""

    name = "reversed"

    async def _rerank(self, query, hits):
        return list(reversed(hits))


def test_check_runs_the_reranker_suite_and_it_can_fail() -> None:
    assert check(MMRSessionReranker()).ok and check(ShortestFirst()).suite == "SessionRerankerSuite"
    inventor = check(_Inventor())
    assert "test_results_are_given_turns_once_best_first" in inventor.failed
    assert "test_results_are_given_turns_once_best_first" in check(_Reversed()).failed


def test_the_suite_names_what_is_wrong() -> None:
    with pytest.raises(AssertionError, match="not one of the turns given"):
        _assert_shape(_Inventor())
    with pytest.raises(AssertionError, match="not best first"):
        _assert_shape(_Reversed())


def _assert_shape(reranker: SessionReranker) -> None:
    """The suite's result check on one fixed ranking of three turns."""
    import asyncio

    from memlab.models import SessionQAEntry
    from memlab.testing.reranker_suite import _check

    hits = [(SessionQAEntry(time="", question=f"q{i}", context="", answer="a", qa_id=f"q{i}"), float(3 - i)) for i in range(3)]
    _check(asyncio.run(reranker.rerank("q", hits, 5)), hits, 5)
