"""The cache backend conformance suite, shipped so third-party backends can reuse it.

Subclass :class:`CacheBackendSuite` in a test module and provide a ``backend``
fixture that yields an **open** backend built with the suite's ``ttl``, ``clock``
and ``purge_interval_seconds`` fixtures (tests override those three to set up
their scenario)::

    import pytest
    from memlab.testing.conformance import CacheBackendSuite

    class TestMyCache(CacheBackendSuite):
        @pytest.fixture
        async def backend(self, tmp_path, ttl, clock, purge_interval_seconds):
            async with MyCache(tmp_path, ttl=ttl, clock=clock,
                               purge_interval_seconds=purge_interval_seconds) as cache:
                yield cache
                await cache.prune()

Optional hooks, skipped with a reason unless the subclass provides them:

* ``second_backend``: a second open handle on the same store (another
  process's view), built with the same options;
* ``corrupt_qa_row`` / ``corrupt_context_row``: an async ``hook(backend, user,
  session)`` that stores one unreadable row at the end of that session's live QA
  turns / context entries.

Tests that close the backend open it again before they end, so a fixture may
still use it after ``yield`` (as ``prune()`` above does).

Override a test in the subclass only to skip it, with the reason. Register the
module for assertion rewriting in your root ``conftest.py``:
``pytest.register_assert_rewrite("memlab.testing.conformance")``.

Time only moves through ``clock.advance()``; no test sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from memlab.cache import CacheBackend, QALog
from memlab.exceptions import SessionParameterValidationError, SessionQAEntryValidationError, ValidationError
from memlab.models import SessionAgentTraceEntry, SessionQAEntry
from memlab.session import trace_entries
from memlab.testing._clock import FakeClock
from memlab.ttl import LazySlackTTL, NoTTL, SlidingTTL, TTLPolicy

__all__ = ["CacheBackendSuite", "TTL_SECONDS"]

#: the TTL the suite's scenarios use (seconds)
TTL_SECONDS = 3600.0

U, U2 = "u1", "u2"
S, S2 = "s1", "s2"


class _HalfSlackTTL(TTLPolicy):
    """A policy from outside memlab's built-ins: re-stamps once expiry lags the target by half the TTL.

    Entries expire within ``[0.5·ttl, ttl]`` after the last write. Backends know it only
    through :meth:`~memlab.ttl.TTLPolicy.restamp_cutoff`.
    """

    name = "half_slack"
    slack = 0.5  # read by _live_for and _restamp_due

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        if self.seconds is None:
            return None
        return now + timedelta(seconds=(1 - self.slack) * self.seconds)


_EXPIRING_POLICIES = pytest.mark.parametrize(
    "ttl",
    [SlidingTTL(TTL_SECONDS), LazySlackTTL(TTL_SECONDS), _HalfSlackTTL(TTL_SECONDS)],
    ids=["sliding", "lazy_slack", "custom_half_slack"],
)


def _purge_interval(seconds: float):
    return pytest.mark.parametrize("purge_interval_seconds", [seconds], ids=[f"purge{seconds:g}"])


def _ttl_seconds(ttl: TTLPolicy) -> float:
    """The policy's lifetime; only policies that expire have one."""
    if ttl.seconds is None:
        raise ValueError(f"the {ttl.name or type(ttl).__name__} TTL policy never expires: it has no lifetime")
    return ttl.seconds


def _live_for(ttl: TTLPolicy) -> float:
    """Seconds after a write during which the written kind is guaranteed readable."""
    return (1.0 - getattr(ttl, "slack", 0.0)) * _ttl_seconds(ttl)


def _restamp_due(ttl: TTLPolicy) -> float:
    """Seconds after a write by which a further write certainly re-stamps, well inside the TTL (half of it: sliding)."""
    return (1.0 + getattr(ttl, "slack", 0.0)) / 2 * _ttl_seconds(ttl)


async def _qa(backend: CacheBackend, qa_id: str, user: str = U, session: str = S, **fields: Any) -> SessionQAEntry:
    fields.setdefault("question", f"question {qa_id}?")
    fields.setdefault("answer", f"answer {qa_id}")
    return await backend.create_qa_entry(user, session, qa_id=qa_id, **fields)


async def _ctx(backend: CacheBackend, entry_id: str, user: str = U, session: str = S, **fields: Any) -> str:
    return await backend.create_session_context_entry(user, session, {"id": entry_id, "kind": "context", **fields})


def _stored_id(entry: SessionQAEntry) -> str:
    """The ``qa_id`` of a turn read back from a backend, which always assigns one."""
    if entry.qa_id is None:
        raise AssertionError(f"the backend returned a stored turn without a qa_id: {entry!r}")
    return entry.qa_id


def _step(trace_id: str, **fields: Any) -> SessionAgentTraceEntry:
    """An agent trace step with JSON-heavy params and return value (what the session manager stores)."""
    fields.setdefault("origin_function", f"tool_{trace_id}")
    fields.setdefault("status", "success")
    fields.setdefault("method_params", {"query": f"find {trace_id}", "limit": 3, "filters": {"tags": ["a", "b"], "exact": True}})
    fields.setdefault("method_return_value", [{"id": trace_id, "score": 0.5}, None])
    return SessionAgentTraceEntry(trace_id=trace_id, created_at="2026-01-01T00:00:00+00:00", **fields)


async def _trace(backend: CacheBackend, step: SessionAgentTraceEntry, user: str = U, session: str = S) -> str:
    return await backend.create_session_context_entry(user, session, step.as_row())


async def _traces(backend: CacheBackend, user: str = U, session: str = S) -> list[SessionAgentTraceEntry]:
    return trace_entries(await backend.get_session_context_entries(user, session))


async def _qa_ids(backend: CacheBackend, user: str = U, session: str = S) -> list[str]:
    return [_stored_id(entry) for entry in await backend.get_all_qa_entries(user, session)]


async def _ctx_ids(backend: CacheBackend, user: str = U, session: str = S) -> list[str]:
    return [entry["id"] for entry in await backend.get_session_context_entries(user, session)]


async def _follow(backend: CacheBackend, cursor, view: list[SessionQAEntry], user: str = U, session: str = S):
    """One ``read_qa_log`` step applied to a view: ``(log, new_view)``."""
    log = await backend.read_qa_log(user, session, cursor)
    assert isinstance(log, QALog)
    return log, (list(log.entries) if log.reset else [*view, *log.entries])


async def _raises(exc: type[BaseException], awaitable: Awaitable[Any]) -> None:
    with pytest.raises(exc):
        await awaitable


Op = Callable[[CacheBackend], Awaitable[Any]]

