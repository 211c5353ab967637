"""The retrieval-only retrievers (CHUNKS, SUMMARIES, CHUNKS_LEXICAL, TEMPORAL, SKILLS, CODING_RULES) on a real stack."""

from __future__ import annotations

import asyncio
import math
import uuid

import pytest

from memlab import MemoryStack, StackConfig
from memlab.config import EmbeddingConfig
from memlab.exceptions import ValidationError
from memlab.retrievers import (
    ChunksRetriever,
    CodingRulesRetriever,
    LexicalChunksRetriever,
    SkillsRetriever,
    SummariesRetriever,
    TemporalRetriever,
)
from memlab.retrievers import _lexical
from memlab.retrievers._base import Completion, RetrievalScope, Retriever, SearchResultItem
from memlab.retrievers._lexical import BM25_B, BM25_K1, lexical_tokens
from memlab.retrievers._tagged import skill_description
from memlab.retrievers._temporal import parse_time_window
from memlab.retrievers._types import SearchType
from memlab.testing import FakeClock, fast_config

FACTS = [
    "Marie Curie discovered polonium in 1898 in Paris.",
    "Alan Turing worked at Bletchley Park in 1940.",
    "The Eiffel Tower opened to visitors in March 1889.",
    "Apollo 11 landed on the Moon on 20 July 1969.",
    "Tim Berners-Lee proposed the World Wide Web in 1989.",
    "Satoshi Nakamoto described Bitcoin in 2008.",
    "The Paris Agreement on climate was adopted in 2015.",
    "Honey bees communicate the location of flowers with a waggle dance.",
    "Photosynthesis converts sunlight into chemical energy in plants.",
]
SKILLS = [
    "# Deploy a service\nTo deploy a service, build the container image first. Then push it and roll it out.",
    "# Rotate credentials\nRotate the database password every ninety days using the vault command line.",
    "Restore a backup by copying the latest snapshot into the data directory.",
]
RULES = [
    "Name functions in snake_case and classes in CamelCase.",
    "Never catch a bare exception; catch the specific error class.",
]

CASES = [
    (ChunksRetriever, "Who discovered polonium?"),
    (SummariesRetriever, "Who discovered polonium?"),
    (LexicalChunksRetriever, "polonium Paris Bitcoin bees"),
    (TemporalRetriever, "What happened before 1990?"),
    (TemporalRetriever, "Who discovered polonium?"),  # no date: plain chunk search
    (SkillsRetriever, "How do I deploy a service?"),
    (CodingRulesRetriever, "naming rules for functions and exceptions"),
]
CASE_IDS = [f"{cls.search_type.value}:{query}" for cls, query in CASES]


@pytest.fixture
async def facts(stack):
    """The dataset ``facts``: FACTS, SKILLS tagged skills, RULES tagged coding_rules."""
    result = await stack.remember(FACTS, dataset="facts")
    await stack.remember(SKILLS, dataset="facts", tags=["skills"])
    await stack.remember(RULES, dataset="facts", tags=["coding_rules"])
    return result


def scope_of(stack, dataset_ids, top_k: int = 5) -> RetrievalScope:
    return RetrievalScope(stack.memory, list(dataset_ids), top_k, stack.llm)


async def texts(retriever: Retriever, query: str, scope: RetrievalScope) -> list[str]:
    return [item.text for item in await retriever.get_context(query, scope)]


# --- the contract (_base.py) ------------------------------------------------------------------


def test_search_types_and_completes() -> None:
    assert ChunksRetriever.search_type is SearchType.CHUNKS
    assert SummariesRetriever.search_type is SearchType.SUMMARIES
    assert LexicalChunksRetriever.search_type is SearchType.CHUNKS_LEXICAL
    assert TemporalRetriever.search_type is SearchType.TEMPORAL
    assert SkillsRetriever.search_type is SearchType.SKILLS
    assert CodingRulesRetriever.search_type is SearchType.CODING_RULES
    assert TemporalRetriever.completes
    assert not any(cls.completes for cls in (ChunksRetriever, SummariesRetriever, LexicalChunksRetriever, SkillsRetriever, CodingRulesRetriever))


