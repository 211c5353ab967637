"""The :class:`~memlab.retrievers.Retriever` conformance suite.

Subclass :class:`RetrieverSuite` in a test module and provide a ``retriever``
fixture; the suite runs it over a small real permanent memory (a stack on
:func:`memlab.testing.fast_config`: the hashing embedder, the offline LLM) and
checks only what the base contract and the retriever's declared capabilities
promise::

    import pytest
    from memlab.testing import RetrieverSuite

    class TestMyRetriever(RetrieverSuite):
        @pytest.fixture
        def retriever(self):
            return MyRetriever()

Register the module for assertion rewriting in your root ``conftest.py``:
``pytest.register_assert_rewrite("memlab.testing.retriever_suite")``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from memlab.retrievers import Completion, RetrievalScope, Retriever, SearchResultItem, SearchType
from memlab.testing._clock import FakeClock
from memlab.testing._config import fast_config

__all__ = ["DOCS", "QUERIES", "RetrieverSuite"]

#: the permanent memory every test reads
DOCS = [
    "Marie Curie discovered polonium in 1898 in Paris.",
    "Marie Curie was born in Warsaw.",
    "Alan Turing worked at Bletchley Park in 1940.",
    "Pierre Curie married Marie Curie in 1895.",
    "Apollo 11 landed on the Moon on 20 July 1969.",
    "Honey bees communicate the location of flowers with a waggle dance.",
]
#: the queries the tests ask
QUERIES = ["Who discovered polonium?", "Marie Curie", "What happened before 1950?", "bees dance"]


@asynccontextmanager
async def _memory(tmp_path: Path, docs: list[str] = DOCS) -> AsyncIterator[tuple[Any, list[Any]]]:
    """An open stack under ``tmp_path`` and the dataset ids holding ``docs`` (none when ``docs`` is empty)."""
    from memlab import MemoryStack

    async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock()) as stack:
        ids = []
        if docs:
            result = await stack.remember(docs, dataset="suite")
            ids.append(result.dataset_id)
        yield stack, ids


def _scope(stack: Any, dataset_ids: list[Any], top_k: int, distinct: str | None = None) -> RetrievalScope:
    return RetrievalScope(stack.memory, dataset_ids, top_k, stack.llm, retrievers=stack.retrievers.get, distinct=distinct)


def _check_items(items: Any, top_k: int) -> None:
    assert isinstance(items, list), f"get_context returned {type(items).__name__}, not a list"
    assert len(items) <= top_k, f"{len(items)} items for top_k={top_k}"
    ids = [item.id for item in items]
    assert len(set(ids)) == len(ids), f"an id appears twice: {ids}"
    for item in items:
        assert isinstance(item, SearchResultItem), f"an item is a {type(item).__name__}"
        assert isinstance(item.id, str) and item.id, f"item id {item.id!r}"
        assert isinstance(item.text, str), f"item text {item.text!r}"
        assert item.score >= 0, f"item {item.id} has distance {item.score!r} < 0"


class RetrieverSuite:
    """The :class:`~memlab.retrievers.Retriever` contract; subclasses provide a ``retriever`` fixture."""

    @pytest.fixture
    def retriever(self) -> Retriever:
        raise NotImplementedError("a RetrieverSuite subclass must provide a `retriever` fixture")

    def test_declared_capabilities(self, retriever: Retriever) -> None:
        assert isinstance(retriever.search_type, SearchType), f"search_type {retriever.search_type!r}"
        for flag in ("completes", "concurrent_turns", "hybrid_retry_when_empty", "skill_gate", "distinct_sources"):
            assert isinstance(getattr(retriever, flag), bool), f"{flag} is {getattr(retriever, flag)!r}, not a bool"
        assert isinstance(type(retriever).runs_concurrently(), bool)

    async def test_context_within_top_k_unique_and_stable(self, retriever: Retriever, tmp_path: Path) -> None:
        async with _memory(tmp_path) as (stack, ids):
            for top_k in (1, 3, 10):
                for query in QUERIES:
                    items = await retriever.get_context(query, _scope(stack, ids, top_k))
                    _check_items(items, top_k)
                    again = await retriever.get_context(query, _scope(stack, ids, top_k))
                    assert [item.id for item in again] == [item.id for item in items], f"{query!r}: the ids changed on a second call"

    async def test_empty_memory_and_blank_query_give_nothing(self, retriever: Retriever, tmp_path: Path) -> None:
        async with _memory(tmp_path / "full") as (stack, ids):
            for blank in ("", "   "):
                assert await retriever.get_context(blank, _scope(stack, ids, 5)) == [], f"a blank query {blank!r} found items"
        async with _memory(tmp_path / "empty", []) as (stack, _):
            empty = await stack.datasets.create("empty")
            assert await retriever.get_context(QUERIES[0], _scope(stack, [empty.id], 5)) == [], "an empty memory found items"

    async def test_distinct_sources_one_item_per_document(self, retriever: Retriever, tmp_path: Path) -> None:
        if not retriever.distinct_sources:
            return  # the scope's distinct is ignored; nothing promised
        async with _memory(tmp_path) as (stack, ids):
            for query in QUERIES:
                items = await retriever.get_context(query, _scope(stack, ids, 10, distinct="data_id"))
                _check_items(items, 10)
                shown: set[str] = set()
                for item in items:
                    assert not shown & set(item.data_ids), f"{query!r}: {item.id} repeats a document already shown"
                    shown.update(item.data_ids)

    async def test_completion(self, retriever: Retriever, tmp_path: Path) -> None:
        if not retriever.completes:
            return  # retrieval only
        async with _memory(tmp_path) as (stack, ids):
            completion = await retriever.get_completion(QUERIES[0], _scope(stack, ids, 3))
            assert isinstance(completion, Completion), f"get_completion returned {type(completion).__name__}"
            assert isinstance(completion.text, str), f"completion text {completion.text!r}"
            assert all(isinstance(item, SearchResultItem) for item in completion.context), "completion context is not items"
            assert all(isinstance(i, str) for i in completion.used_node_ids + completion.used_edge_ids), "used ids not str"
            assert {"llm_calls", "tokens_in", "tokens_out"} <= set(completion.usage), f"usage {completion.usage!r}"
