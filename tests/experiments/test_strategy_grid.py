"""Grids that vary strategy objects (MemoryStack keywords) beside the built-ins, on the conversational benchmark."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from memlab.cache import MemoryCache
from memlab.config import CacheConfig, EmbeddingConfig, StackConfig
from memlab.exceptions import ConfigError
from memlab.experiments import ConversationalBenchmark, Grid, Workload, WorkloadResult
from memlab.models import SessionQAEntry
from memlab.session.retrievers import KeywordIndex, KeywordSessionRetriever, SessionRetriever
from memlab.ttl import SlidingTTL

BASE = StackConfig(embedding=EmbeddingConfig(model="memlab/hashing"), cache=CacheConfig(backend="memory"))
WORKLOAD = ConversationalBenchmark(size="tiny", limit=4)


class FirstTokens(SessionRetriever[KeywordIndex]):
    """A user-written retriever: keyword ranking cut to ``keep`` hits; counts its searches (state a run must not share)."""

    name: ClassVar[str] = "first-tokens"

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self.searches = 0

    def fingerprint(self) -> dict[str, Any]:
        return {"keep": self.keep}

    def new_index(self) -> KeywordIndex:
        return KeywordIndex()

    async def search(self, index: KeywordIndex, query: str, top_k: int) -> list[tuple[SessionQAEntry, float]]:
        self.searches += 1
        return [(entry, float(score)) for entry, score in index.search(query, min(top_k, self.keep))]


class Unmarked(FirstTokens):
    """The same without a fingerprint: its results cannot be cached."""

    fingerprint = None  # type: ignore[assignment]


def _ok(frame: Any) -> None:
    assert (frame["status"] == "ok").all(), frame["error"].dropna().tolist()


async def test_a_user_retriever_class_and_instance_beside_the_keyword_one_labelled_and_cached(tmp_path):
    mine = FirstTokens(keep=2)
    vary = {"session_retriever": [KeywordSessionRetriever(), FirstTokens, mine]}
    grid = Grid(BASE, vary, WORKLOAD, cache_dir=tmp_path)
    assert [cell.label() for cell in grid.cells] == [
        "session_retriever=KeywordSessionRetriever()", "session_retriever=FirstTokens(keep=3)", "session_retriever=FirstTokens(keep=2)",
    ]
    frame = await grid.run(progress=False)
    _ok(frame)
    assert set(frame["session_retriever"]) == {"KeywordSessionRetriever()", "FirstTokens(keep=3)", "FirstTokens(keep=2)"}
    assert not frame["cached"].any() and mine.searches == 0  # each run searched with a fresh copy
    recall = frame[frame["metric"] == "hit_at_5"].set_index("session_retriever")["value"]
    assert recall["FirstTokens(keep=2)"] <= recall["FirstTokens(keep=3)"] <= recall["KeywordSessionRetriever()"]

    again = await Grid(BASE, vary, WORKLOAD, cache_dir=tmp_path).run(progress=False)
    assert again["cached"].all()  # keyed by the fingerprints: the second run reads the cache
    changed = await Grid(BASE, {"session_retriever": [FirstTokens(keep=1)]}, WORKLOAD, cache_dir=tmp_path).run(progress=False)
    assert not changed["cached"].any()


async def test_a_retriever_without_a_fingerprint_runs_uncached_with_a_warning(tmp_path):
    grid = Grid(BASE, {"session_retriever": [Unmarked(keep=2)]}, WORKLOAD, cache_dir=tmp_path)
    assert grid.cells[0].label() == "session_retriever=Unmarked(keep=2)" and grid.keys[(0, 0)] is None
    for _ in range(2):
        with pytest.warns(UserWarning, match=r"Unmarked declares no fingerprint\(\).*run uncached"):
            frame = await grid.run(progress=False)
        _ok(frame)
        assert not frame["cached"].any()
    assert not list(tmp_path.glob("*.json"))


async def test_the_stack_cache_mode_gets_the_objects_too():
    frame = await Grid(BASE, {"session_retriever": [FirstTokens(keep=1)], "ttl": [SlidingTTL(60)]},
                       ConversationalBenchmark(size="tiny", limit=2, cache="stack")).run(progress=False)
    _ok(frame)


@pytest.mark.parametrize(
    ("vary", "match"),
    [
        ({"session_retriever": ["keyword"]}, r"'session_retriever' must hold session retriever objects"),
        ({"session_retriever": [MemoryCache()]}, r"session retriever objects .*got MemoryCache"),
        ({"session_retriever": [SessionRetriever]}, r"abstract"),
        ({"cache": [SlidingTTL]}, r"not a cache backend"),
        ({"session_retriever": [FirstTokens(), FirstTokens()]}, r"two values are labelled FirstTokens\(keep=3\)"),
        ({"session_retriever": [FirstTokens()], "session.retriever": ["keyword", "bm25"]}, r"both decide session.retriever"),
        ({"cache": [MemoryCache()], "ttl": [SlidingTTL(5)]}, r"ttl object beside it is ambiguous"),
        ({"cache": [MemoryCache()], "ttl.seconds": [5, 10]}, r"'cache' \(objects\) and 'ttl.seconds' both decide ttl"),
        ({"cache": [MemoryCache()], "ttl": [{"policy": "fixed"}, {"policy": "sliding"}]}, r"both decide ttl"),
        ({"cache": [MemoryCache(), {"backend": "sqlite"}]}, r"mixes strategy objects and cache section values"),
    ],
)
def test_a_wrong_value_is_a_config_error_before_anything_runs(vary, match):
    with pytest.raises(ConfigError, match=match):
        Grid(BASE, vary, WORKLOAD)


def test_a_workload_that_takes_no_objects_is_refused():
    class Plain(Workload):
        name = "plain"

        def fingerprint(self) -> dict[str, Any]:
            return {}

        async def run(self, config: StackConfig, seed: int) -> WorkloadResult:
            return WorkloadResult({}, {})

    with pytest.raises(ConfigError, match=r"Plain.run\(\) takes no objects="):
        Grid(BASE, {"session_retriever": [FirstTokens()]}, Plain())