class CountingEmbedder:
    """Embeds ``[text]`` as ``[[len(text)]]`` after a yield; the first ``fail`` calls raise."""

    def __init__(self, fail: int = 0) -> None:
        self.calls = 0
        self.fail = fail

    async def embed(self, texts):
        self.calls += 1
        await asyncio.sleep(0)
        if self.calls <= self.fail:
            raise RuntimeError("embedding failed")
        return [[float(len(text))] for text in texts]


class EmbedderOnly:
    def __init__(self, embedder) -> None:
        self.embedder = embedder


async def test_scope_embeds_a_text_once_even_for_concurrent_first_calls() -> None:
    embedder = CountingEmbedder()
    scope = RetrievalScope(EmbedderOnly(embedder), [], 3, None)
    first, second = await asyncio.gather(scope.embed("query"), scope.embed("query"))
    assert first == second == [5.0] and embedder.calls == 1
    assert await scope.embed("query") == [5.0] and embedder.calls == 1
    assert await scope.embed("other") == [5.0] and embedder.calls == 2


async def test_scope_redoes_a_failed_embedding() -> None:
    embedder = CountingEmbedder(fail=1)
    scope = RetrievalScope(EmbedderOnly(embedder), [], 3, None)
    with pytest.raises(RuntimeError):
        await scope.embed("query")
    assert await scope.embed("query") == [5.0] and embedder.calls == 2


async def test_retrieval_only_types_do_not_answer(stack, facts) -> None:
    with pytest.raises(NotImplementedError, match="CHUNKS"):
        await ChunksRetriever().get_completion("polonium", scope_of(stack, [facts.dataset_id]))


@pytest.mark.parametrize(("cls", "query"), CASES, ids=CASE_IDS)
async def test_contract(stack, facts, cls, query) -> None:
    for top_k in (1, 2, 3, 50):
        items = await cls().get_context(query, scope_of(stack, [facts.dataset_id], top_k))
        assert items and len(items) <= top_k
        assert all(isinstance(item, SearchResultItem) and item.dataset_id == facts.dataset_id for item in items)
        scores = [item.score for item in items]
        assert all(score >= 0 and math.isfinite(score) for score in scores)
        assert scores == sorted(scores)
        assert len({item.id for item in items}) == len(items)
        assert all(item.node_ids == [item.id] and item.data_ids for item in items)
        again = await cls().get_context(query, scope_of(stack, [facts.dataset_id], top_k))
        assert [(item.id, item.score) for item in again] == [(item.id, item.score) for item in items]
    many = await cls().get_context(query, scope_of(stack, [facts.dataset_id], 50))
    few = await cls().get_context(query, scope_of(stack, [facts.dataset_id], 2))
    assert [item.id for item in few] == [item.id for item in many[:2]]


@pytest.mark.parametrize(("cls", "query"), CASES, ids=CASE_IDS)
async def test_blank_query_empty_and_unknown_datasets(stack, facts, cls, query) -> None:
    empty = await stack.datasets.create("empty")
    assert await cls().get_context("   ", scope_of(stack, [facts.dataset_id])) == []
    assert await cls().get_context("", scope_of(stack, [facts.dataset_id])) == []
    assert await cls().get_context(query, scope_of(stack, [empty.id])) == []
    assert await cls().get_context(query, scope_of(stack, [uuid.uuid4()])) == []
    assert await cls().get_context(query, scope_of(stack, [])) == []
    assert await cls().get_context(query, scope_of(stack, [facts.dataset_id], 0)) == []


