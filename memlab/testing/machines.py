"""Hypothesis state machines for cache backends.

:class:`CacheAgreementMachine` drives one backend under test and a
:class:`~memlab.cache.MemoryCache` model in lockstep: every rule runs the same
call on both, at the same :class:`~memlab.testing.FakeClock` time, and demands
the same result (or the same :class:`~memlab.exceptions.MemlabError` type).
Invariants compare every session's turns and context entries after each step;
``read_qa_log`` is followed incrementally per backend and the view it builds
must equal the backend's turns. Both sides use the exact
:class:`~memlab.ttl.SlidingTTL`, so expiry happens at the same instant (the
slack of ``lazy_slack`` is covered by property tests instead).

Ids come from tiny alphabets (two users, two sessions, three qa / context ids)
so that collisions, duplicates and deletes of existing rows happen often. Pick
the backend with :func:`agreement_machine`::

    from functools import partial
    from hypothesis.stateful import run_state_machine_as_test
    from memlab.testing.machines import agreement_machine
    from memlab.testing.suppliers import supply_backend

    run_state_machine_as_test(agreement_machine(partial(supply_backend, "sqlite")))

The machine owns one event loop (async drivers are bound to the loop that
opened them), creates it in ``__init__`` and closes it in ``teardown``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule

from memlab.cache import CacheBackend
from memlab.cache import MemoryCache
from memlab.exceptions import MemlabError
from memlab.testing._clock import FakeClock
from memlab.ttl import SlidingTTL

__all__ = ["BackendFactory", "CacheAgreementMachine", "agreement_machine"]

T = TypeVar("T")

#: ``factory(tmp_path=, ttl=, clock=, purge_interval_seconds=)`` -> async context manager yielding an open backend
BackendFactory = Callable[..., AbstractAsyncContextManager[CacheBackend]]

USERS = ("u1", "u2")
SESSIONS = ("s1", "s2")
QA_IDS = ("q1", "q2", "q3")
CONTEXT_IDS = ("c1", "c2", "c3")



def _rarely(valid: st.SearchStrategy, invalid: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly ``valid``, one draw in ten ``invalid``; shrinks towards valid."""
    return st.tuples(st.integers(0, 9), valid, invalid).map(lambda t: t[2] if t[0] == 9 else t[1])


_texts = st.sampled_from(["", "a", "b c", "what now?"])
_scores = _rarely(st.none() | st.integers(1, 5), st.sampled_from([0, 6]))  # 0 and 6: both sides must raise
_metadata_values = st.integers(0, 2) | st.booleans() | st.sampled_from(["x", "y"]) | st.lists(st.sampled_from(["t1", "t2"]), max_size=2)
_metadata = _rarely(
    st.none() | st.dictionaries(st.sampled_from(["a", "b", "c"]), _metadata_values, max_size=2),
    st.just({"bad": {"nested": 1}}),
)
_context_fields = st.dictionaries(st.sampled_from(["v", "w"]), st.integers(0, 3), max_size=2)


