"""The :class:`~memlab.session.SessionRetriever` conformance suite.

Subclass :class:`SessionRetrieverSuite` in a test module and provide a
``session_retriever`` fixture; the suite drives it through a real
:class:`~memlab.session.SessionManager` (a ``memory`` cache, and two ``sqlite``
handles on one file for another process's writes) and checks only what the
base contract promises for every retriever::

    import pytest
    from memlab.testing import SessionRetrieverSuite

    class TestMyRetriever(SessionRetrieverSuite):
        @pytest.fixture
        def session_retriever(self):
            return MyRetriever()

The fixture's retriever is shared by every hypothesis example (one instance serves
every session of a manager, as the contract says). Register the module for assertion
rewriting in your root ``conftest.py``:
``pytest.register_assert_rewrite("memlab.testing.session_suite")``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.models import SessionQAEntry
from memlab.session import SessionManager
from memlab.session.retrievers import SessionIndex, SessionRetriever
from memlab.testing._clock import FakeClock
from memlab.testing.suppliers import supply_backend

__all__ = ["SessionRetrieverSuite"]

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])

U, U2 = "u1", "u2"
S, S2 = "s1", "s2"

# a tiny vocabulary, so turns repeat (equal scores) and share words with the query
_WORDS = ["apple", "banana", "cherry", "delta", "echo"]
# words no turn uses: a query of these matches nothing
_OTHER_WORDS = ["zebra", "quartz", "violin", "glacier"]
_PHRASES = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join)
_TURNS = st.lists(st.tuples(_PHRASES, _PHRASES), max_size=8)
_TOP_K = st.integers(min_value=-1, max_value=10)

Hit = tuple[SessionQAEntry, float]


async def _write(manager: SessionManager, user: str, session: str, turns: list[tuple[str, str]]) -> list[str]:
    ids = []
    for question, answer in turns:
        qa_id = await manager.add_qa(user, question, answer, session_id=session)
        assert qa_id is not None
        ids.append(qa_id)
    return ids


async def _search_one_session(retriever: SessionRetriever[Any], turns: list[tuple[str, str]], query: str, top_k: int,
                              *, others: list[tuple[str, str]] | None = None) -> tuple[list[str], list[Hit]]:
    """Write ``turns`` to (U, S) and ``others`` to (U, S2) and (U2, S) of a fresh memory cache; search (U, S)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with supply_backend("memory", tmp_path=Path(tmp), clock=FakeClock()) as cache:
            manager = SessionManager(cache, retriever=retriever)
            ids = await _write(manager, U, S, turns)
            for user, session in ((U, S2), (U2, S)):
                await _write(manager, user, session, others if others is not None else turns)
            return ids, await manager.search(U, query, session_id=S, top_k=top_k)


def _check_hits(hits: list[Hit], ids: list[str], top_k: int) -> None:
    """The shape every result has: at most top_k, scores > 0 best first, each turn once, ties oldest first."""
    assert isinstance(hits, list), f"search returned {type(hits).__name__}, not a list"
    assert len(hits) <= max(top_k, 0), f"{len(hits)} hits for top_k={top_k}"
    position = {qa_id: index for index, qa_id in enumerate(ids)}
    seen: set[str] = set()
    for entry, score in hits:
        assert isinstance(entry, SessionQAEntry), f"a hit's turn is a {type(entry).__name__}"
        assert entry.qa_id in position, f"turn {entry.qa_id!r} is not one of the caller's session's turns"
        assert entry.qa_id not in seen, f"turn {entry.qa_id!r} returned twice"
        seen.add(entry.qa_id)
        assert score > 0, f"score {score!r} is not > 0"
    for (first, a), (second, b) in zip(hits, hits[1:]):
        assert a >= b, f"scores not best first: {a!r} before {b!r}"
        if a == b and first.qa_id is not None and second.qa_id is not None:
            assert position[first.qa_id] < position[second.qa_id], f"equal scores {a!r} not oldest first"


