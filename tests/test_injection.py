"""Objects in, names optional (issue 23): strategy objects passed to ``MemoryStack`` are the ones used.

Each family gets a user-written implementation (defined here, as a researcher would) or a
memlab backend built by hand; a wrong type is a ``ConfigError`` naming the family and base
class before anything touches the data root; ``from_config`` / ``from_env`` take the same
keywords; and the documented precedence rules between passed objects and the config hold.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from memlab import ConfigError, MemoryStack, SearchType, StackConfig
from memlab.analysis import AnalysisMode, SequentialMode
from memlab.cache import MemoryCache, SQLCache
from memlab.clock import Clock, SystemClock
from memlab.config import AnalysisConfig, CacheConfig, MergeConfig, SessionConfig, TTLConfig
from memlab.embeddings import HashingEmbedder
from memlab.llm import LLMClient
from memlab.merge import MergePolicy, RRFMerge
from memlab.retrievers import ChunksRetriever, Retrievers
from memlab.session.retrievers import SessionIndex, SessionRetriever, VectorSessionRetriever
from memlab.testing import FakeClock, fast_config
from memlab.ttl import SlidingTTL, TTLPolicy

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."


# -- user-written strategies -------------------------------------------------------------------


class RecencySessionRetriever(SessionRetriever[SessionIndex]):
    """Ranks a session's turns newest first, whatever the query says."""

    name = "recency"

    def __init__(self) -> None:
        self.searches = 0

    def new_index(self) -> SessionIndex:
        return SessionIndex()

    async def search(self, index: SessionIndex, query: str, top_k: int) -> list[tuple[Any, float]]:
        self.searches += 1
        entries = list(index.entries)
        return [(entry, float(position + 1)) for position, entry in reversed(list(enumerate(entries)))][: max(top_k, 0)]


class RawLaneMerge(MergePolicy):
    """Keeps only the raw-query lane, and remembers what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[Any] | None, list[Any] | None]] = []

    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        self.calls.append((raw, rewrite))
        return list(raw or [])[:limit]


class FixedWindowTTL(TTLPolicy):
    """Expiry counts from a session's first write: later writes never extend it."""

    name = "fixed_window"

    def restamp_cutoff(self, now: datetime) -> datetime | None:
        return now if self.enabled else None


class AuditedSequential(AnalysisMode):
    """memlab's sequential mode, wrapped to count the turns it runs."""

    name = "audited_sequential"

    def __init__(self, config: AnalysisConfig) -> None:
        super().__init__(config)
        self.inner = SequentialMode(config)
        self.turns = 0

    async def run(self, port: Any) -> Any:
        self.turns += 1
        return await self.inner.run(port)


class CountingLLM(LLMClient):
    """The offline client, counting its calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def complete(self, messages: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return await super().complete(messages, **kwargs)


class CountingChunks(ChunksRetriever):
    """memlab's CHUNKS retriever, counting its searches."""

    def __init__(self) -> None:
        super().__init__()
        self.searches = 0

    async def get_context(self, query: str, scope: Any) -> Any:
        self.searches += 1
        return await super().get_context(query, scope)


# -- each family: the passed object is the one used -------------------------------------------


async def test_a_hand_built_cache_is_the_stack_cache(tmp_path) -> None:
    clock = FakeClock()
    cache = SQLCache(f"sqlite:///{tmp_path / 'own-cache.db'}", clock=clock)
    async with MemoryStack(fast_config(tmp_path / "root"), cache=cache) as stack:
        assert stack.cache is cache and stack.clock is clock  # the stack adopts the cache's clock
        await stack.remember("kept in my cache", session_id="s")
        user = await stack.users.default()
        assert [entry.answer for entry in await cache.get_all_qa_entries(str(user.id), "s")] == ["kept in my cache"]
        assert [entry.time for entry in await stack.session.get_session(session_id="s")] == [clock.now().isoformat()]
    assert (tmp_path / "own-cache.db").exists() and not (tmp_path / "root" / "cache.db").exists()


async def test_a_passed_ttl_policy_is_the_one_the_built_cache_stamps_with(tmp_path) -> None:
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    ttl = FixedWindowTTL(100)
    async with MemoryStack(fast_config(tmp_path), ttl=ttl, clock=clock) as stack:
        assert stack.cache.ttl is ttl
        await stack.remember("first", session_id="s")
        clock.advance(60)
        await stack.remember("second", session_id="s")  # a sliding TTL would now expire at t=160
        clock.advance(39)
        assert len(await stack.session.get_session(session_id="s")) == 2
        clock.advance(1)  # t=100: the window opened by the first write is over
        assert await stack.session.get_session(session_id="s") == []


