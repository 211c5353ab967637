"""``memlab.testing.check``: the right suite on one strategy of each family, without pytest; a broken policy is named."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from memlab.analysis import SequentialMode
from memlab.config import AnalysisConfig
from memlab.embeddings import HashingEmbedder
from memlab.merge import DualLaneMerge, MergePolicy
from memlab.retrievers import ChunksRetriever
from memlab.session.retrievers import BM25SessionRetriever
from memlab.testing import Report, check
from memlab.ttl import SlidingTTL


@pytest.mark.parametrize(
    ("obj", "suite"),
    [
        (DualLaneMerge(), "MergePolicySuite"),
        (SlidingTTL(3600), "TTLPolicySuite"),
        (BM25SessionRetriever(), "SessionRetrieverSuite"),
        (SequentialMode(AnalysisConfig()), "AnalysisModeSuite"),
        (ChunksRetriever(), "RetrieverSuite"),
        (HashingEmbedder(dim=32), "EmbedderSuite"),
    ],
    ids=["merge", "ttl", "session-retriever", "analysis-mode", "retriever", "embedder"],
)
def test_a_built_in_of_each_family_passes(obj: Any, suite: str) -> None:
    report = check(obj)
    assert isinstance(report, Report) and report.suite == suite
    assert report.ok, report.failed
    assert report.passed and not report.failed
    assert "ok" in repr(report) and "<table" in report._repr_html_()


class _Concatenate(MergePolicy):
    """Broken on purpose: both lanes end to end, no de-duplication, no limit."""

    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        return (raw or []) + (rewrite or [])


def test_a_broken_merge_policy_is_not_ok_and_named() -> None:
    report = check(_Concatenate())
    assert not report.ok
    assert "test_result_never_exceeds_limit" in report.failed
    assert "test_no_identity_twice" in report.failed
    assert "AssertionError" in report.failed["test_result_never_exceeds_limit"]
    assert "test_bad_arguments_raise_validation_error[limit-negative]" in report.passed  # the base class validates
    assert "NOT ok" in report._repr_html_()


def test_parametrized_cases_are_run_one_by_one() -> None:
    report = check(DualLaneMerge())
    cases = [name for name in report.passed if name.startswith("test_bad_arguments_raise_validation_error[")]
    assert len(cases) == 10


async def test_check_works_inside_a_running_loop() -> None:
    report = check(BM25SessionRetriever())  # a notebook cell: the suites' own event loops run in a thread
    assert report.ok, report.failed
    assert asyncio.get_running_loop() is not None


def test_an_object_of_no_family_is_refused() -> None:
    with pytest.raises(TypeError, match="no family|families"):
        check(object())


def test_to_frame() -> None:
    pd = pytest.importorskip("pandas")
    frame = check(SlidingTTL(60)).to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["test", "status", "message"]
    assert set(frame["status"]) == {"passed"}