class SessionRetrieverSuite:
    """The :class:`~memlab.session.SessionRetriever` contract; subclasses provide a ``session_retriever`` fixture."""

    @pytest.fixture
    def session_retriever(self) -> SessionRetriever[Any]:
        raise NotImplementedError("a SessionRetrieverSuite subclass must provide a `session_retriever` fixture")

    def test_name_and_new_index(self, session_retriever: SessionRetriever[Any]) -> None:
        assert isinstance(session_retriever.name, str) and session_retriever.name, "name must be a non-empty str"
        index = session_retriever.new_index()
        assert isinstance(index, SessionIndex), f"new_index returned {type(index).__name__}"
        assert index.cursor is None and index.entries == [], "a new index must be empty"
        assert session_retriever.new_index() is not index, "each session needs its own index"

    @_SETTINGS
    @given(turns=_TURNS, query=_PHRASES, top_k=_TOP_K)
    def test_results_are_the_sessions_turns_once_best_first(self, session_retriever: SessionRetriever[Any],
                                                            turns: list[tuple[str, str]], query: str, top_k: int) -> None:
        ids, hits = asyncio.run(_search_one_session(session_retriever, turns, query, top_k))
        _check_hits(hits, ids, top_k)

    @_SETTINGS
    @given(turns=_TURNS, query=_PHRASES)
    def test_duplicate_turns_tie_oldest_first(self, session_retriever: SessionRetriever[Any], turns: list[tuple[str, str]], query: str) -> None:
        doubled = [turn for turn in turns for _ in range(2)]  # every turn twice: equal scores guaranteed
        ids, hits = asyncio.run(_search_one_session(session_retriever, doubled, query, len(doubled)))
        _check_hits(hits, ids, len(doubled))

    @_SETTINGS
    @given(turns=_TURNS, query=st.lists(st.sampled_from(_OTHER_WORDS), min_size=1, max_size=3).map(" ".join))
    def test_no_match_gives_nothing(self, session_retriever: SessionRetriever[Any], turns: list[tuple[str, str]], query: str) -> None:
        _, hits = asyncio.run(_search_one_session(session_retriever, turns, query, 10))
        assert hits == [], f"a query sharing nothing with the session matched {hits!r}"

    @_SETTINGS
    @given(turns=_TURNS, query=_PHRASES)
    def test_only_the_callers_session(self, session_retriever: SessionRetriever[Any], turns: list[tuple[str, str]], query: str) -> None:
        # the caller's session is empty; the same user's other session and another user's same session are not
        _, hits = asyncio.run(_search_one_session(session_retriever, [], query, 10, others=turns + [(query, query)]))
        assert hits == [], f"an empty session returned turns of another session: {hits!r}"

    @pytest.mark.parametrize("query", ["", "   ", "?!", "... ---"], ids=["empty", "blank", "punctuation", "dots"])
    def test_query_without_tokens_gives_nothing(self, session_retriever: SessionRetriever[Any], query: str) -> None:
        _, hits = asyncio.run(_search_one_session(session_retriever, [("apple banana", "cherry")], query, 10))
        assert hits == [], f"a query without tokens matched {hits!r}"

    async def test_sees_turns_written_by_another_handle(self, session_retriever: SessionRetriever[Any], tmp_path: Path) -> None:
        async with supply_backend("sqlite", tmp_path=tmp_path, clock=FakeClock()) as first, \
                supply_backend("sqlite", tmp_path=tmp_path, clock=FakeClock()) as second:
            mine = SessionManager(first, retriever=session_retriever)
            theirs = SessionManager(second, retriever=session_retriever)
            await _write(mine, U, S, [("apple banana", "cherry")])
            assert await mine.search(U, "zebra quartz", session_id=S) == []  # the index now holds a cursor
            [added] = await _write(theirs, U, S, [("zebra quartz", "zebra quartz")])
            hits = await mine.search(U, "zebra quartz", session_id=S)
            assert [entry.qa_id for entry, _ in hits] == [added], f"a turn another handle wrote was not found: {hits!r}"
            assert await theirs.delete_qa(U, added, session_id=S)
            hits = await mine.search(U, "zebra quartz", session_id=S)
            assert hits == [], f"a turn another handle deleted is still returned: {hits!r}"
