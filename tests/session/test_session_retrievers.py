"""The session retrievers (keyword, bm25, vector, hybrid) behind ``SessionManager.search`` and recall's session lane.

One set of tests, parametrized over every retriever and the memory, sqlite, fs and
fakeredis backends; the hashing embedder keeps them fast. One test loads the default
MiniLM to show a paraphrase that keyword matching misses.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from memlab import ConfigError, GraphRecallResponse, MemoryStack, SessionRecallResponse
from memlab.config import SESSION_RETRIEVERS, EmbeddingConfig, SessionConfig, StackConfig, build_session_retriever
from memlab.embeddings import HashingEmbedder
from memlab.models import SessionQAEntry
from memlab.session import (
    BM25SessionRetriever,
    HybridSessionRetriever,
    KeywordSessionRetriever,
    SessionManager,
    VectorSessionRetriever,
    matched_tokens,
    tokenize,
)
from memlab.session.retrievers import BM25_B, BM25_K1, VectorIndex, competition_ranks
from memlab.testing import FakeClock, fast_config, supply_backend

RETRIEVERS = ["keyword", "bm25", "vector", "hybrid"]
BACKENDS = ["memory", "sqlite", "fs", "fakeredis"]
#: backends whose second handle on one ``tmp_path`` sees the first one's store (as another process would)
SHARED = ["sqlite", "fs", "fakeredis"]

TURNS = [
    ("where is paris", "in france"),
    ("capital of france", "paris"),
    ("weather today", "sunny and warm"),
    ("paris france trip", "book trains"),
    ("favourite zebra facts", "stripes are unique"),
]
UNRELATED = "quantum chromodynamics lecture"


def retriever_for(name: str, tmp_path) -> object:
    return build_session_retriever(fast_config(tmp_path, session=SessionConfig(retriever=name)))


@pytest.fixture(params=RETRIEVERS)
def retriever_name(request) -> str:
    return request.param


@pytest.fixture(params=BACKENDS)
async def cache(request, tmp_path):
    async with supply_backend(request.param, tmp_path=tmp_path, clock=FakeClock()) as backend:
        yield backend


@pytest.fixture
def manager(cache, retriever_name, tmp_path) -> SessionManager:
    return SessionManager(cache, retriever=retriever_for(retriever_name, tmp_path))


async def fill(manager: SessionManager, turns: Sequence[tuple[str, str]] = TURNS, session: str = "s") -> list[str]:
    return [await manager.add_qa("u", question, answer, session_id=session) for question, answer in turns]


def ids(hits) -> list[str]:
    return [entry.qa_id for entry, _ in hits]


# -- config --------------------------------------------------------------------------------------


def test_config_names_every_retriever_and_refuses_others(tmp_path):
    assert list(SESSION_RETRIEVERS) == RETRIEVERS
    assert StackConfig().session.retriever == "keyword"
    assert StackConfig.from_env({"SESSION_RETRIEVER": "Hybrid"}).session.retriever == "hybrid"
    with pytest.raises(ConfigError, match="SESSION_RETRIEVER.*bm25, hybrid, keyword, vector"):
        StackConfig.from_env({"SESSION_RETRIEVER": "tfidf"})
    with pytest.raises(ConfigError, match="session retriever"):
        SessionConfig(retriever="tfidf")
    built = {name: retriever_for(name, tmp_path) for name in RETRIEVERS}
    assert [type(r) for r in built.values()] == [KeywordSessionRetriever, BM25SessionRetriever, VectorSessionRetriever, HybridSessionRetriever]
    assert isinstance(built["vector"].embedder, HashingEmbedder)  # the configured embedder
    assert isinstance(SessionManager(None).retriever, KeywordSessionRetriever)  # the default


async def test_the_stack_hands_its_own_embedder_to_the_session_retriever(tmp_path):
    stack = MemoryStack.from_config(fast_config(tmp_path, session=SessionConfig(retriever="hybrid")))
    assert stack.session_manager.retriever.semantic.embedder is stack.embedder


# -- the contract, for every retriever and backend -------------------------------------------------


async def test_ranking_sanity(manager):
    ids_ = await fill(manager)
    hits = await manager.search("u", "zebra stripes", session_id="s")
    assert ids(hits)[0] == ids_[4]
    hits = await manager.search("u", "Paris, France?", session_id="s", top_k=10)
    matching = {ids_[0], ids_[1], ids_[3]}
    if getattr(manager.retriever, "candidates", "lanes") == "all":
        # hybrid's lanes decide only whether the session answers; then every turn of positive score ranks, the matches first
        first = [qa_id in matching for qa_id in ids(hits)]
        assert first == sorted(first, reverse=True) and sum(first) >= 2
    else:
        assert set(ids(hits)) <= matching and len(hits) >= 2
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True) and all(score > 0 for score in scores)
    assert all(isinstance(entry, SessionQAEntry) for entry, _ in hits)


async def test_ties_keep_the_oldest_first(manager):
    first, _, second, third = await fill(manager, [("zebra stripes", "yes"), ("weather", "rain"), ("zebra stripes", "yes"), ("zebra stripes", "yes")])
    hits = await manager.search("u", "zebra stripes", session_id="s")
    assert ids(hits) == [first, second, third]
    assert len({score for _, score in hits}) == 1  # identical turns score alike


async def test_top_k_and_each_turn_once(manager):
    await fill(manager, [(f"zebra note {i}", "stripes") for i in range(8)])
    assert len(await manager.search("u", "zebra stripes", session_id="s", top_k=3)) == 3
    assert len(await manager.search("u", "zebra stripes", session_id="s", top_k=1)) == 1
    hits = await manager.search("u", "zebra stripes", session_id="s", top_k=50)
    assert len(hits) == 8 and len(set(ids(hits))) == 8


@pytest.mark.parametrize("query", ["", "   ", "!! ?", "a b c"])
async def test_a_query_without_tokens_finds_nothing(manager, query):
    await fill(manager)
    assert await manager.search("u", query, session_id="s") == []


async def test_an_unrelated_query_or_session_finds_nothing(manager):
    await fill(manager)
    assert await manager.search("u", UNRELATED, session_id="s") == []
    assert await manager.search("u", "zebra", session_id="empty-session") == []


async def test_the_index_follows_appends_edits_and_deletes(manager):
    first = await manager.add_qa("u", "zebra facts", "stripes", session_id="s")
    assert ids(await manager.search("u", "zebra stripes", session_id="s")) == [first]
    second = await manager.add_qa("u", "zebra facts", "stripes", session_id="s")
    assert ids(await manager.search("u", "zebra stripes", session_id="s")) == [first, second]
    assert await manager.update_qa("u", first, session_id="s", question="penguin colony", answer="ice floes")
    assert ids(await manager.search("u", "zebra stripes", session_id="s")) == [second]
    assert ids(await manager.search("u", "penguin colony ice", session_id="s"))[0] == first
    assert await manager.delete_qa("u", second, session_id="s")  # a reset: the deleted turn is gone
    assert await manager.search("u", "zebra stripes", session_id="s") == []
    third = await manager.add_qa("u", "zebra again", "stripes", session_id="s")
    assert ids(await manager.search("u", "zebra stripes", session_id="s")) == [third]
    await manager.delete_session("u", session_id="s")
    assert await manager.search("u", "zebra stripes", session_id="s") == []


@pytest.mark.parametrize("backend", SHARED)
async def test_another_handle_on_the_same_store_is_seen(backend, retriever_name, tmp_path):
    async with supply_backend(backend, tmp_path=tmp_path) as mine, supply_backend(backend, tmp_path=tmp_path) as theirs:
        reader = SessionManager(mine, retriever=retriever_for(retriever_name, tmp_path))
        writer = SessionManager(theirs, retriever=retriever_for(retriever_name, tmp_path))
        first = await writer.add_qa("u", "zebra facts", "stripes", session_id="s")
        assert ids(await reader.search("u", "zebra stripes", session_id="s")) == [first]
        second = await writer.add_qa("u", "zebra habitat", "stripes", session_id="s")
        assert ids(await reader.search("u", "zebra stripes", session_id="s")) == [first, second]
        assert await writer.delete_qa("u", first, session_id="s")
        assert ids(await reader.search("u", "zebra stripes", session_id="s")) == [second]
        assert ids(await writer.search("u", "zebra stripes", session_id="s")) == [second]


async def test_the_index_is_per_user_and_session_and_lru_bounded(cache, retriever_name, tmp_path):
    manager = SessionManager(cache, retriever=retriever_for(retriever_name, tmp_path), index_capacity=2)
    mine = await manager.add_qa("u", "zebra facts", "stripes", session_id="a")
    theirs = await manager.add_qa("v", "zebra facts", "stripes", session_id="a")
    other = await manager.add_qa("u", "zebra facts", "stripes", session_id="b")
    for user, session, expected in [("u", "a", mine), ("v", "a", theirs), ("u", "b", other), ("u", "a", mine)]:
        assert ids(await manager.search(user, "zebra stripes", session_id=session)) == [expected]
    assert len(manager._indexes) == 2


# -- the keyword retriever is cognee's rule, unchanged ----------------------------------------------


def spec_keyword_search(entries: list[SessionQAEntry], query: str, top_k: int) -> list[tuple[str | None, int]]:
    """SPEC §9.2 by brute force: score = |query tokens & entry tokens|, score > 0, stable sort, top_k."""
    wanted = tokenize(query)
    scored = [(entry, len(wanted & tokenize(f"{entry.question} {entry.context} {entry.answer}"))) for entry in entries]
    ranked = sorted([pair for pair in scored if pair[1] > 0], key=lambda pair: -pair[1])
    return [(entry.qa_id, score) for entry, score in ranked[:top_k]]


async def test_keyword_results_are_the_spec_rule_exactly(cache):
    manager = SessionManager(cache)
    rng = random.Random(7)
    words = "paris france zebra stripes weather sunny train book alpha beta gamma the of is".split()
    for _ in range(40):
        text = lambda n: " ".join(rng.choice(words) for _ in range(n))  # noqa: E731
        await manager.add_qa("u", text(rng.randint(0, 4)), text(rng.randint(0, 4)), context=text(rng.randint(0, 3)), session_id="s")
    entries = await manager.get_session("u", session_id="s")
    for _ in range(30):
        query = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        top_k = rng.randint(1, 20)
        hits = await manager.search("u", query, session_id="s", top_k=top_k)
        assert [(entry.qa_id, score) for entry, score in hits] == spec_keyword_search(entries, query, top_k)
        assert all(type(score) is int for _, score in hits)


# -- bm25, vector, hybrid specifics -------------------------------------------------------------------


async def test_bm25_scores_are_okapi_bm25(cache):
    import math

    manager = SessionManager(cache, retriever=BM25SessionRetriever())
    turns = [("paris paris france", "a"), ("capital of france", "paris"), ("weather", "sunny")]
    await fill(manager, turns)
    documents = [[t for t in f"{q}  {a}".lower().split() if len(t) >= 2] for q, a in turns]
    average = sum(map(len, documents)) / len(documents)

    def bm25(document: list[str]) -> float:
        total = 0.0
        for term in ("paris", "france"):
            df = sum(term in d for d in documents)
            tf = document.count(term)
            if tf:
                idf = math.log(1 + (len(documents) - df + 0.5) / (df + 0.5))
                total += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * len(document) / average))
        return total

    hits = await manager.search("u", "Paris France", session_id="s")
    assert [entry.question for entry, _ in hits] == ["paris paris france", "capital of france"]
    assert [score for _, score in hits] == [pytest.approx(bm25(documents[0])), pytest.approx(bm25(documents[1]))]


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, recording every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts):
        self.texts.extend(texts)
        return await super().embed(texts)


@pytest.mark.parametrize(
    "kind",
    [VectorSessionRetriever, lambda embedder: HybridSessionRetriever(embedder, vectors="turn"),
     lambda embedder: HybridSessionRetriever(embedder, vectors="user+turn")],
    ids=["vector", "hybrid-turn", "hybrid-user+turn"],
)
async def test_turn_vectors_are_computed_once(cache, kind):
    embedder = CountingEmbedder()
    retriever = kind(embedder)
    two = getattr(retriever, "vectors", "turn") == "user+turn"  # a second vector of the user side (the question)
    manager = SessionManager(cache, retriever=retriever)
    ids_ = await fill(manager)
    assert embedder.texts == []  # writes embed nothing
    await manager.search("u", "zebra stripes", session_id="s")
    assert len(embedder.texts) == 1 + len(TURNS) * (2 if two else 1)  # the query and every turn (both sides), once
    embedder.texts.clear()
    await manager.search("u", "paris france", session_id="s")
    assert embedder.texts == ["paris france"]  # only the query
    embedder.texts.clear()
    new = await manager.add_qa("u", "zebra herd", "migration", session_id="s")
    await manager.search("u", "zebra", session_id="s")
    assert embedder.texts == ["zebra", "zebra herd migration", *(["zebra herd"] if two else [])]  # the query and the new turn
    embedder.texts.clear()
    assert await manager.add_feedback("u", ids_[0], "nice", 5, session_id="s")  # a reset, the text unchanged
    assert await manager.delete_qa("u", ids_[2], session_id="s")  # a reset
    await manager.search("u", "zebra", session_id="s")
    assert embedder.texts == ["zebra"]  # no turn is embedded again
    embedder.texts.clear()
    assert await manager.update_qa("u", new, session_id="s", answer="stripes")  # an edit: that turn only (its user side unchanged)
    hits = await manager.search("u", "zebra stripes", session_id="s")
    assert embedder.texts == ["zebra stripes", "zebra herd stripes"]
    assert new in ids(hits)
    embedder.texts.clear()
    await manager.add_qa("u", "", "an answer alone", session_id="s")  # no user side: the whole turn is embedded once
    await manager.search("u", "zebra", session_id="s")
    assert embedder.texts == ["zebra", "an answer alone"]


async def test_concurrent_searches_embed_each_turn_once(cache):
    import asyncio

    embedder = CountingEmbedder()
    manager = SessionManager(cache, retriever=VectorSessionRetriever(embedder))
    await fill(manager)
    results = await asyncio.gather(*(manager.search("u", "zebra stripes", session_id="s") for _ in range(5)))
    assert all(ids(result) == ids(results[0]) for result in results)
    assert len(embedder.texts) == 5 + len(TURNS)
    [index] = manager._indexes.values()
    assert isinstance(index, VectorIndex) and index.embedded_turns == len(TURNS)


class GatedEmbedder(HashingEmbedder):
    """The hashing embedder whose second call waits until ``release`` is set."""

    def __init__(self) -> None:
        import asyncio

        super().__init__()
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def embed(self, texts):
        self.calls += 1
        if self.calls == 2:
            self.started.set()
            await self.release.wait()
        return await super().embed(texts)


@pytest.mark.parametrize("kind", [VectorSessionRetriever, HybridSessionRetriever])
async def test_a_reset_during_a_search_does_not_mix_states(kind):
    import asyncio

    from memlab.cache import MemoryCache

    embedder = GatedEmbedder()
    manager = SessionManager(MemoryCache(clock=FakeClock()), retriever=kind(embedder))
    first, second = await fill(manager, [("zebra facts", "stripes"), ("zebra herd", "stripes")])
    assert ids(await manager.search("u", "zebra stripes", session_id="s")) == [first, second]  # both turns embedded
    third = await manager.add_qa("u", "zebra foal", "stripes", session_id="s")
    slow = asyncio.ensure_future(manager.search("u", "zebra stripes", session_id="s"))
    await embedder.started.wait()  # this search holds its snapshot and waits in the embedder for the new turn
    assert await manager.delete_qa("u", first, session_id="s")
    later = asyncio.ensure_future(manager.search("u", "zebra stripes", session_id="s"))
    await asyncio.sleep(0.01)  # it applies the reset (dropping the deleted turn's vector), then waits for the lock
    embedder.release.set()
    assert set(ids(await slow)) == {first, second, third}  # the state it read
    assert set(ids(await later)) == {second, third}


def test_vector_floor_and_hybrid_settings_are_checked():
    for bad in (0, -0.1, 1.5, True, "0.3"):
        with pytest.raises(ValueError, match="min_similarity"):
            VectorSessionRetriever(HashingEmbedder(), min_similarity=bad)
    with pytest.raises(ValueError, match="fusion"):
        HybridSessionRetriever(HashingEmbedder(), fusion="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        SessionConfig(min_similarity=0)
    assert competition_ranks({0: 2.0, 1: 3.0, 2: 2.0, 3: 1.0}) == {1: 1, 0: 2, 2: 2, 3: 4}


async def test_hybrid_rrf_fusion(cache):
    manager = SessionManager(cache, retriever=HybridSessionRetriever(HashingEmbedder(), fusion="rrf"))
    ids_ = await fill(manager)
    hits = await manager.search("u", "zebra stripes", session_id="s")
    assert ids(hits)[0] == ids_[4] and hits[0][1] == pytest.approx(2 / 61)  # first in both lanes
    assert await manager.search("u", UNRELATED, session_id="s") == []


# -- recall ------------------------------------------------------------------------------------------


async def test_recall_session_results_carry_score_and_matched_tokens(retriever_name, tmp_path):
    config = fast_config(tmp_path, session=SessionConfig(retriever=retriever_name))
    async with MemoryStack.from_config(config, clock=FakeClock()) as stack:
        for question, answer in TURNS:
            await stack.session_manager.add_qa(str((await stack.users.default()).id), question, answer, session_id="chat")
        hits = await stack.recall("zebra stripes", session_id="chat", scope="session")
        assert hits and all(isinstance(hit, SessionRecallResponse) for hit in hits)
        assert hits[0].question == "favourite zebra facts" and hits[0].matched_tokens == 2
        assert all(hit.score is not None and hit.score > 0 for hit in hits)
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)
        if retriever_name == "keyword":
            assert all(hit.score == hit.matched_tokens for hit in hits)
        assert await stack.recall(UNRELATED, session_id="chat", scope="session") == []


@pytest.mark.parametrize("name", RETRIEVERS)
async def test_session_first_falls_through_to_the_graph_on_an_unrelated_session(name, tmp_path):
    config = fast_config(tmp_path, session=SessionConfig(retriever=name))
    async with MemoryStack.from_config(config, clock=FakeClock()) as stack:
        await stack.remember(["Alan Turing worked at Bletchley Park in 1941."])
        await stack.remember("Polonium was on my mind today.", session_id="chat", self_improvement=False)
        hits = await stack.recall("polonium", session_id="chat")
        assert hits and all(isinstance(hit, SessionRecallResponse) for hit in hits)  # the session answers
        misses = await stack.recall("Who worked at Bletchley Park?", session_id="chat")
        assert misses and all(isinstance(hit, GraphRecallResponse) for hit in misses)  # no session hit: the graph


def test_matched_tokens_counts_shared_query_tokens():
    entry = SessionQAEntry(time="", question="Where is Paris?", context="France", answer="in France")
    assert matched_tokens("paris france trip", entry) == 2
    assert matched_tokens({"paris"}, entry) == 1 and matched_tokens("dog", entry) == 0


# -- the default MiniLM: a paraphrase keyword matching misses ------------------------------------------


async def test_minilm_vector_and_hybrid_find_a_paraphrase_keyword_misses(tmp_path):
    turns = [
        ("I adopted a beagle named Biscuit last spring.", "Lovely, congratulations!"),
        ("The quarterly budget review moved to Thursday.", "Noted."),
        ("Traffic was awful due to the marathon.", "That sounds annoying."),
        ("Remind me to buy oat milk.", "Sure, added to the list."),
    ]
    query = "What is my dog called?"
    found = {}
    for name in RETRIEVERS:
        config = StackConfig(data_root=tmp_path / name, embedding=EmbeddingConfig(model="memlab/minilm"), session=SessionConfig(retriever=name))
        async with MemoryStack.from_config(config, clock=FakeClock()) as stack:
            user = str((await stack.users.default()).id)
            for question, answer in turns:
                await stack.session_manager.add_qa(user, question, answer, session_id="chat")
            found[name] = await stack.recall(query, session_id="chat", scope="session")
            assert await stack.recall("quantum chromodynamics lecture notes", session_id="chat", scope="session") == []
    assert found["keyword"] == [] and found["bm25"] == []
    assert [hit.question for hit in found["vector"]] == [turns[0][0]]  # the only turn above the cosine floor
    assert found["hybrid"][0].question == turns[0][0]  # first; the lanes only decide that the session answers
    for name in ("vector", "hybrid"):
        assert found[name][0].matched_tokens == 0 and found[name][0].score > 0.3


# -- hybrid v2: two vectors a turn, every turn ranked once a lane finds one ----------------------------


class TableEmbedder(HashingEmbedder):
    """Fixed unit vectors per text (others: a vector orthogonal to all of them)."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        super().__init__(dim=8)
        self.table = table

    async def _embed_batch(self, texts):
        return [self.table.get(text, [0.0, 0.0, 1.0] + [0.0] * 5) for text in texts]


