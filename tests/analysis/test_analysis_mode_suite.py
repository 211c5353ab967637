"""Every built-in analysis mode against the shipped AnalysisModeSuite, and proof the suite can fail."""

from __future__ import annotations

from typing import Any

import pytest

from memlab.analysis import AnalysisMode, ConcurrentMode, OffMode, SequentialMode, TurnPort
from memlab.config import AnalysisConfig
from memlab.testing import AnalysisModeSuite

MODES = {"concurrent": ConcurrentMode, "sequential": SequentialMode, "off": OffMode}


@pytest.fixture(params=[True, False], ids=["auto_feedback", "no_feedback"])
def auto_feedback(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


class TestConcurrent(AnalysisModeSuite):
    @pytest.fixture
    def analysis_mode(self, auto_feedback: bool) -> AnalysisMode:
        return ConcurrentMode(AnalysisConfig(auto_feedback=auto_feedback))


class TestSequential(AnalysisModeSuite):
    @pytest.fixture
    def analysis_mode(self, auto_feedback: bool) -> AnalysisMode:
        return SequentialMode(AnalysisConfig(auto_feedback=auto_feedback))


class TestOff(AnalysisModeSuite):
    @pytest.fixture
    def analysis_mode(self, auto_feedback: bool) -> AnalysisMode:
        return OffMode(AnalysisConfig(search_mode="off", auto_feedback=auto_feedback))


class _AnswerTwice(AnalysisMode):
    """Broken on purpose: answers and commits twice."""

    name = "answer_twice"

    async def run(self, port: TurnPort) -> Any:
        await port.commit(await port.answer(port.query, None), None)
        return await port.commit(await port.answer(port.query, None), None)


class _UnguardedAnalysis(AnalysisMode):
    """Broken on purpose: calls the port's analysis without failing open."""

    name = "unguarded"

    async def run(self, port: TurnPort) -> Any:
        await port.analyze(await port.load())
        return await port.commit(await port.answer(port.query, None), None)


def test_the_suite_rejects_a_mode_that_stores_twice() -> None:
    with pytest.raises(AssertionError):
        AnalysisModeSuite().test_one_turn_is_stored_once(analysis_mode=_AnswerTwice(AnalysisConfig()))


def test_the_suite_rejects_a_mode_that_lets_analysis_errors_out() -> None:
    with pytest.raises(RuntimeError, match="analysis exploded"):
        AnalysisModeSuite().test_a_failed_analysis_fails_open(analysis_mode=_UnguardedAnalysis(AnalysisConfig()))
