"""MemlabStore against LangGraph's documented BaseStore contract (written from its docs; real langgraph).

The contract: ``put`` upserts (``value=None`` deletes), ``get`` / ``delete``, ``search``
over a namespace prefix with ``filter`` / ``query`` / ``limit`` / ``offset``,
``list_namespaces`` with prefix / suffix / wildcards / ``max_depth``, namespace label
rules, ``batch`` / ``abatch`` with one result per op, semantic search through an
``index``, and TTL support declared by ``supports_ttl``.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from memlab import MemoryStack
from memlab.config import TTLConfig
from memlab.exceptions import ValidationError
from memlab.integrations.langgraph import MemlabStore
from memlab.testing import FakeClock, fast_config
from memlab.testing.suppliers import supply_backend


@pytest.fixture(params=[
    "sqlite", "memory", "fs", "fakeredis",
    pytest.param("redis", marks=pytest.mark.server), pytest.param("postgres", marks=pytest.mark.server),
])
async def stack(request, tmp_path):
    """An open stack (FakeClock, fast config) on each cache backend (the servers' under ``make test``): the store runs on any."""
    clock = FakeClock()
    async with supply_backend(request.param, tmp_path=tmp_path / "cache", clock=clock) as cache:
        async with MemoryStack.from_config(fast_config(tmp_path), cache=cache, clock=clock) as opened:
            yield opened


@pytest.fixture
def store(stack):
    return MemlabStore(stack)


@pytest.fixture
def indexed(stack):
    return MemlabStore(stack, index={"fields": ["text"]})


async def test_it_is_a_langgraph_store_without_ttl_support(store):
    assert isinstance(store, BaseStore)
    assert store.supports_ttl is False


# -- put / get / delete --------------------------------------------------------------------


async def test_put_then_get_returns_the_item(store, stack):
    await store.aput(("users", "u1"), "prefs", {"theme": "dark", "n": 3})
    item = await store.aget(("users", "u1"), "prefs")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (("users", "u1"), "prefs", {"theme": "dark", "n": 3})
    assert isinstance(item.created_at, datetime) and item.created_at == item.updated_at == stack.clock.now()


async def test_get_of_a_missing_key_or_namespace_is_none(store):
    await store.aput(("users", "u1"), "prefs", {"a": 1})
    assert await store.aget(("users", "u1"), "other") is None
    assert await store.aget(("users", "u2"), "prefs") is None


async def test_put_overwrites_keeping_created_at(store, stack):
    await store.aput(("ns",), "k", {"v": 1})
    first = await store.aget(("ns",), "k")
    stack.clock.advance(60)
    await store.aput(("ns",), "k", {"v": 2})
    second = await store.aget(("ns",), "k")
    assert second.value == {"v": 2}
    assert second.created_at == first.created_at
    assert (second.updated_at - first.updated_at).total_seconds() == 60


async def test_keys_are_any_strings_and_namespaces_do_not_collide(store):
    keys = ["", " ", "a/b", "ключ", "x" * 2000, "new\nline"]
    for key in keys:
        await store.aput(("ns",), key, {"key": key})
    for key in keys:
        assert (await store.aget(("ns",), key)).value == {"key": key}
    await store.aput(("ns", "sub"), "", {"other": True})
    assert (await store.aget(("ns",), "")).value == {"key": ""}


async def test_delete_and_put_none_remove_the_item(store):
    await store.aput(("ns",), "a", {"v": 1})
    await store.aput(("ns",), "b", {"v": 2})
    await store.adelete(("ns",), "a")
    await store.aput(("ns",), "b", None)
    assert await store.aget(("ns",), "a") is None
    assert await store.aget(("ns",), "b") is None
    await store.adelete(("ns",), "never-there")  # no error


@pytest.mark.parametrize("namespace", [(), ("a.b",), ("",), ("langgraph", "x")])
async def test_invalid_namespaces_are_refused(store, namespace):
    with pytest.raises(InvalidNamespaceError):
        await store.aput(namespace, "k", {"v": 1})


async def test_ops_passed_to_batch_directly_are_validated_too(store):
    with pytest.raises(InvalidNamespaceError):
        await store.abatch([GetOp(("a.b",), "k")])


async def test_a_value_must_be_a_json_dict(store):
    with pytest.raises(ValidationError):
        await store.abatch([PutOp(("ns",), "k", ["not", "a", "dict"])])  # type: ignore[arg-type]


async def test_per_item_ttl_is_refused(store):
    with pytest.raises(NotImplementedError):
        await store.aput(("ns",), "k", {"v": 1}, ttl=5)
    with pytest.raises(NotImplementedError):
        await store.abatch([PutOp(("ns",), "k", {"v": 1}, ttl=5)])


# -- search --------------------------------------------------------------------------------


async def _three_namespaces(store):
    await store.aput(("docs", "a"), "1", {"kind": "report", "score": 5, "meta": {"lang": "en"}})
    await store.aput(("docs", "b"), "2", {"kind": "memo", "score": 2, "meta": {"lang": "fr"}})
    await store.aput(("docsx",), "3", {"kind": "report", "score": 9})


async def test_search_covers_the_namespaces_under_a_label_prefix(store):
    await _three_namespaces(store)
    assert sorted(i.key for i in await store.asearch(("docs",))) == ["1", "2"]  # ("docsx",) is another label
    assert sorted(i.key for i in await store.asearch(())) == ["1", "2", "3"]
    assert [i.key for i in await store.asearch(("docs", "a"))] == ["1"]
    assert await store.asearch(("nothing",)) == []
    assert all(isinstance(i, SearchItem) and i.score is None for i in await store.asearch(()))


async def test_search_filters_by_equality_operators_and_nested_paths(store):
    await _three_namespaces(store)

    async def keys(**filter_):
        return sorted(i.key for i in await store.asearch((), filter=filter_))

    assert await keys(kind="report") == ["1", "3"]
    assert await keys(kind="report", score=5) == ["1"]
    assert await keys(score={"$gt": 4}) == ["1", "3"]
    assert await keys(score={"$gte": 2, "$lt": 9}) == ["1", "2"]
    assert await keys(score={"$lte": 2}) == ["2"]
    assert await keys(kind={"$ne": "report"}) == ["2"]
    assert await keys(kind={"$eq": "memo"}) == ["2"]
    assert await keys(**{"meta.lang": "fr"}) == ["2"]
    assert await keys(meta={"lang": "en"}) == ["1"]
    assert await keys(missing="x") == []
    with pytest.raises(ValidationError, match="operator"):
        await keys(score={"$regex": "x"})


async def test_search_without_a_query_lists_the_most_recently_updated_first_with_limit_and_offset(store, stack):
    for key in "abcde":
        await store.aput(("ns",), key, {"key": key})
        stack.clock.advance(1)
    assert [i.key for i in await store.asearch(("ns",), limit=2)] == ["e", "d"]
    assert [i.key for i in await store.asearch(("ns",), limit=2, offset=2)] == ["c", "b"]
    assert [i.key for i in await store.asearch(("ns",), offset=4)] == ["a"]
    assert len(await store.asearch(("ns",))) == 5  # the default limit is 10


# -- semantic search -------------------------------------------------------------------------


async def test_semantic_search_ranks_by_similarity_through_memlabs_embedder(indexed):
    await indexed.aput(("mem",), "pizza", {"text": "I love pizza with mushrooms"})
    await indexed.aput(("mem",), "bike", {"text": "my bike has a flat tyre"})
    await indexed.aput(("mem",), "raw", {"text": "pizza pizza pizza"}, index=False)
    found = await indexed.asearch(("mem",), query="pizza with mushrooms")
    assert [i.key for i in found] == ["pizza", "bike", "raw"]
    assert found[0].score > found[1].score
    assert found[2].score is None  # stored unindexed: after the ranked ones
    assert [i.key for i in await indexed.asearch(("mem",), query="flat tyre", limit=1)] == ["bike"]


async def test_semantic_search_combines_with_filters(indexed):
    await indexed.aput(("mem",), "a", {"text": "pizza night", "who": "ann"})
    await indexed.aput(("mem",), "b", {"text": "pizza lunch", "who": "bob"})
    assert [i.key for i in await indexed.asearch(("mem",), query="pizza", filter={"who": "bob"})] == ["b"]


async def test_per_item_fields_override_the_index_fields(indexed):
    await indexed.aput(("mem",), "a", {"text": "nothing relevant", "title": "gardening tomatoes"}, index=["title"])
    await indexed.aput(("mem",), "b", {"text": "about cars", "title": "nothing"})
    assert (await indexed.asearch(("mem",), query="gardening tomatoes"))[0].key == "a"


async def test_a_custom_embed_function_and_dims_are_honoured(stack):
    calls = []

    def embed(texts):
        calls.append(list(texts))
        return [[1.0, float("cat" in t)] for t in texts]

    store = MemlabStore(stack, index={"dims": 2, "embed": embed, "fields": ["text"]})
    await store.aput(("ns",), "cat", {"text": "a cat"})
    await store.aput(("ns",), "dog", {"text": "a dog"})
    assert [i.key for i in await store.asearch(("ns",), query="cat")] == ["cat", "dog"]
    assert calls[0] == ["a cat"]
    wrong = MemlabStore(stack, index={"dims": 3, "embed": embed})
    with pytest.raises(ValidationError, match="dims"):
        await wrong.aput(("ns",), "x", {"text": "x"})


async def test_without_an_index_a_query_does_not_rank(store):
    await store.aput(("ns",), "a", {"text": "pizza"})
    assert [(i.key, i.score) for i in await store.asearch(("ns",), query="pizza")] == [("a", None)]


# -- list_namespaces ------------------------------------------------------------------------------


async def test_list_namespaces_matches_prefix_suffix_wildcards_and_depth(store):
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]:
        await store.aput(namespace, "k", {"v": 1})
    assert await store.alist_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]
    assert await store.alist_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "x")]
    assert await store.alist_namespaces(suffix=("c",)) == [("a", "b", "c"), ("z", "b", "c")]
    assert await store.alist_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("z", "b", "c")]
    assert await store.alist_namespaces(prefix=("a",), suffix=("*", "d")) == [("a", "b", "d")]
    assert await store.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert await store.alist_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]
    assert await store.alist_namespaces(prefix=("a", "b", "c", "d")) == []