class CacheAgreementMachine(RuleBasedStateMachine):
    """One backend under test against the memory model. Subclass via :func:`agreement_machine`."""

    #: builds the backend under test (see :data:`BackendFactory`)
    factory: ClassVar[BackendFactory | None] = None
    ttl_seconds: ClassVar[float] = 100.0
    #: > TTL, so that write-triggered sweeps happen sometimes, not on every write
    purge_interval_seconds: ClassVar[float] = 150.0

    users = Bundle("users")
    sessions = Bundle("sessions")
    #: (user, session, qa_id) of every turn ever appended (it may be gone since)
    turns = Bundle("turns")
    #: (user, session, entry_id) of every context entry ever written
    contexts = Bundle("contexts")

    def __init__(self) -> None:
        super().__init__()
        factory = type(self).factory
        if factory is None:
            raise TypeError("CacheAgreementMachine needs a backend factory: use agreement_machine(factory)")
        self.loop = asyncio.new_event_loop()
        self.tmp_path = Path(tempfile.mkdtemp(prefix="memlab-machine-"))
        self._sut_context: AbstractAsyncContextManager[CacheBackend] | None = None
        self.pruned = False
        #: (reader, side, user, session) -> (cursor, view built from read_qa_log)
        self.logs: dict[tuple[str, str, str, str], tuple[Any, list]] = {}
        try:
            self.clock = FakeClock()
            common = {"clock": self.clock, "purge_interval_seconds": self.purge_interval_seconds}
            self.model = MemoryCache(ttl=SlidingTTL(self.ttl_seconds), **common)
            self.run(self.model.open())
            context = factory(tmp_path=self.tmp_path, ttl=SlidingTTL(self.ttl_seconds), **common)
            self.sut = self.run(context.__aenter__())
            self._sut_context = context
        except BaseException:
            self._dispose()
            raise

    # -- plumbing ----------------------------------------------------------------------

    def run(self, awaitable: Coroutine[Any, Any, T] | Awaitable[T]) -> T:
        return self.loop.run_until_complete(awaitable)

    def _outcome(self, backend: CacheBackend, call: Callable[[CacheBackend], Awaitable[Any]]) -> tuple[str, Any]:
        try:
            return "returned", self.run(call(backend))
        except MemlabError as exc:
            return "raised", type(exc).__name__

    def both(self, call: Callable[[CacheBackend], Awaitable[Any]], what: str) -> tuple[str, Any]:
        """Run ``call`` on the model, then on the backend under test; they must agree.

        Returns the outcome: ``("returned", value)`` or ``("raised", error type name)``.
        """
        expected = self._outcome(self.model, call)
        actual = self._outcome(self.sut, call)
        assert actual == expected, f"{what}: {self.sut.name} {actual[0]} {actual[1]!r}, model {expected[0]} {expected[1]!r}"
        return expected

    def teardown(self) -> None:
        try:
            if self._sut_context is not None:
                context, self._sut_context = self._sut_context, None
                self.run(context.__aexit__(None, None, None))
            self.run(self.model.close())
        finally:
            self._dispose()

    def _dispose(self) -> None:
        try:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
            shutil.rmtree(self.tmp_path, ignore_errors=True)

    def _follow(self, reader: str, user: str, session: str, turns: list) -> None:
        """Advance ``reader``'s read_qa_log view on each side; it must equal the session's ``turns``."""
        for side, backend in (("model", self.model), ("sut", self.sut)):
            cursor, view = self.logs.get((reader, side, user, session), (None, []))
            log = self.run(backend.read_qa_log(user, session, cursor))
            view = list(log.entries) if log.reset else [*view, *log.entries]
            self.logs[(reader, side, user, session)] = (log.cursor, view)
            assert view == turns, f"{backend.name}: {reader} read_qa_log view of ({user}, {session}) is {view}, turns are {turns}"

    def _turns(self, user: str, session: str) -> list:
        """The session's turns, the same on both sides."""
        return self.both(lambda b: b.get_all_qa_entries(user, session), f"get_all_qa_entries({user}, {session})")[1]

    # -- ids -----------------------------------------------------------------------------

    @initialize(target=users)
    def init_users(self):
        return multiple(*USERS)

    @initialize(target=sessions)
    def init_sessions(self):
        return multiple(*SESSIONS)

    # -- QA rules ------------------------------------------------------------------------

    @rule(target=turns, user=users, session=sessions, qa_ids=st.lists(st.sampled_from(QA_IDS), min_size=1, max_size=3),
          question=_texts, answer=_texts, feedback_score=_scores, memify_metadata=_metadata)
    def append(self, user, session, qa_ids, question, answer, feedback_score, memify_metadata):
        """Append one to three turns (a repeated id must fail on both sides)."""
        added = []
        for qa_id in qa_ids:
            outcome = self.both(
                lambda b: b.create_qa_entry(
                    user, session, question=question, answer=answer, qa_id=qa_id,
                    feedback_score=feedback_score, memify_metadata=memify_metadata,
                ),
                f"create_qa_entry({user}, {session}, {qa_id})",
            )
            if outcome[0] == "returned":
                added.append((user, session, qa_id))
        return multiple(*added)

    @rule(turn=turns, answer=st.none() | _texts, feedback_text=st.none() | _texts, feedback_score=_scores,
          memify_metadata=_metadata)
    def update(self, turn, answer, feedback_text, feedback_score, memify_metadata):
        user, session, qa_id = turn
        self.both(
            lambda b: b.update_qa_entry(
                user, session, qa_id, answer=answer, feedback_text=feedback_text,
                feedback_score=feedback_score, memify_metadata=memify_metadata,
            ),
            f"update_qa_entry({user}, {session}, {qa_id})",
        )

    @rule(turn=turns)
    def delete_feedback(self, turn):
        user, session, qa_id = turn
        self.both(lambda b: b.delete_feedback(user, session, qa_id), f"delete_feedback({user}, {session}, {qa_id})")

    @rule(turn=turns)
    def delete_qa(self, turn):
        user, session, qa_id = turn
        self.both(lambda b: b.delete_qa_entry(user, session, qa_id), f"delete_qa_entry({user}, {session}, {qa_id})")

    @rule(user=users, session=sessions)
    def delete_session(self, user, session):
        self.both(lambda b: b.delete_session(user, session), f"delete_session({user}, {session})")

    @rule(user=users, session=sessions, last_n=st.integers(1, 4))
    def follow_log(self, user, session, last_n):
        """A lazy reader: follows one session's read_qa_log now and then, across many changes."""
        self._follow("lazy", user, session, self._turns(user, session))
        self.both(lambda b: b.get_latest_qa_entries(user, session, last_n), f"get_latest_qa_entries({user}, {session}, {last_n})")

    # -- context rules -------------------------------------------------------------------

    @rule(target=contexts, user=users, session=sessions, entry_id=st.sampled_from(CONTEXT_IDS), fields=_context_fields)
    def upsert_context(self, user, session, entry_id, fields):
        self.both(
            lambda b: b.create_session_context_entry(user, session, {"id": entry_id, **fields}),
            f"create_session_context_entry({user}, {session}, {entry_id})",
        )
        return (user, session, entry_id)

    @rule(entry=contexts, changes=_context_fields)
    def update_context(self, entry, changes):
        user, session, entry_id = entry
        self.both(
            lambda b: b.update_session_context_entry(user, session, entry_id, changes),
            f"update_session_context_entry({user}, {session}, {entry_id})",
        )

    @rule(entry=contexts)
    def delete_context(self, entry):
        user, session, entry_id = entry
        self.both(
            lambda b: b.delete_session_context_entry(user, session, entry_id),
            f"delete_session_context_entry({user}, {session}, {entry_id})",
        )

    # -- time and maintenance ------------------------------------------------------------

    # 0..0.6·TTL, so expiry takes a few steps and lands on exact boundaries. Two rules
    # (hypothesis has no rule weights) so that several TTLs pass within one example.
    @rule(percent=st.integers(0, 60))
    def advance(self, percent):
        self.clock.advance(percent * self.ttl_seconds / 100.0)

    @rule(percent=st.integers(25, 60))
    def advance_more(self, percent):
        self.clock.advance(percent * self.ttl_seconds / 100.0)

    @rule()
    def sweep(self):
        self.both(lambda b: b.sweep(), "sweep()")

    @precondition(lambda self: not self.pruned)
    @rule()
    def prune(self):
        """At most once per run: it wipes every session."""
        self.pruned = True
        self.both(lambda b: b.prune(), "prune()")

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def same_sessions(self):
        """Every session reads the same on both sides, and an eager log reader keeps up with it."""
        for user in USERS:
            for session in SESSIONS:
                turns = self._turns(user, session)
                self.both(
                    lambda b: b.get_session_context_entries(user, session), f"get_session_context_entries({user}, {session})"
                )
                self._follow("eager", user, session, turns)


def agreement_machine(factory: BackendFactory, *, name: str | None = None) -> type[CacheAgreementMachine]:
    """A :class:`CacheAgreementMachine` whose backend under test comes from ``factory``.

    ``factory`` is called as ``factory(tmp_path=..., ttl=..., clock=..., purge_interval_seconds=...)``
    and must return an async context manager yielding an open backend, e.g.
    ``functools.partial(supply_backend, "sqlite")``.
    """
    label = "".join(ch if ch.isalnum() else "_" for ch in (name or "backend"))
    cls_name = f"CacheAgreementMachine_{label}"
    return type(cls_name, (CacheAgreementMachine,), {"factory": staticmethod(factory), "__module__": __name__})