@pytest.mark.parametrize(("cls", "query"), CASES, ids=CASE_IDS)
async def test_bad_arguments(stack, facts, cls, query) -> None:
    with pytest.raises(ValidationError, match="None"):
        await cls().get_context(None, scope_of(stack, [facts.dataset_id]))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="-1"):
        await cls().get_context(query, scope_of(stack, [facts.dataset_id], -1))
    with pytest.raises(ValidationError, match="'3'"):
        await cls().get_context(query, scope_of(stack, [facts.dataset_id], "3"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("cls", "query"), CASES, ids=CASE_IDS)
async def test_several_datasets_merge_by_score(stack, cls, query) -> None:
    first = await stack.remember(FACTS[::2], dataset="a")
    second = await stack.remember(FACTS[1::2], dataset="b")
    for docs, tags in ((SKILLS[:2], ["skills"]), (RULES[:1], ["coding_rules"])):
        await stack.remember(docs, dataset="a", tags=tags)
    for docs, tags in ((SKILLS[2:], ["skills"]), (RULES[1:], ["coding_rules"])):
        await stack.remember(docs, dataset="b", tags=tags)
    ids = [first.dataset_id, second.dataset_id]
    merged = await cls().get_context(query, scope_of(stack, ids, 4))
    separate = [item for dataset_id in ids for item in await cls().get_context(query, scope_of(stack, [dataset_id], 4))]
    expected = sorted(separate, key=lambda item: item.score)[:4]
    assert [(item.id, item.dataset_id) for item in merged] == [(item.id, item.dataset_id) for item in expected]
    assert {item.dataset_id for item in separate} == set(ids)


# --- CHUNKS / SUMMARIES -------------------------------------------------------------------------


async def test_chunks_and_summaries_find_the_obvious_one(stack, facts) -> None:
    scope = scope_of(stack, [facts.dataset_id])
    chunks = await ChunksRetriever().get_context("Who discovered polonium?", scope)
    assert chunks[0].kind == "chunk" and chunks[0].text == FACTS[0]
    summaries = await SummariesRetriever().get_context("Which insects communicate with a waggle dance?", scope)
    assert summaries[0].kind == "summary" and "waggle dance" in summaries[0].text


async def test_chunks_with_the_default_minilm_embedder(tmp_path) -> None:
    async with MemoryStack.from_config(StackConfig(data_root=tmp_path, embedding=EmbeddingConfig())) as stack:
        result = await stack.remember(FACTS)
        scope = scope_of(stack, [result.dataset_id], 3)
        assert (await texts(ChunksRetriever(), "Which insect dances to tell others where food is?", scope))[0] == FACTS[7]
        assert (await texts(ChunksRetriever(), "How do plants turn light into energy?", scope))[0] == FACTS[8]
        assert (await texts(ChunksRetriever(), "first humans landing on the lunar surface", scope))[0] == FACTS[3]


# --- CHUNKS_LEXICAL -----------------------------------------------------------------------------


def test_lexical_tokens() -> None:
    assert lexical_tokens("Wi-Fi's SNAKE_case, 42 Überall!") == ["wi", "fi", "s", "snake_case", "42", "überall"]
    assert lexical_tokens(" \n ...") == []


async def test_lexical_returns_only_chunks_with_a_matching_term(stack, facts) -> None:
    items = await LexicalChunksRetriever().get_context("polonium zzzunknown", scope_of(stack, [facts.dataset_id], 10))
    assert [item.text for item in items] == [FACTS[0]]
    assert items[0].raw["matched_terms"] == ["polonium"]
    assert items[0].score == pytest.approx(1 / (1 + items[0].raw["bm25"]))
    assert await LexicalChunksRetriever().get_context("zzzunknown", scope_of(stack, [facts.dataset_id])) == []
    assert await LexicalChunksRetriever().get_context("?!", scope_of(stack, [facts.dataset_id])) == []


async def test_lexical_matched_terms_are_the_query_terms_the_chunk_contains(stack, facts) -> None:
    query = "Paris polonium bees moon zzzunknown Paris"
    items = await LexicalChunksRetriever().get_context(query, scope_of(stack, [facts.dataset_id], 10))
    assert len(items) > 1
    terms = list(dict.fromkeys(lexical_tokens(query)))
    for item in items:
        assert item.raw["matched_terms"] == [term for term in terms if term in lexical_tokens(item.text)]


async def test_lexical_bm25_values(stack) -> None:
    docs = ["apple apple banana", "apple cherry cherry cherry date", "banana split"]
    result = await stack.remember(docs)
    items = await LexicalChunksRetriever().get_context("apple cherry apple", scope_of(stack, [result.dataset_id]))
    lengths = [3, 5, 2]
    average = sum(lengths) / 3

    def bm25(tf: int, df: int, length: int) -> float:
        idf = math.log(1 + (3 - df + 0.5) / (df + 0.5))
        return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average))

    expected = {docs[0]: bm25(2, 2, 3), docs[1]: bm25(1, 2, 5) + bm25(3, 1, 5)}
    assert {item.text: item.raw["bm25"] for item in items} == pytest.approx(expected)
    assert [item.text for item in items] == sorted(expected, key=expected.get, reverse=True)