async def test_a_namespace_emptied_by_deletes_is_no_longer_listed(store):
    await store.aput(("keep",), "k", {"v": 1})
    await store.aput(("gone",), "k", {"v": 1})
    await store.adelete(("gone",), "k")
    assert await store.alist_namespaces() == [("keep",)]


# -- batch --------------------------------------------------------------------------------------


async def test_batch_returns_one_result_per_op_and_reads_see_the_state_before_the_batch(store):
    await store.aput(("ns",), "old", {"v": 0})
    results = await store.abatch([
        PutOp(("ns",), "new", {"v": 1}),
        GetOp(("ns",), "new"),
        GetOp(("ns",), "old"),
        SearchOp(("ns",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("ns",)),)),
        PutOp(("ns",), "new", {"v": 2}),
    ])
    assert len(results) == 6
    assert results[0] is None and results[5] is None
    assert results[1] is None  # the put of the same batch is applied after its reads
    assert results[2].value == {"v": 0}
    assert [i.key for i in results[3]] == ["old"]
    assert results[4] == [("ns",)]
    assert (await store.aget(("ns",), "new")).value == {"v": 2}  # the last write of a key wins


async def test_batch_of_nothing_is_nothing(store):
    assert await store.abatch([]) == []


# -- where the items live ------------------------------------------------------------------------


