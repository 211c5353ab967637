"""The :class:`~memlab.analysis.AnalysisMode` conformance suite.

Subclass :class:`AnalysisModeSuite` in a test module and provide an
``analysis_mode`` fixture; the suite runs the mode's turns through
:class:`RecordingPort`, a real :class:`~memlab.analysis.TurnPort` that records
every call, and checks only what the base contract promises for every mode::

    import pytest
    from memlab.config import AnalysisConfig
    from memlab.testing import AnalysisModeSuite

    class TestMyMode(AnalysisModeSuite):
        @pytest.fixture
        def analysis_mode(self):
            return MyMode(AnalysisConfig())

Modes hold no state between turns, so the fixture's mode serves every hypothesis
example. Register the module for assertion rewriting in your root ``conftest.py``:
``pytest.register_assert_rewrite("memlab.testing.analysis_suite")``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.analysis import AnalysisMode, SessionTurnAnalysis, TurnPort, TurnState
from memlab.models import SessionQAEntry
from memlab.retrievers import Completion

__all__ = ["AnalysisModeSuite", "RecordingPort"]

_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])


def _analysis_failed() -> RuntimeError:
    """What the port's analysis raises when told to fail."""
    return RuntimeError("analysis exploded")


class RecordingPort(TurnPort):
    """A turn's I/O in memory: fixed previous turns, a scripted analysis, answers as :class:`Completion`, every call recorded.

    ``analysis``: what :meth:`analyze` returns, or an exception instance it raises.
    ``fail_answer``: :meth:`answer` raises :attr:`answer_error`. ``calls`` lists
    ``(method, args)`` in order; ``notes`` collects :meth:`note`'s facts.
    """

    def __init__(self, query: str, *, session_available: bool = True, previous: list[tuple[str, str]] | None = None,
                 analysis: Any = None, fail_answer: bool = False) -> None:
        self.query = query
        self.session_available = session_available
        self.previous = previous or []
        self.analysis = analysis
        self.fail_answer = fail_answer
        self.answer_error = RuntimeError("the answer call failed")
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.notes: dict[str, Any] = {}
        self.completions: list[Completion] = []
        self.results: list[Any] = []

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    async def load(self) -> TurnState:
        self.calls.append(("load", ()))
        if not self.session_available:
            return TurnState()
        turns = [SessionQAEntry(time="2026-01-01T00:00:00Z", question=q, context="", answer=a, qa_id=f"qa{i}")
                 for i, (q, a) in enumerate(self.previous[-2:])]
        return TurnState(last_two=turns, served=[], guidance_entries=[])

    async def analyze(self, state: TurnState) -> Any:
        self.calls.append(("analyze", (state,)))
        await asyncio.sleep(0)
        if isinstance(self.analysis, BaseException):
            raise self.analysis
        return self.analysis

    async def apply(self, analysis: Any, state: TurnState) -> None:
        self.calls.append(("apply", (analysis, state)))

    async def guidance(self, query: str, entries: list[Any] | None = None) -> Any:
        self.calls.append(("guidance", (query, entries)))
        return {"block": "", "ids": []}

    async def answer(self, query: str, guidance: Any, *, rewrite: str | None = None) -> Any:
        self.calls.append(("answer", (query, guidance, rewrite)))
        await asyncio.sleep(0)
        if self.fail_answer:
            raise self.answer_error
        completion = Completion(text=f"answer to {query}", context=[])
        self.completions.append(completion)
        return completion

    async def commit(self, completion: Any, guidance: Any) -> Any:
        self.calls.append(("commit", (completion, guidance)))
        result = ("committed", len(self.results))
        self.results.append(result)
        return result

    async def acknowledge(self, text: str) -> Any:
        self.calls.append(("acknowledge", (text,)))
        result = ("acknowledged", len(self.results))
        self.results.append(result)
        return result

    def note(self, **facts: Any) -> None:
        self.calls.append(("note", tuple(sorted(facts))))
        self.notes.update(facts)


_TEXT = st.sampled_from(["", "apple", "what about bananas?", "thanks, that helped", "and cherries"])
_ANALYSES = st.one_of(
    st.none(),
    st.builds(_analysis_failed),
    st.builds(SessionTurnAnalysis, response_to_user=st.one_of(st.none(), _TEXT), query_to_answer=st.one_of(st.none(), _TEXT),
              previous_answer_rating=st.one_of(st.none(), st.integers(min_value=1, max_value=5))),
)
_PORTS = st.builds(
    RecordingPort,
    st.sampled_from(["apple", "What about it?", "  tell   me more  ", "thanks"]),
    session_available=st.booleans(),
    previous=st.lists(st.tuples(_TEXT, _TEXT), max_size=3),
    analysis=_ANALYSES,
)