async def test_session_search_uses_the_passed_session_retriever(tmp_path) -> None:
    retriever = RecencySessionRetriever()
    async with MemoryStack(fast_config(tmp_path), session_retriever=retriever, clock=FakeClock()) as stack:
        assert stack.session_manager.retriever is retriever
        for text in ("Paris is in France.", "Berlin is in Germany.", "Rome is in Italy."):
            await stack.remember(text, session_id="s")
        results = await stack.recall("paris", session_id="s", top_k=2)
        assert [result.answer for result in results] == ["Rome is in Italy.", "Berlin is in Germany."]  # newest first
        assert retriever.searches == 1


async def test_search_turns_run_the_passed_analysis_mode_merge_policy_and_llm(tmp_path) -> None:
    config = fast_config(tmp_path)
    mode, merge, llm = AuditedSequential(config.analysis), RawLaneMerge(), CountingLLM()
    async with MemoryStack(config, analysis=mode, llm=llm, clock=FakeClock()) as stack:
        assert stack.analysis is mode and stack.llm is llm and stack.memory.llm is llm
        await stack.remember([CURIE, TURING])
        [result] = await stack.search("Who discovered Polonium?", session_id="chat")
        assert (result.raw["turn"]["mode"], result.raw["turn"]["requested_mode"]) == ("audited_sequential", "audited_sequential")
        [stored] = await stack.session.get_session(session_id="chat")
        assert stored.memify_metadata["turn_mode"] == "audited_sequential"
        assert mode.turns == 1 and llm.calls > 0
    # the merge policy: a concurrent stack's second turn has a rewrite lane to merge
    async with MemoryStack(fast_config(tmp_path / "merge"), merge=merge, clock=FakeClock()) as stack:
        assert stack.merge is merge
        await stack.remember([CURIE, TURING])
        await stack.search("Who discovered Polonium?", session_id="chat")
        [result] = await stack.search("And where did she work?", session_id="chat")
        lanes = result.raw["turn"]["lanes"]
        assert lanes["rewrite"] is not None and merge.calls and merge.calls[-1][1] is not None
        assert lanes["merged"] == lanes["raw"][: len(lanes["merged"])]  # only the raw lane survives


async def test_a_passed_embedder_serves_memory_and_the_built_vector_session_retriever(tmp_path) -> None:
    embedder = HashingEmbedder()
    config = fast_config(tmp_path, session=SessionConfig(retriever="vector"))
    async with MemoryStack(config, embedder=embedder, clock=FakeClock()) as stack:
        assert stack.embedder is embedder and stack.memory.embedder is embedder
        retriever = stack.session_manager.retriever
        assert isinstance(retriever, VectorSessionRetriever) and retriever.embedder is embedder
        await stack.remember("Polonium was discovered by Marie Curie.", session_id="s")
        assert [result.answer for result in await stack.recall("Polonium discovered", session_id="s")] == [
            "Polonium was discovered by Marie Curie."
        ]


async def test_passed_retrievers_serve_their_search_types(tmp_path) -> None:
    chunks = CountingChunks()
    async with MemoryStack(fast_config(tmp_path), retrievers={SearchType.CHUNKS: chunks}, clock=FakeClock()) as stack:
        assert stack.retrievers.get("CHUNKS") is chunks
        assert type(stack.retrievers.get(SearchType.SUMMARIES)).__name__ == "SummariesRetriever"  # the defaults stay
        await stack.remember([CURIE])
        assert await stack.search("Polonium", SearchType.CHUNKS) and chunks.searches == 1
    registry = Retrievers()
    assert MemoryStack(fast_config(tmp_path / "registry"), retrievers=registry).retrievers is registry


# -- wrong types: ConfigError naming the family and base class, before any file ----------------


WRONG = [
    ("cache", "not a cache", "cache backend", "memlab.cache.CacheBackend"),
    ("cache", MemoryCache, "cache backend", "pass an instance"),
    ("ttl", 3600, "TTL policy", "memlab.ttl.TTLPolicy"),
    ("session_retriever", "bm25", "session retriever", "memlab.session.retrievers.SessionRetriever"),
    ("analysis", SequentialMode, "analysis mode", "memlab.analysis.AnalysisMode"),
    ("merge", "rrf", "merge policy", "memlab.merge.MergePolicy"),
    ("llm", "openai/gpt-4o-mini", "LLM client", "memlab.llm.LLMClient"),
    ("embedder", object(), "embedder", "memlab.embeddings.Embedder"),
    ("retrievers", ["CHUNKS"], "retriever registry", "memlab.retrievers.Retrievers"),
    ("retrievers", {SearchType.CHUNKS: ChunksRetriever}, "retriever", "memlab.retrievers.Retriever"),
    ("retrievers", {"NO_SUCH_TYPE": ChunksRetriever()}, "search types", "memlab.SearchType"),
    ("clock", datetime.now, "clock", "memlab.clock.Clock"),
]