async def test_another_store_on_the_same_stack_sees_the_items_unless_its_prefix_or_user_differ(stack, store):
    await store.aput(("ns",), "k", {"v": 1})
    assert (await MemlabStore(stack).aget(("ns",), "k")).value == {"v": 1}
    assert await MemlabStore(stack, prefix="other").aget(("ns",), "k") is None
    bob = await stack.users.create("bob")
    assert await MemlabStore(stack, user=bob).aget(("ns",), "k") is None


async def test_items_survive_a_restart_of_the_stack(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        await MemlabStore(stack).aput(("ns",), "k", {"v": 1})
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        assert (await MemlabStore(stack).aget(("ns",), "k")).value == {"v": 1}


async def test_items_expire_with_memlabs_session_ttl(tmp_path):
    clock = FakeClock()
    async with MemoryStack.from_config(fast_config(tmp_path, ttl=TTLConfig(seconds=3600)), clock=clock) as stack:
        store = MemlabStore(stack)
        await store.aput(("ns",), "k", {"v": 1})
        clock.advance(1800)
        assert await store.aget(("ns",), "k") is not None
        clock.advance(3600)
        assert await store.aget(("ns",), "k") is None
        assert await store.alist_namespaces() == []


async def test_a_prefix_with_a_colon_is_refused(stack):
    with pytest.raises(ValidationError):
        MemlabStore(stack, prefix="a:b")


def test_sync_methods_while_the_stack_runs_on_another_thread(threaded_stack):
    store = MemlabStore(threaded_stack.stack, loop=threaded_stack.loop, index={"fields": ["text"]})
    store.put(("ns",), "k", {"text": "sync pizza"})
    assert store.get(("ns",), "k").value == {"text": "sync pizza"}
    assert [i.key for i in store.search(("ns",), query="pizza")] == ["k"]
    assert store.list_namespaces() == [("ns",)]
    store.delete(("ns",), "k")
    assert store.get(("ns",), "k") is None


async def test_an_item_rewritten_unindexed_or_deleted_loses_its_vectors(indexed):
    await indexed.aput(("mem",), "a", {"text": "pizza"})
    await indexed.aput(("mem",), "b", {"text": "pizza"})
    await indexed.aput(("mem",), "a", {"text": "pizza"}, index=False)
    await indexed.adelete(("mem",), "b")
    await indexed.aput(("mem",), "b", {"text": "pizza"}, index=False)
    assert sorted((i.key, i.score) for i in await indexed.asearch(("mem",), query="pizza")) == [("a", None), ("b", None)]