async def test_lexical_exact_phrase(stack) -> None:
    docs = ["The quick brown fox jumps.", "A brown and quick dog sleeps.", "Quick\n  Brown bears fish.", "Something else entirely."]
    result = await stack.remember(docs)
    scope = scope_of(stack, [result.dataset_id], 10)
    assert sorted(await texts(LexicalChunksRetriever(), "quick brown", scope)) == sorted(docs[:3])
    assert sorted(await texts(LexicalChunksRetriever(), '"quick brown"', scope)) == sorted([docs[0], docs[2]])
    assert sorted(await texts(LexicalChunksRetriever(), '  "QUICK   brown"  ', scope)) == sorted([docs[0], docs[2]])
    assert await texts(LexicalChunksRetriever(), '"brown quick"', scope) == []
    assert await texts(LexicalChunksRetriever(), '"fox jumps"', scope) == [docs[0]]
    assert await texts(LexicalChunksRetriever(), '"..."', scope) == []
    # not a whole quoted query: plain words
    assert sorted(await texts(LexicalChunksRetriever(), '"brown quick" dog', scope)) == sorted(docs[:3])


async def test_lexical_index_is_cached_per_snapshot(stack, monkeypatch) -> None:
    builds = []
    build = _lexical._build
    monkeypatch.setattr(_lexical, "_build", lambda graph: builds.append(1) or build(graph))
    result = await stack.remember(FACTS[:2], dataset="x")
    scope = scope_of(stack, [result.dataset_id])
    for _ in range(3):
        assert await texts(LexicalChunksRetriever(), "polonium", scope) == [FACTS[0]]
    assert len(builds) == 1
    await stack.remember(["Polonium is a rare and highly radioactive element."], dataset="x")
    assert len(await texts(LexicalChunksRetriever(), "polonium", scope)) == 2
    assert len(builds) == 2


async def test_lexical_index_rebuilt_after_the_graph_was_forgotten_and_regrown(stack) -> None:
    result = await stack.remember(FACTS[:1], dataset="x")
    scope = scope_of(stack, [result.dataset_id])
    assert await texts(LexicalChunksRetriever(), "polonium", scope) == [FACTS[0]]
    token = await stack.memory.snapshot_token(result.dataset_id)
    await stack.forget(dataset="x", memory_only=True)
    assert await stack.memory.snapshot_token(result.dataset_id) is None
    await stack.remember(FACTS[1:2], dataset="x")
    assert await stack.memory.snapshot_token(result.dataset_id) != token  # a regrown dataset never repeats a token
    assert await texts(LexicalChunksRetriever(), "polonium", scope) == []
    assert await texts(LexicalChunksRetriever(), "turing", scope) == [FACTS[1]]


async def test_derived_indexes_live_on_their_memory(stack, tmp_path) -> None:
    dataset_id = (await stack.remember(FACTS[:1], dataset="x")).dataset_id
    builds = []

    def build(graph):
        builds.append(graph)
        return len(builds)

    graph, index = await stack.memory.derived(dataset_id, "count", build)
    assert graph is await stack.memory.graph(dataset_id) and index == 1
    assert (await stack.memory.derived(dataset_id, "count", build))[1] == 1  # reused
    assert (await stack.memory.derived(dataset_id, "other", build))[1] == 2  # one index per kind
    # a second stack on the same files has its own memory and indexes; its write hands this memory a new graph
    async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock()) as other:
        assert (await other.memory.derived(dataset_id, "count", build))[1] == 3
        await other.remember(FACTS[1:2], dataset="x")
    reloaded, index = await stack.memory.derived(dataset_id, "count", build)
    assert reloaded is not graph and index == 4 and builds[-1] is reloaded