def _run(mode: AnalysisMode, port: RecordingPort) -> Any:
    return asyncio.run(mode.run(port))


class AnalysisModeSuite:
    """The :class:`~memlab.analysis.AnalysisMode` contract; subclasses provide an ``analysis_mode`` fixture."""

    @pytest.fixture
    def analysis_mode(self) -> AnalysisMode:
        raise NotImplementedError("an AnalysisModeSuite subclass must provide an `analysis_mode` fixture")

    def test_name_is_stable(self, analysis_mode: AnalysisMode) -> None:
        name = analysis_mode.name
        assert isinstance(name, str) and name, f"name must be a non-empty str, got {name!r}"
        assert type(analysis_mode).name == name == analysis_mode.name, "name must be the class's, the same every read"
        assert isinstance(analysis_mode.analyzes, bool), f"analyzes is {analysis_mode.analyzes!r}, not a bool"

    def test_fallback_is_a_mode(self, analysis_mode: AnalysisMode) -> None:
        fallback = analysis_mode.fallback()
        assert isinstance(fallback, AnalysisMode), f"fallback() returned {type(fallback).__name__}"
        assert isinstance(fallback.fallback(), AnalysisMode)

    @_SETTINGS
    @given(port=_PORTS)
    def test_one_turn_is_stored_once(self, analysis_mode: AnalysisMode, port: RecordingPort) -> None:
        result = _run(analysis_mode, port)
        names = port.names()
        stored = [name for name in names if name in ("commit", "acknowledge")]
        assert len(stored) == 1, f"commit/acknowledge called {stored}: {names}"
        assert result == port.results[0], f"run returned {result!r}, not what {stored[0]} returned"
        assert names.count("answer") <= 1, f"answer called {names.count('answer')} times: {names}"
        assert names[-1] == stored[0], f"{stored[0]} was not the last call: {names}"
        if stored == ["commit"]:
            assert names.count("answer") == 1, f"a committed turn was not answered: {names}"
            committed = next(args for name, args in port.calls if name == "commit")
            assert committed[0] is port.completions[0], "commit did not get the answer's completion"
        else:
            assert "answer" not in names, f"an acknowledged turn was answered: {names}"

    @_SETTINGS
    @given(port=_PORTS)
    def test_analysis_only_when_the_mode_analyzes(self, analysis_mode: AnalysisMode, port: RecordingPort) -> None:
        _run(analysis_mode, port)
        names = port.names()
        assert names.count("analyze") <= 1, f"analysis called {names.count('analyze')} times: {names}"
        if not analysis_mode.analyzes:
            assert "analyze" not in names and "apply" not in names, f"a mode that does not analyze did: {names}"
        applied = [args[0] for name, args in port.calls if name == "apply"]
        assert len(applied) <= 1 and all(item is port.analysis and item is not None for item in applied), \
            f"apply got something the analysis did not return: {applied!r}"

    @_SETTINGS
    @given(port=_PORTS)
    def test_a_failed_analysis_fails_open(self, analysis_mode: AnalysisMode, port: RecordingPort) -> None:
        port.analysis = _analysis_failed()
        result = _run(analysis_mode, port)  # must not raise
        names = port.names()
        assert result == port.results[0]
        if "analyze" in names:
            assert port.notes.get("analysis_error"), f"a failed analysis was not noted: {port.notes!r}"
            assert "apply" not in names, "a failed analysis was applied"
            answered = [args[0] for name, args in port.calls if name == "answer"]
            assert answered == [port.query], f"a turn without analysis was not answered for the raw query: {answered!r}"

    @_SETTINGS
    @given(port=_PORTS)
    def test_answer_errors_propagate(self, analysis_mode: AnalysisMode, port: RecordingPort) -> None:
        port.fail_answer = True
        try:
            _run(analysis_mode, port)
        except RuntimeError as exc:
            assert exc is port.answer_error, f"run raised {exc!r}, not the answer's error"
            assert "commit" not in port.names(), "a turn whose answer failed was committed"
        else:
            assert "answer" not in port.names(), "the answer failed but run did not raise"
