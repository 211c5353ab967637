"""The :class:`~memlab.session.rerankers.SessionReranker` conformance suite.

Subclass :class:`SessionRerankerSuite` in a test module and provide a
``session_reranker`` fixture; the suite calls :meth:`~memlab.session.rerankers.SessionReranker.rerank`
on arbitrary rankings and drives the reranker through a real
:class:`~memlab.session.SessionManager` (a ``memory`` cache, ``bm25`` ranking), checking
only what the base contract promises for every reranker::

    import pytest
    from memlab.testing import SessionRerankerSuite

    class TestMyReranker(SessionRerankerSuite):
        @pytest.fixture
        def session_reranker(self):
            return MyCrossEncoderReranker(model)

The fixture's reranker is shared by every hypothesis example (one instance serves every
session of a manager). Register the module for assertion rewriting in your root
``conftest.py``: ``pytest.register_assert_rewrite("memlab.testing.reranker_suite")``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.models import SessionQAEntry
from memlab.session import SessionManager
from memlab.session.rerankers import SessionReranker
from memlab.session.retrievers import BM25SessionRetriever
from memlab.testing._clock import FakeClock
from memlab.testing.suppliers import supply_backend

__all__ = ["SessionRerankerSuite"]

_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])

# a tiny vocabulary, so turns repeat and overlap (what a diversity or dedup reranker reacts to)
_WORDS = ["apple", "banana", "cherry", "delta", "echo"]
_PHRASES = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=4).map(" ".join)
_TIMES = st.sampled_from(["2024-01-01T00:00:00", "2024-01-02T00:00:00", "2024-03-01T12:00:00"])
_TOP_K = st.integers(min_value=-1, max_value=12)

Hit = tuple[SessionQAEntry, float]


@st.composite
def _rankings(draw: st.DrawFn) -> list[Hit]:
    """A retriever's ranking: distinct turns, scores > 0 best first (some equal)."""
    count = draw(st.integers(min_value=0, max_value=12))
    scores = sorted(draw(st.lists(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.5, 7.0]), min_size=count, max_size=count)), reverse=True)
    hits = []
    for index, score in enumerate(scores):
        entry = SessionQAEntry(time=draw(_TIMES), question=draw(_PHRASES), context="", answer=draw(_PHRASES), qa_id=f"qa-{index}")
        hits.append((entry, score))
    return hits


def _check(result: object, hits: list[Hit], top_k: int) -> None:
    """The shape every rerank result has (module docstring of memlab.session.rerankers._base)."""
    assert isinstance(result, list), f"rerank returned {type(result).__name__}, not a list"
    assert len(result) <= max(top_k, 0), f"{len(result)} hits for top_k={top_k}"
    position = {id(entry): index for index, (entry, _) in enumerate(hits)}
    seen: set[int] = set()
    for pair in result:
        assert isinstance(pair, tuple) and len(pair) == 2, f"a result is {pair!r}, not an (entry, score) pair"
        entry, score = pair
        assert id(entry) in position, f"turn {getattr(entry, 'qa_id', entry)!r} is not one of the turns given (a reranker only reorders)"
        assert id(entry) not in seen, f"turn {entry.qa_id!r} returned twice"
        seen.add(id(entry))
        assert isinstance(score, (int, float)) and score > 0, f"score {score!r} is not a number > 0"
    for (first, a), (second, b) in zip(result, result[1:]):
        assert a >= b, f"scores not best first: {a!r} before {b!r}"
        if a == b:
            assert position[id(first)] < position[id(second)], f"equal scores {a!r} not in the retriever's order"