#: writes that slide the QA expiry of (U, S), which holds q1 and q2
_QA_SLIDING: dict[str, Op] = {
    "create": lambda b: _qa(b, "q3"),
    "update": lambda b: b.update_qa_entry(U, S, "q2", feedback_text="useful"),
    "update_all_none": lambda b: b.update_qa_entry(U, S, "q2", feedback_text=None),
    "delete_feedback": lambda b: b.delete_feedback(U, S, "q2"),
    "delete_existing": lambda b: b.delete_qa_entry(U, S, "q2"),
}

#: operations that must not move the QA expiry of (U, S), which holds q1 and q2
_QA_NOT_SLIDING: dict[str, Op] = {
    "reads": lambda b: asyncio.gather(
        b.get_all_qa_entries(U, S), b.get_latest_qa_entries(U, S, 1), b.read_qa_log(U, S)
    ),
    "delete_missing": lambda b: b.delete_qa_entry(U, S, "missing"),
    "update_missing": lambda b: b.update_qa_entry(U, S, "missing", answer="x"),
    "delete_feedback_missing": lambda b: b.delete_feedback(U, S, "missing"),
    "update_invalid": lambda b: _raises(
        SessionQAEntryValidationError, b.update_qa_entry(U, S, "q2", memify_metadata={"bad": {"nested": 1}})
    ),
    "create_duplicate": lambda b: _raises(SessionQAEntryValidationError, _qa(b, "q2")),
    "context_write": lambda b: _ctx(b, "c1", content="a rule"),
    "other_session": lambda b: _qa(b, "q1", session=S2),
    "other_user": lambda b: _qa(b, "q1", user=U2),
}

#: writes that slide the context expiry of (U, S), which holds c1 and c2
_CTX_SLIDING: dict[str, Op] = {
    "create": lambda b: _ctx(b, "c3", content="new"),
    "upsert": lambda b: _ctx(b, "c2", content="replaced"),
    "update": lambda b: b.update_session_context_entry(U, S, "c2", {"helpful_count": 1}),
}

#: operations that must not move the context expiry of (U, S), which holds c1 and c2
_CTX_NOT_SLIDING: dict[str, Op] = {
    "reads": lambda b: b.get_session_context_entries(U, S),
    "delete_existing": lambda b: b.delete_session_context_entry(U, S, "c2"),
    "delete_missing": lambda b: b.delete_session_context_entry(U, S, "missing"),
    "update_missing": lambda b: b.update_session_context_entry(U, S, "missing", {"x": 1}),
    "qa_write": lambda b: _qa(b, "q1"),
    "other_session": lambda b: _ctx(b, "c1", session=S2),
}