@pytest.mark.parametrize("build", ["init", "from_config", "from_env"])
@pytest.mark.parametrize(("keyword", "value", "family", "base"), WRONG, ids=[f"{row[0]}-{i}" for i, row in enumerate(WRONG)])
def test_a_wrong_type_is_a_config_error_before_anything_is_created(tmp_path, monkeypatch, build, keyword, value, family, base) -> None:
    root = tmp_path / "root"
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(root))
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    with pytest.raises(ConfigError) as caught:
        if build == "init":
            MemoryStack(fast_config(root), **{keyword: value})
        elif build == "from_config":
            MemoryStack.from_config(fast_config(root), **{keyword: value})
        else:
            MemoryStack.from_env(**{keyword: value})
    assert family in str(caught.value) and base in str(caught.value) and keyword in str(caught.value)
    assert not root.exists()


# -- from_config and from_env take the same keywords ------------------------------------------


async def test_from_config_and_from_env_take_the_same_objects(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path / "env"))
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    for build in (lambda **objects: MemoryStack.from_config(fast_config(tmp_path / "cfg"), **objects), MemoryStack.from_env):
        clock = FakeClock()
        cache, merge, retriever, embedder = MemoryCache(clock=clock), RawLaneMerge(), RecencySessionRetriever(), HashingEmbedder()
        stack = build(cache=cache, merge=merge, session_retriever=retriever, embedder=embedder, clock=clock)
        assert (stack.cache, stack.merge, stack.session_manager.retriever, stack.embedder, stack.clock) == (
            cache, merge, retriever, embedder, clock
        )
        async with stack:
            await stack.remember("one", session_id="s")
            await stack.remember("two", session_id="s")
            assert [result.answer for result in await stack.recall("anything", session_id="s")] == ["two", "one"]


# -- precedence: objects and config ----------------------------------------------------------


def test_a_passed_object_wins_over_the_config_name(tmp_path) -> None:
    config = fast_config(
        tmp_path, merge=MergeConfig(policy="rrf"), analysis=AnalysisConfig(search_mode="off"), cache=CacheConfig(backend="tapes")
    )
    with pytest.raises(ConfigError, match="TAPES_INGEST_URL"):  # built from the config, tapes needs a URL
        MemoryStack(config)
    cache, merge, mode = MemoryCache(), RawLaneMerge(), AuditedSequential(config.analysis)
    stack = MemoryStack(config, cache=cache, merge=merge, analysis=mode)  # nothing is built for what was passed
    assert (stack.cache, stack.merge, stack.analysis) == (cache, merge, mode)
    built = MemoryStack(fast_config(tmp_path, merge=MergeConfig(policy="rrf")), cache=cache)
    assert isinstance(built.merge, RRFMerge)  # whatever is missing is built from the config


def test_a_passed_cache_keeps_its_own_ttl_policy_and_clock(tmp_path) -> None:
    own_ttl, own_clock = SlidingTTL(30), FakeClock()
    cache = MemoryCache(ttl=own_ttl, clock=own_clock)
    stack = MemoryStack(fast_config(tmp_path, ttl=TTLConfig(seconds=999, policy="lazy_slack")), cache=cache)
    assert stack.cache.ttl is own_ttl and stack.clock is own_clock
    assert MemoryStack(fast_config(tmp_path), cache=cache, ttl=own_ttl, clock=own_clock).cache is cache  # its own: agreed


def test_cache_with_another_ttl_policy_is_ambiguous(tmp_path) -> None:
    cache = MemoryCache(ttl=SlidingTTL(30))
    with pytest.raises(ConfigError, match="cache= and ttl= disagree"):
        MemoryStack(fast_config(tmp_path / "root"), cache=cache, ttl=SlidingTTL(30))
    assert not (tmp_path / "root").exists()


def test_the_clock_must_agree_with_a_passed_cache(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cache= and clock= disagree"):
        MemoryStack(fast_config(tmp_path), cache=MemoryCache(clock=FakeClock()), clock=FakeClock())
    with pytest.raises(ConfigError, match="cache= and clock= disagree"):
        MemoryStack(fast_config(tmp_path), cache=MemoryCache(), clock=FakeClock())  # the cache reads the real clock
    stack = MemoryStack(fast_config(tmp_path), cache=MemoryCache(), clock=SystemClock())  # two real clocks agree
    clock: Clock = stack.clock
    assert isinstance(clock, SystemClock)


def test_no_cache_is_said_by_the_config(tmp_path) -> None:
    off = fast_config(tmp_path, cache=CacheConfig(enabled=False))
    assert MemoryStack(off).cache is None
    with pytest.raises(ConfigError, match="caching off"):
        MemoryStack(off, cache=MemoryCache())
    with pytest.raises(ConfigError, match="caching off"):
        MemoryStack(off, ttl=SlidingTTL(60))


def test_the_built_cache_reads_the_passed_clock(tmp_path) -> None:
    clock = FakeClock()
    stack = MemoryStack(fast_config(tmp_path), clock=clock)
    assert stack.clock is clock and stack.cache.clock is clock