class SessionRerankerSuite:
    """The :class:`~memlab.session.rerankers.SessionReranker` contract; subclasses provide a ``session_reranker`` fixture."""

    @pytest.fixture
    def session_reranker(self) -> SessionReranker:
        raise NotImplementedError("a SessionRerankerSuite subclass must provide a `session_reranker` fixture")

    def test_name_and_candidates(self, session_reranker: SessionReranker) -> None:
        assert isinstance(session_reranker.name, str) and session_reranker.name, "name must be a non-empty str"
        for top_k in (0, 1, 5, 15, 100):
            wanted = session_reranker.candidates(top_k)
            assert isinstance(wanted, int) and wanted >= max(top_k, 1), f"candidates({top_k}) = {wanted!r} is fewer than top_k"

    @_SETTINGS
    @given(hits=_rankings(), query=_PHRASES, top_k=_TOP_K)
    def test_results_are_given_turns_once_best_first(self, session_reranker: SessionReranker, hits: list[Hit], query: str, top_k: int) -> None:
        _check(asyncio.run(session_reranker.rerank(query, hits, top_k)), hits, top_k)

    @_SETTINGS
    @given(hits=_rankings(), query=_PHRASES, top_k=_TOP_K)
    def test_leaves_its_input_alone_and_answers_alike_twice(self, session_reranker: SessionReranker, hits: list[Hit], query: str,
                                                             top_k: int) -> None:
        before = [(entry.model_dump(), score) for entry, score in hits]
        given_list = list(hits)
        first = asyncio.run(session_reranker.rerank(query, given_list, top_k))
        assert given_list == hits and [(entry.model_dump(), score) for entry, score in hits] == before, "rerank changed its input"
        second = asyncio.run(session_reranker.rerank(query, hits, top_k))
        assert [(e.qa_id, s) for e, s in first] == [(e.qa_id, s) for e, s in second], "the same call gave another answer"

    @pytest.mark.parametrize("top_k", [0, -1], ids=["zero", "negative"])
    def test_nothing_asked_gives_nothing(self, session_reranker: SessionReranker, top_k: int) -> None:
        hits = [(SessionQAEntry(time="2024-01-01T00:00:00", question="apple", context="", answer="banana", qa_id="a"), 1.0)]
        assert asyncio.run(session_reranker.rerank("apple", hits, top_k)) == [], f"top_k={top_k} returned turns"
        assert asyncio.run(session_reranker.rerank("apple", [], 10)) == [], "no candidates returned turns"

    def test_concurrent_calls_do_not_mix(self, session_reranker: SessionReranker) -> None:
        entries = [SessionQAEntry(time=f"2024-01-0{i + 1}T00:00:00", question=" ".join(_WORDS[: i + 1]), context="", answer=_WORDS[i],
                                  qa_id=f"q{i}") for i in range(5)]
        rankings = [[(entry, float(5 - i)) for i, entry in enumerate(entries[: size + 1])] for size in range(5)]

        async def run() -> tuple[list[list[Hit]], list[list[Hit]]]:
            alone = [await session_reranker.rerank("apple cherry", ranking, 3) for ranking in rankings]
            together = await asyncio.gather(*(session_reranker.rerank("apple cherry", ranking, 3) for ranking in rankings))
            return alone, list(together)

        alone, together = asyncio.run(run())
        assert [[e.qa_id for e, _ in r] for r in alone] == [[e.qa_id for e, _ in r] for r in together], "concurrent calls gave other answers"

    async def test_a_manager_reranks_the_callers_session_only(self, session_reranker: SessionReranker, tmp_path: Path) -> None:
        async with supply_backend("memory", tmp_path=tmp_path, clock=FakeClock()) as cache:
            plain = SessionManager(cache, retriever=BM25SessionRetriever())
            reranked = SessionManager(cache, retriever=BM25SessionRetriever(), reranker=session_reranker)
            mine = [await plain.add_qa("u1", f"apple {word}", word, session_id="s1") for word in _WORDS]
            await plain.add_qa("u1", "apple banana", "theirs", session_id="s2")
            await plain.add_qa("u2", "apple banana", "theirs", session_id="s1")
            hits = await reranked.search("u1", "apple banana", session_id="s1", top_k=3)
            candidates = await plain.search("u1", "apple banana", session_id="s1", top_k=session_reranker.candidates(3))
            assert {entry.qa_id for entry, _ in hits} <= {entry.qa_id for entry, _ in candidates} <= set(mine), (
                f"the reranked search returned turns the retriever did not rank for the caller's session: {hits!r}"
            )
            assert len(hits) <= 3
            assert await reranked.search("u1", "zebra", session_id="s1", top_k=3) == [], "nothing matched, yet turns came back"