def _unit(x: float, y: float) -> list[float]:
    norm = (x * x + y * y) ** 0.5
    return [x / norm, y / norm] + [0.0] * 6


async def test_hybrid_candidates_all_ranks_every_turn_of_positive_score_once_a_lane_finds_one():
    from memlab.cache import MemoryCache

    table = {"find me": _unit(1, 0), "apple a": _unit(0.9, 0.436), "berry b": _unit(0.2, 0.98), "cherry c": _unit(-0.5, 0.866)}
    for candidates, expected in (("lanes", ["apple"]), ("all", ["apple", "berry"])):
        retriever = HybridSessionRetriever(TableEmbedder(table), vectors="turn", candidates=candidates, alpha=0.1)
        manager = SessionManager(MemoryCache(clock=FakeClock()), retriever=retriever)
        await fill(manager, [("apple", "a"), ("berry", "b"), ("cherry", "c")])
        hits = await manager.search("u", "find me", session_id="s")
        assert [entry.question for entry, _ in hits] == expected, candidates  # cherry's cosine is negative: never
        cosine = table["apple a"][0]
        assert hits[0][1] == pytest.approx(0.9 * cosine)  # no BM25 term shared: (1 - alpha) * cosine
        assert await manager.search("u", "nothing here", session_id="s") == []  # neither lane finds a turn


async def test_hybrid_user_side_vector_scores_the_better_cosine():
    from memlab.cache import MemoryCache

    table = {"find me": _unit(1, 0), "where is it": _unit(1, 0), "where is it a long unrelated reply": _unit(0.1, 0.995)}
    found = {}
    for vectors in ("turn", "user+turn"):
        retriever = HybridSessionRetriever(TableEmbedder(table), vectors=vectors, candidates="lanes", alpha=0.0)
        manager = SessionManager(MemoryCache(clock=FakeClock()), retriever=retriever)
        await fill(manager, [("where is it", "a long unrelated reply")])
        found[vectors] = await manager.search("u", "find me", session_id="s")
    assert found["turn"] == []  # the whole turn's cosine (0.1) is under the floor
    assert [score for _, score in found["user+turn"]] == [pytest.approx(1.0)]  # the user side's cosine (1.0) wins
    with pytest.raises(ValueError, match="vectors"):
        HybridSessionRetriever(HashingEmbedder(), vectors="both")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="candidates"):
        HybridSessionRetriever(HashingEmbedder(), candidates="some")  # type: ignore[arg-type]