# --- TEMPORAL -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "windows"),
    [
        ("What happened in 1898?", [["1898-01-01", "1898-12-31"]]),
        ("1898", [["1898-01-01", "1898-12-31"]]),
        ("events before 1900", [[None, "1899-12-31"]]),
        ("prior to the 1950s", [[None, "1949-12-31"]]),
        ("after 2001", [["2002-01-01", None]]),
        ("since 2010", [["2010-01-01", None]]),
        ("from 2010", [["2010-01-01", None]]),
        ("until 2010", [[None, "2010-12-31"]]),
        ("between 1890 and 1900", [["1890-01-01", "1900-12-31"]]),
        ("from 1890 to 1900", [["1890-01-01", "1900-12-31"]]),
        ("from 1890-1900", [["1890-01-01", "1900-12-31"]]),
        ("in the 1890s", [["1890-01-01", "1899-12-31"]]),
        ("in the late 1890s", [["1890-01-01", "1899-12-31"]]),
        ("in March 2020", [["2020-03-01", "2020-03-31"]]),
        ("in Feb 2020", [["2020-02-01", "2020-02-29"]]),
        ("on 2020-03-12", [["2020-03-12", "2020-03-12"]]),
        ("on 12th of March, 2020", [["2020-03-12", "2020-03-12"]]),
        ("on March 12, 2020", [["2020-03-12", "2020-03-12"]]),
        ("in 1898 and in 1905", [["1898-01-01", "1898-12-31"], ["1905-01-01", "1905-12-31"]]),
        ("no date here", []),
        ("room 12345", []),
        ("on 2020-02-30", []),
    ],
)
def test_parse_time_window(query, windows) -> None:
    assert [window.iso() for window in parse_time_window(query)] == windows


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What was discovered in 1898?", [0]),
        ("What happened before 1900?", [0, 2]),
        ("What happened after 2000?", [5, 6]),
        ("What happened since 2008?", [5, 6]),
        ("What happened between 1930 and 1970?", [1, 3]),
        ("What happened in the 1980s?", [4]),
        ("What happened in July 1969?", [3]),
        ("What happened on 1969-07-20?", [3]),
        ("What happened in March 1889?", [2]),
        ("What happened in 1750?", []),
    ],
)
async def test_temporal_windows(stack, facts, query, expected) -> None:
    items = await TemporalRetriever().get_context(query, scope_of(stack, [facts.dataset_id], 10))
    assert sorted(item.text for item in items) == sorted(FACTS[index] for index in expected)
    assert all(item.raw["dates"] and item.raw["windows"] == [w.iso() for w in parse_time_window(query)] for item in items)


async def test_temporal_ranks_by_vector_distance_and_reports_dates(stack, facts) -> None:
    items = await TemporalRetriever().get_context("Who discovered polonium before 1900?", scope_of(stack, [facts.dataset_id], 10))
    assert items[0].text == FACTS[0] and items[0].raw["dates"] == ["1898"]
    assert [item.text for item in items[1:]] == [FACTS[2]] and items[1].raw["dates"] == ["March 1889"]


async def test_temporal_without_a_date_falls_back_to_chunk_search(stack, facts) -> None:
    scope = scope_of(stack, [facts.dataset_id], 4)
    items = await TemporalRetriever().get_context("Who discovered polonium?", scope)
    chunks = await ChunksRetriever().get_context("Who discovered polonium?", scope)
    assert [(item.id, item.score) for item in items] == [(item.id, item.score) for item in chunks]
    assert all(item.raw["dates"] == [] and item.raw["windows"] == [] for item in items)


async def test_temporal_completion(stack, facts) -> None:
    completion = await TemporalRetriever().get_completion("What was discovered in 1898?", scope_of(stack, [facts.dataset_id]))
    assert isinstance(completion, Completion)
    assert "polonium" in completion.text
    assert [item.text for item in completion.context] == [FACTS[0]]
    assert completion.used_node_ids == [completion.context[0].id]
    assert completion.usage["llm_calls"] == 1 and completion.usage["tokens_in"] > 0


# --- SKILLS / CODING_RULES ----------------------------------------------------------------------