class CacheBackendSuite:
    """Every rule of the :class:`~memlab.cache.CacheBackend` contract, as pytest tests."""

    # -- fixtures ----------------------------------------------------------------------

    @pytest.fixture
    def clock(self) -> FakeClock:
        """The backend's clock; tests move time with ``clock.advance``."""
        return FakeClock()

    @pytest.fixture
    def ttl(self) -> TTLPolicy:
        """The backend's TTL policy (TTL tests parametrize it)."""
        return SlidingTTL(TTL_SECONDS)

    @pytest.fixture
    def purge_interval_seconds(self) -> float:
        """The backend's sweep throttle (sweep tests parametrize it)."""
        return 900.0

    @pytest.fixture
    def backend(self) -> CacheBackend:
        """An open backend built with ``ttl``, ``clock`` and ``purge_interval_seconds``."""
        raise NotImplementedError("a CacheBackendSuite subclass must provide a `backend` fixture")

    @pytest.fixture
    def second_backend(self, backend) -> CacheBackend:
        """A second open handle on ``backend``'s store, built with the same options."""
        pytest.skip("the backend provides no second handle on the same store")

    @pytest.fixture
    def corrupt_qa_row(self) -> Callable[[CacheBackend, str, str], Awaitable[None]]:
        """``await hook(backend, user, session)`` appends one unreadable QA row to a live session."""
        pytest.skip("no hook to store a corrupt QA row for this backend")

    @pytest.fixture
    def corrupt_context_row(self) -> Callable[[CacheBackend, str, str], Awaitable[None]]:
        """``await hook(backend, user, session)`` appends one unreadable context row to a live session."""
        pytest.skip("no hook to store a corrupt context row for this backend")

    # -- QA turns: append, order, fields -----------------------------------------------

    async def test_empty_session_reads_empty(self, backend):
        assert await backend.get_all_qa_entries(U, S) == []
        assert await backend.get_latest_qa_entries(U, S, 3) == []
        assert await backend.get_session_context_entries(U, S) == []
        log = await backend.read_qa_log(U, S)
        assert (log.entries, log.reset) == ([], True)

    async def test_append_keeps_order(self, backend, clock):
        await _qa(backend, "q1")
        await _qa(backend, "q2")  # same instant: order is append order, not time
        clock.advance(5)
        await _qa(backend, "q3")
        assert await _qa_ids(backend) == ["q1", "q2", "q3"]

    async def test_create_returns_stored_entry(self, backend, clock):
        entry = await backend.create_qa_entry(
            U,
            S,
            question="What is memlab?",
            context="ctx",
            answer="A toolkit.",
            qa_id="q1",
            feedback_text="good",
            feedback_score=5,
            used_graph_element_ids={"node_ids": ["n1"], "edge_ids": ["e1"]},
            memify_metadata={"flag": True, "count": 2, "tag": "x", "tags": ["a", "b"]},
            used_session_context_ids=["c1"],
        )
        assert isinstance(entry, SessionQAEntry)
        assert entry.time == clock.now().isoformat()
        assert entry.qa_id == "q1"
        assert await backend.get_all_qa_entries(U, S) == [entry]
        assert entry.memify_metadata == {"flag": True, "count": 2, "tag": "x", "tags": ["a", "b"]}
        assert entry.used_graph_element_ids == {"node_ids": ["n1"], "edge_ids": ["e1"]}

    async def test_create_normalizes_empty_collections(self, backend):
        await backend.create_qa_entry(
            U, S, question="q", answer="a", qa_id="q1", used_graph_element_ids={}, memify_metadata={}, used_session_context_ids=[]
        )
        (entry,) = await backend.get_all_qa_entries(U, S)
        assert (entry.used_graph_element_ids, entry.memify_metadata, entry.used_session_context_ids) == (None, None, None)
        assert (entry.context, entry.feedback_text, entry.feedback_score) == ("", None, None)

    @pytest.mark.parametrize("qa_id", [None, ""])
    async def test_create_generates_qa_id(self, backend, qa_id):
        first = await backend.create_qa_entry(U, S, question="q", answer="a", qa_id=qa_id)
        second = await backend.create_qa_entry(U, S, question="q", answer="a", qa_id=qa_id)
        assert first.qa_id != second.qa_id
        uuid.UUID(first.qa_id)
        assert await _qa_ids(backend) == [first.qa_id, second.qa_id]

    @pytest.mark.parametrize(
        "fields",
        [
            {"feedback_score": 0},
            {"feedback_score": 6},
            {"used_graph_element_ids": {"bogus": ["x"]}},
            {"memify_metadata": {"nested": {"a": 1}}},
        ],
        ids=["score0", "score6", "graph_ids_key", "metadata_value"],
    )
    async def test_create_invalid_entry_raises_and_stores_nothing(self, backend, fields):
        with pytest.raises(SessionQAEntryValidationError):
            await backend.create_qa_entry(U, S, question="q", answer="a", qa_id="q1", **fields)
        assert await backend.get_all_qa_entries(U, S) == []

    async def test_invalid_arguments_raise_before_any_io(self, backend):
        await backend.close()  # a closed store cannot be reached, so validation must come first
        with pytest.raises(SessionParameterValidationError):
            await backend.get_latest_qa_entries(U, S, 0)
        with pytest.raises(SessionQAEntryValidationError):
            await backend.create_qa_entry(U, S, question="q", answer="a", feedback_score=9)
        with pytest.raises(SessionQAEntryValidationError):
            await backend.update_qa_entry(U, S, "q1", feedback_score=0)
        with pytest.raises(SessionQAEntryValidationError):
            await backend.update_qa_entry(U, S, "q1", no_such_field="x")
        await backend.open()  # leave it as the fixture gave it (its teardown may use it)

    @pytest.mark.parametrize(
        "value",
        [b"s1", 1.5, 7, ["s"], {"s": 1}, None, "", "   ", "x" * 256, "a\x00b", "line\nbreak", "\ud800"],
        ids=["bytes", "float", "int", "list", "dict", "none", "empty", "blank", "256_chars", "nul", "newline", "surrogate"],
    )
    async def test_bad_ids_raise_on_every_call_and_store_nothing(self, backend, value):
        calls = [
            lambda: backend.create_qa_entry(U, value, question="q", answer="a"),
            lambda: backend.create_qa_entry(value, S, question="q", answer="a"),
            lambda: backend.get_latest_qa_entries(U, value, 10),
            lambda: backend.read_qa_log(value, S),
            lambda: backend.update_qa_entry(U, value, "q1", feedback_score=3),
            lambda: backend.delete_feedback(U, S, value),
            lambda: backend.delete_qa_entry(U, value, "q1"),
            lambda: backend.delete_session(value, S),
            lambda: backend.create_session_context_entry(U, value, {"id": "c1"}),
            lambda: backend.get_session_context_entries(U, value),
            lambda: backend.update_session_context_entry(U, S, value, {"a": 1}),
            lambda: backend.delete_session_context_entry(U, value, "c1"),
        ]
        if value is not None and value != "":  # "" and None are "no qa_id / entry id": one is generated
            calls.append(lambda: backend.create_qa_entry(U, S, question="q", answer="a", qa_id=value))
            calls.append(lambda: backend.create_session_context_entry(U, S, {"id": value}))
        for call in calls:
            with pytest.raises(SessionParameterValidationError):
                await call()
        assert await backend.get_all_qa_entries(U, S) == []
        assert await backend.get_session_context_entries(U, S) == []

    async def test_ids_up_to_the_limit_are_stored_verbatim(self, backend):
        for session in ("x" * 255, "a:b%c", "ünïcødé 🙂", "tab-free but spaced id"):
            await _qa(backend, "q1", session=session)
            assert [e.qa_id for e in await backend.get_all_qa_entries(U, session)] == ["q1"]

    @pytest.mark.parametrize("field", ["question", "context", "answer", "feedback_text"])
    async def test_text_that_cannot_be_encoded_raises_naming_the_field(self, backend, field):
        fields = {"question": "q", "answer": "a", field: "bad \ud800 text"}
        with pytest.raises(SessionQAEntryValidationError, match=field):
            await backend.create_qa_entry(U, S, qa_id="q1", **fields)
        await _qa(backend, "q2")
        with pytest.raises(SessionQAEntryValidationError, match=field):
            await backend.update_qa_entry(U, S, "q2", **{field: "\udfff"})
        with pytest.raises(SessionQAEntryValidationError):
            await backend.create_qa_entry(U, S, question="q", answer="a", memify_metadata={"k": "\ud800"})
        with pytest.raises(SessionParameterValidationError):
            await backend.create_session_context_entry(U, S, {"id": "c1", "content": "\ud800"})
        with pytest.raises(SessionParameterValidationError):
            await backend.update_session_context_entry(U, S, "c1", {"content": "\ud800"})
        assert [(e.qa_id, e.question, e.feedback_text) for e in await backend.get_all_qa_entries(U, S)] == [("q2", "question q2?", None)]
        assert await backend.get_session_context_entries(U, S) == []

    # -- last_n ------------------------------------------------------------------------

    @pytest.mark.parametrize("last_n", [2**31 - 1, 2**31, 2**63, 10**30], ids=["2^31-1", "2^31", "2^63", "10^30"])
    async def test_huge_last_n_returns_every_turn(self, backend, last_n):
        for i in range(1, 4):
            await _qa(backend, f"q{i}")
        assert [e.qa_id for e in await backend.get_latest_qa_entries(U, S, last_n)] == ["q1", "q2", "q3"]

    async def test_last_n(self, backend):
        for i in range(1, 5):
            await _qa(backend, f"q{i}")
        latest = backend.get_latest_qa_entries
        assert [e.qa_id for e in await latest(U, S, 1)] == ["q4"]
        assert [e.qa_id for e in await latest(U, S, 3)] == ["q2", "q3", "q4"]
        assert [e.qa_id for e in await latest(U, S, 4)] == ["q1", "q2", "q3", "q4"]
        assert [e.qa_id for e in await latest(U, S, 100)] == ["q1", "q2", "q3", "q4"]
        assert [e.qa_id for e in await latest(U, S, None)] == ["q1", "q2", "q3", "q4"]
        assert [e.qa_id for e in await latest(U, S)] == ["q1", "q2", "q3", "q4"]

    @pytest.mark.parametrize("last_n", [0, -1, True, False, 1.5, "2"], ids=repr)
    async def test_last_n_must_be_int_at_least_one(self, backend, last_n):
        await _qa(backend, "q1")
        with pytest.raises(SessionParameterValidationError):
            await backend.get_latest_qa_entries(U, S, last_n)
        assert issubclass(SessionParameterValidationError, ValidationError)

    # -- identity ----------------------------------------------------------------------

    async def test_user_and_session_isolate(self, backend):
        await _qa(backend, "q1", U, S, answer="u1s1")
        await _qa(backend, "q1", U, S2, answer="u1s2")  # same qa_id elsewhere is fine
        await _qa(backend, "q1", U2, S, answer="u2s1")
        await _ctx(backend, "c1", U, S, content="u1s1")
        await _ctx(backend, "c1", U2, S, content="u2s1")
        for user, session, label in [(U, S, "u1s1"), (U, S2, "u1s2"), (U2, S, "u2s1")]:
            (entry,) = await backend.get_all_qa_entries(user, session)
            assert entry.answer == label
        assert await backend.get_session_context_entries(U, S2) == []
        assert await backend.get_all_qa_entries(U2, S2) == []

        assert await backend.update_qa_entry(U, S, "q1", feedback_score=2)
        assert await backend.update_session_context_entry(U, S, "c1", {"content": "changed"})
        assert await backend.delete_session(U, S)
        assert [e.answer for e in await backend.get_all_qa_entries(U, S2)] == ["u1s2"]
        (other,) = await backend.get_all_qa_entries(U2, S)
        assert (other.answer, other.feedback_score) == ("u2s1", None)
        assert await backend.get_session_context_entries(U2, S) == [{"id": "c1", "kind": "context", "content": "u2s1"}]

    async def test_duplicate_qa_id_raises_and_changes_nothing(self, backend):
        await _qa(backend, "q1", answer="first")
        await _qa(backend, "q2")
        before = await backend.get_all_qa_entries(U, S)
        log, view = await _follow(backend, None, [])
        with pytest.raises(SessionQAEntryValidationError):
            await _qa(backend, "q1", answer="second")
        assert await backend.get_all_qa_entries(U, S) == before
        log, view = await _follow(backend, log.cursor, view)
        assert (log.entries, log.reset) == ([], False)

    async def test_deleted_qa_id_can_be_reused(self, backend):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        assert await backend.delete_qa_entry(U, S, "q1")
        await _qa(backend, "q1", answer="again")
        assert await _qa_ids(backend) == ["q2", "q1"]

    # -- update / delete_feedback / delete_qa ------------------------------------------

    async def test_update_sets_given_fields_and_keeps_the_rest(self, backend, clock):
        created = await _qa(backend, "q1", context="ctx", used_session_context_ids=["c1"])
        await _qa(backend, "q2")
        clock.advance(10)
        assert await backend.update_qa_entry(U, S, "q1", feedback_text="nice", feedback_score=4) is True
        first, second = await backend.get_all_qa_entries(U, S)
        expected = created.model_copy(update={"feedback_text": "nice", "feedback_score": 4})
        assert first == expected  # time, position and every other field kept
        assert second.qa_id == "q2"

    async def test_update_none_keeps_value(self, backend):
        await _qa(backend, "q1", feedback_text="keep", feedback_score=3, memify_metadata={"a": 1})
        assert await backend.update_qa_entry(
            U, S, "q1", answer="new answer", feedback_text=None, feedback_score=None, memify_metadata=None
        )
        (entry,) = await backend.get_all_qa_entries(U, S)
        assert (entry.answer, entry.feedback_text, entry.feedback_score) == ("new answer", "keep", 3)
        assert entry.memify_metadata == {"a": 1}

    async def test_update_merges_memify_metadata_shallowly(self, backend):
        await _qa(backend, "q1", memify_metadata={"a": 1, "b": "x", "tags": ["t1"]})
        await _qa(backend, "q2")
        assert await backend.update_qa_entry(U, S, "q1", memify_metadata={"b": "y", "tags": ["t2"], "c": True})
        assert await backend.update_qa_entry(U, S, "q2", memify_metadata={"n": 1})
        first, second = await backend.get_all_qa_entries(U, S)
        assert first.memify_metadata == {"a": 1, "b": "y", "tags": ["t2"], "c": True}
        assert second.memify_metadata == {"n": 1}

    async def test_update_replaces_other_collections(self, backend):
        await _qa(backend, "q1", used_graph_element_ids={"node_ids": ["n1"]}, used_session_context_ids=["c1"])
        assert await backend.update_qa_entry(U, S, "q1", used_graph_element_ids={"edge_ids": ["e1"]}, used_session_context_ids=["c2"])
        (entry,) = await backend.get_all_qa_entries(U, S)
        assert entry.used_graph_element_ids == {"edge_ids": ["e1"]}
        assert entry.used_session_context_ids == ["c2"]

    @pytest.mark.parametrize(
        "fields",
        [
            {"feedback_score": 0},
            {"feedback_score": 6},
            {"feedback_text": "ok", "feedback_score": 7},
            {"memify_metadata": {"nested": {"a": 1}}},
            {"used_graph_element_ids": {"bogus": ["x"]}},
            {"time": "2020-01-01T00:00:00+00:00"},
            {"question": "new", "no_such_field": 1},
        ],
        ids=["score0", "score6", "score7_with_text", "metadata", "graph_ids", "time", "unknown"],
    )
    async def test_update_invalid_raises_and_leaves_row_unchanged(self, backend, fields):
        await _qa(backend, "q1", feedback_text="orig", feedback_score=2, memify_metadata={"a": 1})
        before = await backend.get_all_qa_entries(U, S)
        log, view = await _follow(backend, None, [])
        with pytest.raises(SessionQAEntryValidationError):
            await backend.update_qa_entry(U, S, "q1", **fields)
        assert await backend.get_all_qa_entries(U, S) == before
        log, view = await _follow(backend, log.cursor, view)
        assert (log.entries, log.reset) == ([], False)

    async def test_update_missing_turn_returns_false(self, backend):
        assert await backend.update_qa_entry(U, S, "q1", answer="x") is False
        await _qa(backend, "q1")
        assert await backend.update_qa_entry(U, S, "q9", answer="x") is False
        assert await backend.update_qa_entry(U2, S, "q1", answer="x") is False
        assert [e.answer for e in await backend.get_all_qa_entries(U, S)] == ["answer q1"]

    async def test_delete_feedback(self, backend):
        await _qa(backend, "q1", feedback_text="meh", feedback_score=2, memify_metadata={"a": 1})
        await _qa(backend, "q2")
        assert await backend.delete_feedback(U, S, "q1") is True
        assert await backend.delete_feedback(U, S, "q2") is True  # exists, even without feedback
        assert await backend.delete_feedback(U, S, "q9") is False
        assert await backend.delete_feedback(U2, S, "q1") is False
        first, second = await backend.get_all_qa_entries(U, S)
        assert (first.feedback_text, first.feedback_score, first.memify_metadata) == (None, None, {"a": 1})
        assert (second.feedback_text, second.feedback_score) == (None, None)

    async def test_delete_qa_entry(self, backend):
        for qa_id in ("q1", "q2", "q3"):
            await _qa(backend, qa_id)
        assert await backend.delete_qa_entry(U, S, "q2") is True
        assert await backend.delete_qa_entry(U, S, "q2") is False
        assert await backend.delete_qa_entry(U, S2, "q1") is False
        assert await backend.delete_qa_entry(U2, S, "q1") is False
        assert await _qa_ids(backend) == ["q1", "q3"]

    # -- delete_session ----------------------------------------------------------------

    async def test_delete_session_return_values(self, backend):
        assert await backend.delete_session(U, S) is False
        await _qa(backend, "q1")
        assert await backend.delete_session(U, S) is True
        assert await backend.delete_session(U, S) is False
        await _ctx(backend, "c1")
        assert await backend.delete_session(U, S) is True  # context alone counts
        assert await backend.get_session_context_entries(U, S) == []

    async def test_delete_session_removes_both_kinds(self, backend):
        await _qa(backend, "q1")
        await _ctx(backend, "c1")
        await _qa(backend, "q1", session=S2)
        assert await backend.delete_session(U, S) is True
        assert await backend.get_all_qa_entries(U, S) == []
        assert await backend.get_session_context_entries(U, S) == []
        assert await _qa_ids(backend, U, S2) == ["q1"]
        await _qa(backend, "q1")  # the session starts over
        assert await _qa_ids(backend) == ["q1"]

    @_EXPIRING_POLICIES
    async def test_delete_session_counts_only_live_rows(self, backend, clock, ttl):
        await _qa(backend, "q1")
        clock.advance(ttl.seconds / 2)
        await _ctx(backend, "c1")
        clock.advance(ttl.seconds / 2)  # qa dead, context live
        assert await backend.delete_session(U, S) is True
        await _qa(backend, "q1")
        await _ctx(backend, "c1")
        clock.advance(ttl.seconds)  # both dead
        assert await backend.delete_session(U, S) is False
        assert await backend.sweep() == 0  # dead rows went with the session

    # -- session context ---------------------------------------------------------------

    async def test_context_create_and_read_in_insert_order(self, backend, clock):
        entry = {"id": "c2", "kind": "context", "section": "rules", "content": "be brief", "confidence": 0.9, "tags": ["x"]}
        assert await backend.create_session_context_entry(U, S, entry) == "c2"
        clock.advance(1)
        assert await _ctx(backend, "c1", content="later") == "c1"
        assert await backend.get_session_context_entries(U, S) == [entry, {"id": "c1", "kind": "context", "content": "later"}]

    @pytest.mark.parametrize("given", [{}, {"id": None}, {"id": ""}], ids=["absent", "none", "empty"])
    async def test_context_create_generates_id(self, backend, given):
        entry = {**given, "content": "x"}
        entry_id = await backend.create_session_context_entry(U, S, entry)
        uuid.UUID(entry_id)
        assert entry == {**given, "content": "x"}  # the caller's dict is not modified
        assert await backend.get_session_context_entries(U, S) == [{"id": entry_id, "content": "x"}]

    async def test_context_upsert_keeps_position_and_last_writer_wins(self, backend, clock):
        await _ctx(backend, "c1", content="one", extra=1)
        await _ctx(backend, "c2", content="two")
        clock.advance(1)
        await _ctx(backend, "c1", content="one, replaced")
        assert await backend.get_session_context_entries(U, S) == [
            {"id": "c1", "kind": "context", "content": "one, replaced"},  # replaced whole, not merged
            {"id": "c2", "kind": "context", "content": "two"},
        ]

    async def test_context_update_merges_shallowly(self, backend):
        await _ctx(backend, "c1", content="one", helpful_count=0, nested={"a": 1})
        await _ctx(backend, "c2", content="two")
        assert await backend.update_session_context_entry(U, S, "c1", {"helpful_count": 2, "nested": {"b": 2}, "id": "zz"}) is True
        assert await backend.get_session_context_entries(U, S) == [
            {"id": "c1", "kind": "context", "content": "one", "helpful_count": 2, "nested": {"b": 2}},
            {"id": "c2", "kind": "context", "content": "two"},
        ]
        assert await backend.update_session_context_entry(U, S, "c9", {"x": 1}) is False
        assert await backend.update_session_context_entry(U2, S, "c1", {"x": 1}) is False

    async def test_context_delete(self, backend):
        for entry_id in ("c1", "c2", "c3"):
            await _ctx(backend, entry_id)
        assert await backend.delete_session_context_entry(U, S, "c2") is True
        assert await backend.delete_session_context_entry(U, S, "c2") is False
        assert await backend.delete_session_context_entry(U, S2, "c1") is False
        assert await _ctx_ids(backend) == ["c1", "c3"]
        await _ctx(backend, "c2")  # re-created: goes to the end
        assert await _ctx_ids(backend) == ["c1", "c3", "c2"]

    # -- agent trace steps (context rows of kind "trace") ------------------------------

    async def test_traces_round_trip_in_order_beside_guidance(self, backend, clock):
        first, second = _step("t1"), _step("t2", status="error", error_message="timeout", method_return_value=None)
        await _ctx(backend, "c1", content="a rule")
        assert await _trace(backend, first) == "trace:t1"
        clock.advance(1)
        await _trace(backend, second)
        await _ctx(backend, "c2", content="another rule")
        assert await _traces(backend) == [first, second]
        assert await _ctx_ids(backend) == ["c1", "trace:t1", "trace:t2", "c2"]
        replaced = _step("t1", session_feedback="retried")
        await _trace(backend, replaced)  # the same trace_id: replaced in place
        assert await _traces(backend) == [replaced, second]
        assert await _traces(backend, session=S2) == [] and await _traces(backend, user=U2) == []

    @_EXPIRING_POLICIES
    async def test_traces_expire_with_the_session_ttl(self, backend, clock, ttl):
        await _trace(backend, _step("t1"))
        await _qa(backend, "q1")
        clock.advance(ttl.seconds - 0.001)
        assert [step.trace_id for step in await _traces(backend)] == ["t1"]
        clock.advance(0.001)
        assert await _traces(backend) == []
        assert await backend.delete_session(U, S) is False  # nothing live was left

    @_EXPIRING_POLICIES
    async def test_trace_writes_slide_the_context_expiry(self, backend, clock, ttl):
        await _trace(backend, _step("t1"))
        clock.advance(_restamp_due(ttl))
        await _trace(backend, _step("t2"))
        clock.advance(_live_for(ttl) - 1)  # past the first write's TTL, within the slid one
        assert [step.trace_id for step in await _traces(backend)] == ["t1", "t2"]
        clock.advance(ttl.seconds - _live_for(ttl) + 1)
        assert await _traces(backend) == []

    async def test_delete_session_removes_traces(self, backend):
        await _trace(backend, _step("t1"))
        await _trace(backend, _step("t1"), session=S2)
        assert await backend.delete_session(U, S) is True  # traces alone count
        assert await _traces(backend) == []
        assert [step.trace_id for step in await _traces(backend, session=S2)] == ["t1"]
        await _trace(backend, _step("t2"))  # the session starts over
        assert [step.trace_id for step in await _traces(backend)] == ["t2"]

    # -- read_qa_log -------------------------------------------------------------------

    async def test_read_qa_log_first_read_resets_then_appends(self, backend):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        log, view = await _follow(backend, None, [])
        assert log.reset is True
        assert [e.qa_id for e in log.entries] == ["q1", "q2"]
        await _qa(backend, "q3")
        await _qa(backend, "q4")
        log, view = await _follow(backend, log.cursor, view)
        assert (log.reset, [e.qa_id for e in log.entries]) == (False, ["q3", "q4"])
        same, _ = await _follow(backend, log.cursor, view)  # nothing new; reading is repeatable
        assert (same.reset, same.entries) == (False, [])
        again, _ = await _follow(backend, same.cursor, view)
        assert (again.reset, again.entries) == (False, [])
        assert view == await backend.get_all_qa_entries(U, S)
        fresh = await backend.read_qa_log(U, S)  # no cursor: everything again
        assert (fresh.reset, fresh.entries) == (True, view)

    async def test_read_qa_log_incremental_from_empty_session(self, backend):
        log, view = await _follow(backend, None, [])
        assert (log.reset, log.entries) == (True, [])
        await _qa(backend, "q1")
        log, view = await _follow(backend, log.cursor, view)
        assert [e.qa_id for e in view] == ["q1"]
        assert view == await backend.get_all_qa_entries(U, S)

    @pytest.mark.parametrize(
        "change",
        ["update", "delete_feedback", "delete_qa", "delete_session", "prune"],
    )
    async def test_read_qa_log_resets_after_change(self, backend, change):
        await _qa(backend, "q1", feedback_score=3)
        await _qa(backend, "q2")
        log, view = await _follow(backend, None, [])
        if change == "update":
            assert await backend.update_qa_entry(U, S, "q1", answer="edited")
        elif change == "delete_feedback":
            assert await backend.delete_feedback(U, S, "q1")
        elif change == "delete_qa":
            assert await backend.delete_qa_entry(U, S, "q1")
        elif change == "delete_session":
            assert await backend.delete_session(U, S)
        else:
            await backend.prune()
        await _qa(backend, "q3")
        log, view = await _follow(backend, log.cursor, view)
        assert log.reset is True
        assert view == await backend.get_all_qa_entries(U, S)

    async def test_read_qa_log_ignores_other_sessions_and_context(self, backend):
        await _qa(backend, "q1")
        log, view = await _follow(backend, None, [])
        await _qa(backend, "q1", session=S2)
        await _qa(backend, "q1", user=U2)
        await _ctx(backend, "c1")
        await backend.delete_session(U2, S)
        log, view = await _follow(backend, log.cursor, view)
        assert (log.reset, log.entries) == (False, [])

    @_EXPIRING_POLICIES
    async def test_read_qa_log_resets_after_expiry(self, backend, clock, ttl):
        await _qa(backend, "q1")
        log, view = await _follow(backend, None, [])
        before_expiry = log.cursor
        clock.advance(ttl.seconds)
        log, view = await _follow(backend, log.cursor, view)
        assert (log.reset, view) == (True, [])
        await _qa(backend, "q2")
        log, view = await _follow(backend, log.cursor, view)
        assert [e.qa_id for e in view] == ["q2"]
        # a cursor taken before the expiry never resumes into the new session
        stale = await backend.read_qa_log(U, S, before_expiry)
        assert (stale.reset, [e.qa_id for e in stale.entries]) == (True, ["q2"])

    async def test_read_qa_log_cursor_works_on_another_handle(self, backend, second_backend):
        await _qa(backend, "q1")
        log, view = await _follow(backend, None, [])
        await _qa(backend, "q2")
        log, view = await _follow(second_backend, log.cursor, view)
        assert (log.reset, [e.qa_id for e in log.entries]) == (False, ["q2"])
        await _qa(second_backend, "q3")
        log, view = await _follow(backend, log.cursor, view)
        assert (log.reset, [e.qa_id for e in log.entries]) == (False, ["q3"])
        assert await second_backend.update_qa_entry(U, S, "q1", answer="edited")
        log, view = await _follow(backend, log.cursor, view)
        assert log.reset is True
        assert view == await backend.get_all_qa_entries(U, S) == await second_backend.get_all_qa_entries(U, S)

    # -- TTL ---------------------------------------------------------------------------

    @_EXPIRING_POLICIES
    async def test_qa_expires_ttl_after_last_write(self, backend, clock, ttl):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        clock.advance(ttl.seconds - 0.001)  # a single write stamps the exact expiry
        assert await _qa_ids(backend) == ["q1", "q2"]
        clock.advance(0.001)  # now == expires_at: dead
        assert await backend.get_all_qa_entries(U, S) == []
        assert await backend.get_latest_qa_entries(U, S, 1) == []
        log = await backend.read_qa_log(U, S)
        assert (log.reset, log.entries) == (True, [])
        assert await backend.update_qa_entry(U, S, "q1", answer="x") is False
        assert await backend.delete_feedback(U, S, "q1") is False
        assert await backend.delete_qa_entry(U, S, "q1") is False

    @_EXPIRING_POLICIES
    async def test_context_expires_ttl_after_last_write(self, backend, clock, ttl):
        await _ctx(backend, "c1")
        clock.advance(ttl.seconds - 0.001)
        assert await _ctx_ids(backend) == ["c1"]
        clock.advance(0.001)
        assert await backend.get_session_context_entries(U, S) == []
        assert await backend.update_session_context_entry(U, S, "c1", {"x": 1}) is False
        assert await backend.delete_session_context_entry(U, S, "c1") is False

    @_EXPIRING_POLICIES
    @pytest.mark.parametrize("write", list(_QA_SLIDING))
    async def test_qa_writes_slide_expiry(self, backend, clock, ttl, write):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        clock.advance(_restamp_due(ttl))
        await _QA_SLIDING[write](backend)
        clock.advance(_live_for(ttl) - 1)  # past the first write's TTL, within the slid one
        assert "q1" in await _qa_ids(backend)
        clock.advance(ttl.seconds - _live_for(ttl) + 1)  # a full TTL after the sliding write
        assert await backend.get_all_qa_entries(U, S) == []

    @_EXPIRING_POLICIES
    @pytest.mark.parametrize("op", list(_QA_NOT_SLIDING))
    async def test_qa_other_operations_do_not_slide_expiry(self, backend, clock, ttl, op):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        clock.advance(_restamp_due(ttl))  # a write now would re-stamp
        await _QA_NOT_SLIDING[op](backend)
        clock.advance(ttl.seconds - _restamp_due(ttl))
        assert await backend.get_all_qa_entries(U, S) == []

    @_EXPIRING_POLICIES
    @pytest.mark.parametrize("write", list(_CTX_SLIDING))
    async def test_context_writes_slide_expiry(self, backend, clock, ttl, write):
        await _ctx(backend, "c1")
        await _ctx(backend, "c2")
        clock.advance(_restamp_due(ttl))
        await _CTX_SLIDING[write](backend)
        clock.advance(_live_for(ttl) - 1)
        assert "c1" in await _ctx_ids(backend)
        clock.advance(ttl.seconds - _live_for(ttl) + 1)
        assert await backend.get_session_context_entries(U, S) == []

    @_EXPIRING_POLICIES
    @pytest.mark.parametrize("op", list(_CTX_NOT_SLIDING))
    async def test_context_other_operations_do_not_slide_expiry(self, backend, clock, ttl, op):
        await _ctx(backend, "c1")
        await _ctx(backend, "c2")
        clock.advance(_restamp_due(ttl))  # a write now would re-stamp
        await _CTX_NOT_SLIDING[op](backend)
        clock.advance(ttl.seconds - _restamp_due(ttl))
        assert await backend.get_session_context_entries(U, S) == []

    @_EXPIRING_POLICIES
    async def test_kinds_expire_independently(self, backend, clock, ttl):
        await _qa(backend, "q1")
        clock.advance(ttl.seconds / 2)
        await _ctx(backend, "c1")
        await _qa(backend, "q1", session=S2)
        clock.advance(ttl.seconds / 2)
        assert await backend.get_all_qa_entries(U, S) == []
        assert await _ctx_ids(backend) == ["c1"]
        await _qa(backend, "q2")  # restarts QA only
        clock.advance(ttl.seconds / 2)
        assert await backend.get_session_context_entries(U, S) == []
        assert await _qa_ids(backend) == ["q2"]
        assert await backend.get_all_qa_entries(U, S2) == []

    @_EXPIRING_POLICIES
    async def test_reads_do_not_slide_expiry(self, backend, clock, ttl):
        await _qa(backend, "q1")
        await _ctx(backend, "c1")
        clock.advance(_restamp_due(ttl))  # from here on, a write would re-stamp
        step = (ttl.seconds - _restamp_due(ttl)) / 3 - 1
        cursor = None
        for _ in range(3):
            assert await _qa_ids(backend) == ["q1"]
            assert len(await backend.get_latest_qa_entries(U, S, 1)) == 1
            cursor = (await backend.read_qa_log(U, S, cursor)).cursor
            assert await _ctx_ids(backend) == ["c1"]
            clock.advance(step)
        clock.advance(ttl.seconds - _restamp_due(ttl) - 3 * step)  # a full TTL after the only write
        assert await backend.get_all_qa_entries(U, S) == []
        assert await backend.get_session_context_entries(U, S) == []

    @pytest.mark.parametrize("ttl", [_HalfSlackTTL(TTL_SECONDS)], ids=["custom_half_slack"])
    async def test_custom_policy_expiry_follows_its_rule_within_its_window(self, backend, clock, ttl):
        """A policy the backend has never seen: expiry lands where its declared rule puts it.

        That is inside ``[(1 - slack)·ttl, ttl]`` after the last write; reads, even at
        moments when a write would re-stamp, never move it.
        """
        expiry = None  # the policy's own rule, applied to each write
        for i, gap in enumerate((0.0, 0.2, 0.3, 0.45, 0.1, 0.7, 0.3)):  # TTLs: below the slack and past it
            clock.advance(gap * ttl.seconds)
            assert (await _qa_ids(backend))[-1:] == ([f"q{i - 1}"] if i else [])  # never dead between writes
            now = clock.now()
            await _qa(backend, f"q{i}")
            await _ctx(backend, "c1", n=i)
            if ttl.needs_restamp(expiry, now):
                expiry = ttl.expiry_after_write(now)
        last = clock.now()
        assert last + timedelta(seconds=_live_for(ttl)) <= expiry < ttl.expiry_after_write(last)  # last write kept it
        cursor = None
        for before in (_live_for(ttl) - 1, 1, 0.001):  # seconds before expiry: a write would re-stamp, a read must not
            clock.advance((expiry - timedelta(seconds=before) - clock.now()).total_seconds())
            assert await _qa_ids(backend) == [f"q{i}" for i in range(7)]
            assert len(await backend.get_latest_qa_entries(U, S, 2)) == 2
            cursor = (await backend.read_qa_log(U, S, cursor)).cursor
            assert await _ctx_ids(backend) == ["c1"]
        clock.advance(0.001)  # now == expiry: dead
        assert await backend.get_all_qa_entries(U, S) == []
        assert await backend.get_session_context_entries(U, S) == []
        assert (await backend.read_qa_log(U, S, cursor)).entries == []

    @_EXPIRING_POLICIES
    async def test_write_to_expired_session_starts_fresh(self, backend, clock, ttl):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        await _ctx(backend, "c1")
        await _ctx(backend, "c2")
        clock.advance(ttl.seconds)
        await _qa(backend, "q2", answer="new life")  # a dead qa_id is no duplicate
        await _ctx(backend, "c2", content="new")
        assert [(e.qa_id, e.answer) for e in await backend.get_all_qa_entries(U, S)] == [("q2", "new life")]
        assert await backend.get_session_context_entries(U, S) == [{"id": "c2", "kind": "context", "content": "new"}]
        log = await backend.read_qa_log(U, S)
        assert [e.qa_id for e in log.entries] == ["q2"]
        clock.advance(_live_for(ttl) - 1)  # the new session has its own, fresh expiry
        assert await _qa_ids(backend) == ["q2"]
        assert await _ctx_ids(backend) == ["c2"]

    @pytest.mark.parametrize("ttl", [NoTTL()], ids=["none"])
    async def test_no_ttl_never_expires(self, backend, clock):
        await _qa(backend, "q1")
        await _ctx(backend, "c1")
        clock.advance(100 * 365 * 86400)
        assert await backend.update_qa_entry(U, S, "q1", feedback_score=5)
        clock.advance(100 * 365 * 86400)
        await _qa(backend, "q2")
        assert await _qa_ids(backend) == ["q1", "q2"]
        assert await _ctx_ids(backend) == ["c1"]
        assert await backend.sweep() == 0

    # -- sweep -------------------------------------------------------------------------

    @_EXPIRING_POLICIES
    @_purge_interval(10 * TTL_SECONDS)
    async def test_sweep_removes_expired_rows_and_counts_them(self, backend, clock, ttl):
        await _qa(backend, "q1")
        await _qa(backend, "q2")
        await _ctx(backend, "c1")
        await _ctx(backend, "c1", session=S2)
        clock.advance(_restamp_due(ttl))
        await _qa(backend, "q1", user=U2)
        await _ctx(backend, "c2", session=S2)  # slides S2's context
        clock.advance(ttl.seconds - _restamp_due(ttl))
        assert await backend.sweep() == 3  # (U, S): 2 QA + 1 context
        assert await backend.sweep() == 0
        assert await _qa_ids(backend, U2, S) == ["q1"]
        assert await _ctx_ids(backend, U, S2) == ["c1", "c2"]
        clock.advance(_restamp_due(ttl))
        assert await backend.sweep() == 3
        assert await backend.get_all_qa_entries(U2, S) == []

    @_purge_interval(2 * TTL_SECONDS)
    async def test_writes_sweep_at_most_once_per_interval(self, backend, clock, ttl):
        await _qa(backend, "q1")  # an instance's first write sweeps
        clock.advance(ttl.seconds)
        await _qa(backend, "q1", session=S2)  # TTL < interval since the last sweep: no sweep
        assert await backend.sweep() == 1  # q1 of S was still stored
        clock.advance(ttl.seconds)
        await _ctx(backend, "c1")  # S2 dead now; still within the interval
        clock.advance(ttl.seconds)  # c1 dead too; an interval has passed since the sweep
        await _qa(backend, "q1")  # this write sweeps S2's turn and the context entry
        assert await backend.sweep() == 0

    @_purge_interval(10 * TTL_SECONDS)
    async def test_first_write_sweeps_then_throttled(self, backend, clock, monkeypatch):
        calls = []
        sweep = backend.sweep

        async def counting_sweep() -> int:
            calls.append(clock.now())
            return await sweep()

        monkeypatch.setattr(backend, "sweep", counting_sweep)
        await backend.get_all_qa_entries(U, S)
        assert await backend.update_qa_entry(U, S, "q1", answer="x") is False
        assert calls == []
        await _ctx(backend, "c1")
        assert len(calls) == 1
        await _qa(backend, "q1")
        assert await backend.update_qa_entry(U, S, "q1", answer="x")
        clock.advance(10 * TTL_SECONDS - 1)
        await _qa(backend, "q2")
        assert len(calls) == 1
        clock.advance(1)
        await _qa(backend, "q3")
        assert len(calls) == 2

    @_purge_interval(0)
    async def test_purge_interval_zero_disables_write_sweeps(self, backend, clock, ttl):
        await _qa(backend, "q1")
        clock.advance(ttl.seconds)
        await _qa(backend, "q1", session=S2)
        await _ctx(backend, "c1", session=S2)
        assert await backend.sweep() == 1

    @_purge_interval(10 * TTL_SECONDS)
    async def test_first_write_of_each_instance_sweeps(self, backend, second_backend, clock, ttl):
        await _qa(backend, "q1")
        clock.advance(ttl.seconds)
        await _qa(second_backend, "q1", session=S2)  # second_backend's first write
        assert await backend.sweep() == 0

    # -- prune -------------------------------------------------------------------------

    async def test_prune_removes_everything(self, backend):
        for user in (U, U2):
            for session in (S, S2):
                await _qa(backend, "q1", user, session)
                await _ctx(backend, "c1", user, session)
        await backend.prune()
        for user in (U, U2):
            for session in (S, S2):
                assert await backend.get_all_qa_entries(user, session) == []
                assert await backend.get_session_context_entries(user, session) == []
        assert await backend.sweep() == 0
        await backend.prune()  # idempotent
        await _qa(backend, "q1")  # still usable
        assert await _qa_ids(backend) == ["q1"]

    # -- corrupt rows ------------------------------------------------------------------

    async def test_corrupt_qa_row_is_skipped_with_a_warning(self, backend, corrupt_qa_row, caplog):
        await _qa(backend, "q1")
        await corrupt_qa_row(backend, U, S)
        await _qa(backend, "q2")
        with caplog.at_level(logging.WARNING, logger="memlab.cache"):
            assert await _qa_ids(backend) == ["q1", "q2"]
            log = await backend.read_qa_log(U, S)
            assert [e.qa_id for e in log.entries] == ["q1", "q2"]
        assert any("unreadable" in record.getMessage() for record in caplog.records)
        assert await backend.update_qa_entry(U, S, "q2", feedback_score=4)
        assert await backend.delete_qa_entry(U, S, "q1")
        assert [(e.qa_id, e.feedback_score) for e in await backend.get_all_qa_entries(U, S)] == [("q2", 4)]

    async def test_corrupt_context_row_is_skipped_with_a_warning(self, backend, corrupt_context_row, caplog):
        await _ctx(backend, "c1")
        await corrupt_context_row(backend, U, S)
        await _ctx(backend, "c2")
        with caplog.at_level(logging.WARNING, logger="memlab.cache"):
            assert await _ctx_ids(backend) == ["c1", "c2"]
        assert any("unreadable" in record.getMessage() for record in caplog.records)

    # -- lifecycle and concurrency -----------------------------------------------------

    async def test_open_and_close_are_idempotent(self, backend):
        await backend.open()
        await _qa(backend, "q1")
        await backend.close()
        await backend.close()
        await backend.open()
        await backend.open()
        await _qa(backend, "q2")
        assert "q2" in await _qa_ids(backend)
        await backend.close()
        async with backend as cache:
            assert cache is backend
            await _qa(backend, "q3")
            assert "q3" in await _qa_ids(backend)
        await backend.open()  # leave it open for the fixture's teardown

    async def test_concurrent_writes_are_all_kept(self, backend):
        ids = [f"q{i}" for i in range(20)]
        await asyncio.gather(*(_qa(backend, qa_id) for qa_id in ids), *(_ctx(backend, f"c{i}") for i in range(5)))
        stored = await _qa_ids(backend)
        assert sorted(stored) == sorted(ids)
        log = await backend.read_qa_log(U, S)
        assert [e.qa_id for e in log.entries] == stored
        assert sorted(await _ctx_ids(backend)) == [f"c{i}" for i in range(5)]

    async def test_a_burst_of_300_concurrent_writes_is_all_stored(self, backend):
        """More concurrent calls than any connection pool holds: callers wait, no write is dropped."""
        ids = [f"burst-{i:03d}" for i in range(300)]
        await asyncio.gather(*(_qa(backend, qa_id) for qa_id in ids))
        assert sorted(await _qa_ids(backend)) == ids
        reads = await asyncio.gather(*(backend.get_latest_qa_entries(U, S, 10) for _ in range(300)))
        assert all([e.qa_id for e in read] == [e.qa_id for e in reads[0]] and len(read) == 10 for read in reads)

    async def test_concurrent_reads_see_whole_writes(self, backend):
        await _qa(backend, "q0")

        async def reader() -> list[int]:
            return [len(await backend.get_all_qa_entries(U, S)) for _ in range(5)]

        results = await asyncio.gather(reader(), *(_qa(backend, f"q{i}") for i in range(1, 6)), reader())
        for counts in (results[0], results[-1]):
            assert counts == sorted(counts) and all(1 <= n <= 6 for n in counts)
        assert len(await backend.get_all_qa_entries(U, S)) == 6
