"""``distinct="data_id"``: one result per source document, so one long document cannot fill top-k."""

from __future__ import annotations

import uuid

import pytest

from memlab import MemoryStack, ValidationError
from memlab.config import GraphConfig
from memlab.retrievers import (
    DISTINCT_KEYS,
    ChunksRetriever,
    GraphCompletionRetriever,
    LexicalChunksRetriever,
    RetrievalScope,
    SearchResultItem,
    SummariesRetriever,
    one_per_source,
)
from memlab.testing import FakeClock, fast_config

LONG = " ".join(f"Polonium note {i}: polonium samples glow in the dark laboratory number {i}." for i in range(12))
SHORT = [
    "Marie Curie discovered polonium in 1898.",
    "Polonium sits next to bismuth in the periodic table.",
    "Bees make honey from nectar.",
]
QUERY = "polonium glow"


@pytest.fixture
async def library(tmp_path):
    config = fast_config(tmp_path, graph=GraphConfig(chunk_size=16, chunk_overlap=0))
    async with MemoryStack.from_config(config, clock=FakeClock()) as stack:
        stored = await stack.remember([LONG, *SHORT])
        assert stored.chunk_count > 10  # the long document is many chunks
        yield stack, stored.data_ids


def documents(results) -> list[str]:
    return [data_id for result in results for data_id in result.raw["data_ids"]]


@pytest.mark.parametrize("query_type", ["CHUNKS", "CHUNKS_LEXICAL"])
async def test_one_best_chunk_per_document(library, query_type):
    library, data_ids = library
    long_id = data_ids[0]
    plain = await library.recall(QUERY, query_type=query_type, top_k=3)
    assert documents(plain) == [long_id] * 3  # the long document fills the list
    distinct = await library.recall(QUERY, query_type=query_type, top_k=3, distinct="data_id")
    assert len(distinct) == 3 and len(set(documents(distinct))) == 3
    assert documents(distinct)[0] == long_id and distinct[0].score == pytest.approx(plain[0].score)
    scores = [result.score for result in distinct]
    assert scores == sorted(scores)
    # each result is a best chunk of its document: none of that document's chunks ranks better
    # (equal-distance chunks of the long document may come back in either order)
    everything = await library.recall(QUERY, query_type=query_type, top_k=100)
    best = {}
    for result in everything:
        best.setdefault(result.raw["data_ids"][0], result.score)
    assert [result.score for result in distinct] == [pytest.approx(best[data_id]) for data_id in documents(distinct)]
    assert all(result.id in {item.id for item in everything} for result in distinct)


@pytest.mark.parametrize(("query_type", "matching"), [("CHUNKS", 4), ("CHUNKS_LEXICAL", 3)])
async def test_a_large_top_k_gives_each_matching_document_once(library, query_type, matching):
    library, _ = library
    distinct = await library.recall(QUERY, query_type=query_type, top_k=50, distinct="data_id")
    assert len(distinct) == matching and len(set(documents(distinct))) == matching


async def test_search_passes_distinct_through(library):
    library, _ = library
    results = await library.search(QUERY, "CHUNKS", top_k=3, distinct="data_id")
    assert len(set(documents(results))) == 3
    plain = await library.search(QUERY, "CHUNKS", top_k=3)
    assert len(set(documents(plain))) == 1


@pytest.mark.parametrize("bad", ["document", "DATA_ID", 1, True])
async def test_an_unknown_distinct_key_is_refused(library, bad):
    library, _ = library
    with pytest.raises(ValidationError, match="distinct"):
        await library.recall(QUERY, query_type="CHUNKS", distinct=bad)
    with pytest.raises(ValidationError, match="distinct"):
        await library.search(QUERY, "CHUNKS", distinct=bad)
    with pytest.raises(ValidationError, match="distinct"):
        RetrievalScope(None, [], 3, None, distinct=bad)
    assert DISTINCT_KEYS == ("data_id",)


def test_which_retrievers_honour_distinct():
    assert ChunksRetriever.distinct_sources and SummariesRetriever.distinct_sources and LexicalChunksRetriever.distinct_sources
    assert not GraphCompletionRetriever.distinct_sources


def _item(item_id: str, *data_ids: str, score: float = 0.1) -> SearchResultItem:
    return SearchResultItem(id=item_id, kind="chunk", text=item_id, score=score, dataset_id=uuid.uuid4(), data_ids=list(data_ids))


def test_one_per_source_shows_each_document_once():
    items = [_item("a1", "A"), _item("a2", "A"), _item("ab", "A", "B"), _item("b1", "B"), _item("x"), _item("c1", "C"), _item("y")]
    assert [item.id for item in one_per_source(items)] == ["a1", "b1", "x", "c1", "y"]
    assert [item.id for item in one_per_source(items, 2)] == ["a1", "b1"]
    shared_first = [_item("ab", "A", "B"), _item("b1", "B"), _item("c1", "C")]
    assert [item.id for item in one_per_source(shared_first)] == ["ab", "c1"]  # B was shown through the shared chunk
    assert one_per_source([], 3) == []