async def test_skills_text_is_name_colon_description(stack, facts) -> None:
    items = await SkillsRetriever().get_context("How do I deploy a service?", scope_of(stack, [facts.dataset_id], 10))
    first = items[0]
    assert first.text == "Deploy a service: To deploy a service, build the container image first. Then push it and roll it out."
    assert first.raw["skill"] == "Deploy a service"
    assert first.raw["content"] == SKILLS[0]
    by_content = {item.raw["content"]: item for item in items}
    assert set(by_content) == set(SKILLS)  # only skill chunks
    untitled = by_content[SKILLS[2]]
    assert untitled.raw["skill"].startswith("text_")  # no heading: the document's name
    assert untitled.text == f"{untitled.raw['skill']}: {SKILLS[2]}"


async def test_skills_read_each_graph_once_whatever_the_number_of_items(stack, facts, graph_reads) -> None:
    counts = []
    for top_k in (1, 3):
        graph_reads.clear()
        assert len(await SkillsRetriever().get_context("How do I deploy a service?", scope_of(stack, [facts.dataset_id], top_k))) == top_k
        counts.append(len(graph_reads))
    assert counts[0] == counts[1]


def test_skill_description() -> None:
    assert skill_description("# Title\n\n## Steps\nFirst do this. Then that. Then more.") == "First do this. Then that."
    long = "A " + "very " * 30 + "long first sentence. Second one."
    assert skill_description(long) == " ".join(long.split(". ")[0].split()) + "."
    assert skill_description("# Only a heading") == ""
    capped = skill_description("word " * 100)
    assert len(capped) <= 300 and capped.endswith("…")


async def test_skill_name_from_a_file_and_later_chunks(stack, tmp_path) -> None:
    path = tmp_path / "backup.md"
    path.write_text("Back up nightly.\n" + "\n".join(f"Step {i}: copy part {i} of the archive to cold storage." for i in range(60)))
    result = await stack.remember([path], dataset="skills", tags=["skills"])
    items = await SkillsRetriever().get_context("copy part 59 of the archive", scope_of(stack, [result.dataset_id], 50))
    assert len(items) > 1
    assert {item.raw["skill"] for item in items} == {"backup.md"}


async def test_coding_rules_returns_only_rule_chunks(stack, facts) -> None:
    scope = scope_of(stack, [facts.dataset_id], 10)
    items = await CodingRulesRetriever().get_context("How should I name functions?", scope)
    assert items[0].text == RULES[0]
    assert sorted(item.text for item in items) == sorted(RULES)


# --- forget -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "query", "corpus", "tags"),
    [
        (ChunksRetriever, "Who discovered polonium?", FACTS, []),
        (SummariesRetriever, "Who discovered polonium?", FACTS, []),
        (LexicalChunksRetriever, "polonium", FACTS, []),
        (TemporalRetriever, "What was discovered in 1898?", FACTS, []),
        (TemporalRetriever, "polonium", FACTS, []),
        (SkillsRetriever, "deploy a service", SKILLS, ["skills"]),
        (CodingRulesRetriever, "name functions", RULES, ["coding_rules"]),
    ],
    ids=lambda value: value.search_type.value if isinstance(value, type) else None,
)
async def test_forget_removes_a_documents_chunks(stack, cls, query, corpus, tags) -> None:
    result = await stack.remember(corpus, dataset="x", tags=tags)
    gone = result.data_ids[0]
    scope = scope_of(stack, [result.dataset_id], 50)
    before = await cls().get_context(query, scope)
    assert gone in before[0].data_ids
    await stack.forget(dataset="x", data_id=gone)
    after = await cls().get_context(query, scope)
    assert all(gone not in item.data_ids for item in after)
    assert {item.id for item in after} == {item.id for item in before if gone not in item.data_ids}


async def test_snapshot_token(stack) -> None:
    dataset = await stack.datasets.create("x")
    assert await stack.memory.snapshot_token(dataset.id) is None
    result = await stack.remember(FACTS[:2], dataset="x")
    first = await stack.memory.snapshot_token(dataset.id)
    assert first is not None
    await stack.forget(dataset="x", data_id=result.data_ids[0])
    assert await stack.memory.snapshot_token(dataset.id) not in (None, first)
