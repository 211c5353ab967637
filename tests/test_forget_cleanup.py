"""forget() cleans the session cache (SPEC §7): one document, whole datasets, everything; receipts and dry runs."""

from __future__ import annotations

import shutil

import pytest

from memlab import MemoryStack, PermissionDeniedError, ValidationError
from memlab.config import CacheConfig
from memlab.models import SessionContextEntry, SessionFeedbackEntry
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."


async def _only_of(stack, dataset_id, data_id) -> dict[str, list[str]]:
    """The node and edge ids supported by ``data_id`` alone (what deleting it removes)."""
    graph = await stack.memory.graph(dataset_id)
    return {
        "node_ids": [node["id"] for node in graph.nodes() if node["supporters"] == {data_id}],
        "edge_ids": [edge["id"] for edge in graph.edges() if edge["supporters"] == {data_id}],
    }


@pytest.fixture
async def two_docs(stack):
    curie = await stack.remember(CURIE, dataset="science")
    turing = await stack.remember(TURING, dataset="science")
    user = str((await stack.users.default()).id)
    ids = {
        "dataset": curie.dataset_id,
        "curie": curie.data_ids[0],
        "turing": turing.data_ids[0],
        "user": user,
    }
    ids["curie_elements"] = await _only_of(stack, curie.dataset_id, ids["curie"])
    ids["turing_elements"] = await _only_of(stack, curie.dataset_id, ids["turing"])
    assert ids["curie_elements"]["node_ids"] and ids["turing_elements"]["node_ids"]
    return stack, ids


async def _turn(stack, ids, session, question, elements, **fields) -> str:
    return await stack.session_manager.add_qa(
        ids["user"], question, "an answer", session_id=session, dataset_id=ids["dataset"], used_graph_element_ids=elements, **fields
    )


async def _snapshot(stack, ids, *sessions):
    """Everything a delete could change: documents, graph size, every session's turns and context rows."""
    graph = await stack.memory.graph(ids["dataset"])
    documents = [record.id for record in await stack.datasets.list_data("science")]
    cached = {}
    for session in sessions:
        cached[session] = (
            [turn.qa_id for turn in await stack.session_manager.get_session(ids["user"], session_id=session)],
            [row["id"] for row in await stack.session_manager.get_context_entries(ids["user"], session_id=session)],
        )
    return documents, graph.number_of_nodes(), graph.number_of_edges(), cached


async def test_deleting_a_document_removes_exactly_the_turns_that_used_it(two_docs):
    stack, ids = two_docs
    curie_turn = await _turn(stack, ids, "chat", "Who discovered Polonium?", ids["curie_elements"])
    turing_turn = await _turn(stack, ids, "chat", "Where did Turing work?", ids["turing_elements"])
    plain = await stack.remember("just chatting", session_id="chat", self_improvement=False)
    result = await stack.forget(data_id=ids["curie"], dataset="science")
    assert set(result.node_ids) == set(ids["curie_elements"]["node_ids"])
    [cleaned] = result.cleanup.sessions
    assert (cleaned.user_id, cleaned.session_id, cleaned.qa_ids, cleaned.whole_session) == (ids["user"], "chat", [curie_turn], False)
    assert result.cleanup.failures == []
    left = [turn.qa_id for turn in await stack.session.get_session("chat")]
    assert left == [turing_turn, plain.data_ids[0]]


async def test_the_provenance_chain_is_followed_to_a_fixpoint_and_the_rest_survives(two_docs):
    stack, ids = two_docs
    manager, user = stack.session_manager, ids["user"]
    t1 = await _turn(stack, ids, "chat", "Who discovered Polonium?", ids["curie_elements"])
    t2 = await _turn(stack, ids, "chat", "Where did Turing work?", ids["turing_elements"])
    f1 = SessionFeedbackEntry(raw_text="wrong", referenced_qa_ids=[t1])
    f3 = SessionFeedbackEntry(raw_text="great", referenced_qa_ids=[t2])
    l1 = SessionContextEntry(section="rules", content="Name the year of a discovery.", confidence=0.9, source_feedback_ids=[f1.id])
    l3 = SessionContextEntry(section="goals", content="Keep answers short.", confidence=0.9, source_feedback_ids=[f3.id])
    for entry in (f1, f3, l1, l3):
        await manager.add_context_entry(user, entry, session_id="chat")
    t3 = await _turn(stack, ids, "chat", "And Curie's year?", {"node_ids": [], "edge_ids": []}, used_session_context_ids=[l1.id])
    f2 = SessionFeedbackEntry(raw_text="still wrong", referenced_qa_ids=[t3])
    l2 = SessionContextEntry(section="lessons_learned", content="Check the year twice.", confidence=0.8, source_feedback_ids=[f2.id, f3.id])
    for entry in (f2, l2):
        await manager.add_context_entry(user, entry, session_id="chat")
    t4 = await _turn(stack, ids, "chat", "Again?", None, used_session_context_ids=[l2.id, l3.id])

    result = await stack.forget(data_id=ids["curie"], dataset="science")
    [cleaned] = result.cleanup.sessions
    assert cleaned.qa_ids == [t1, t3, t4]
    assert cleaned.context_ids == [f1.id, l1.id, f2.id, l2.id]  # l2 has one clean source (f3): any poisoned source taints it
    assert [turn.qa_id for turn in await stack.session.get_session("chat")] == [t2]
    assert [row["id"] for row in await manager.get_context_entries(user, session_id="chat")] == [f3.id, l3.id]
    frame = result.cleanup.to_frame()
    assert list(frame.columns) == ["user_id", "session_id", "entry_type", "entry_id", "whole_session"]
    assert frame["entry_id"].tolist() == [t1, t3, t4, f1.id, l1.id, f2.id, l2.id]
    assert frame["entry_type"].tolist() == ["qa"] * 3 + ["context"] * 4 and str(frame["whole_session"].dtype) == "bool"


async def test_candidates_are_the_datasets_sessions_and_unattributed_ones_of_every_user(two_docs):
    stack, ids = two_docs
    bob = await stack.users.create("bob")
    await stack.datasets.grant("science", bob, "read")
    other = await stack.remember("Penguins live in Antarctica.", dataset="zoo")
    manager = stack.session_manager
    attributed = await _turn(stack, ids, "a", "q", ids["curie_elements"])
    unattributed = await manager.add_qa(ids["user"], "q", "a", session_id="b", used_graph_element_ids=ids["curie_elements"])
    bobs = await manager.add_qa(str(bob.id), "q", "a", session_id="a", dataset_id=ids["dataset"], used_graph_element_ids=ids["curie_elements"])
    elsewhere = await manager.add_qa(ids["user"], "q", "a", session_id="z", dataset_id=other.dataset_id, used_graph_element_ids=ids["curie_elements"])
    result = await stack.forget(data_id=ids["curie"], dataset="science")
    removed = {(session.user_id, session.session_id): session.qa_ids for session in result.cleanup.sessions}
    assert removed == {(ids["user"], "a"): [attributed], (ids["user"], "b"): [unattributed], (str(bob.id), "a"): [bobs]}
    assert [turn.qa_id for turn in await manager.get_session(ids["user"], session_id="z")] == [elsewhere]  # another dataset's session


async def test_search_turns_that_used_a_deleted_document_are_cleaned(two_docs):
    stack, ids = two_docs
    for question in ("Who discovered Polonium?", "Where did Alan Turing work?", "What did Turing describe?"):
        await stack.search(question, datasets=["science"], session_id="chat", top_k=2)
    before = await stack.session.get_session("chat")
    result = await stack.forget(data_id=ids["curie"], dataset="science")
    gone = set(result.node_ids) | set(result.edge_ids)
    cited = {turn.qa_id for turn in before if gone & set(turn.used_graph_element_ids["node_ids"] + turn.used_graph_element_ids["edge_ids"])}
    assert cited and set(result.cleanup.qa_ids) == cited
    assert [turn.qa_id for turn in await stack.session.get_session("chat")] == [turn.qa_id for turn in before if turn.qa_id not in cited]


@pytest.mark.parametrize("how", ["forget", "memory_only", "empty_dataset"])
async def test_dataset_level_deletes_delete_every_attributed_session(two_docs, how):
    stack, ids = two_docs
    manager, user = stack.session_manager, ids["user"]
    other = await stack.remember("Penguins live in Antarctica.", dataset="zoo")
    recorded = await _turn(stack, ids, "recorded", "q", None)
    await manager.add_context_entry(user, SessionContextEntry(section="goals", content="be brief", confidence=0.9), session_id="recorded")
    named = await manager.add_qa(user, "q", "a", session_id=f"default_session_{ids['dataset']}")
    survivor = await manager.add_qa(user, "q", "a", session_id="zoo-chat", dataset_id=other.dataset_id)
    if how == "forget":
        result = await stack.forget(dataset="science")
    elif how == "memory_only":
        result = await stack.forget(dataset="science", memory_only=True)
    else:
        result = await stack.datasets.empty_dataset("science")
    cleaned = {session.session_id: session for session in result.cleanup.sessions}
    assert set(cleaned) == {"recorded", f"default_session_{ids['dataset']}"}
    assert all(session.whole_session for session in cleaned.values())
    assert cleaned["recorded"].qa_ids == [recorded] and len(cleaned["recorded"].context_ids) == 1
    assert cleaned[f"default_session_{ids['dataset']}"].qa_ids == [named]
    assert await manager.get_session(user, session_id="recorded") == []
    assert await manager.get_context_entries(user, session_id="recorded") == []
    assert [turn.qa_id for turn in await manager.get_session(user, session_id="zoo-chat")] == [survivor]


async def test_forget_everything_prunes_the_users_sessions_only(two_docs):
    stack, ids = two_docs
    manager = stack.session_manager
    bob = await stack.users.create("bob")
    mine = await stack.remember("my own note", session_id="notes", self_improvement=False)
    await _turn(stack, ids, "chat", "q", ids["turing_elements"])
    bobs = await manager.add_qa(str(bob.id), "q", "a", session_id="notes")
    result = await stack.forget(everything=True)
    assert {session.session_id for session in result.cleanup.sessions} == {"notes", "chat"}
    assert mine.data_ids[0] in result.cleanup.qa_ids
    assert await manager.get_session(ids["user"], session_id="notes") == []
    assert await manager.get_session(ids["user"], session_id="chat") == []
    assert [turn.qa_id for turn in await manager.get_session(str(bob.id), session_id="notes")] == [bobs]
    assert result.dataset_ids == [ids["dataset"]]


@pytest.mark.parametrize(
    "call",
    [
        lambda stack, ids, dry: stack.forget(data_id=ids["curie"], dataset="science", dry_run=dry),
        lambda stack, ids, dry: stack.datasets.delete_data("science", ids["curie"], dry_run=dry),
        lambda stack, ids, dry: stack.forget(dataset="science", dry_run=dry),
        lambda stack, ids, dry: stack.forget(dataset="science", memory_only=True, dry_run=dry),
        lambda stack, ids, dry: stack.datasets.empty_dataset("science", dry_run=dry),
        lambda stack, ids, dry: stack.forget(everything=True, dry_run=dry),
    ],
    ids=["forget-data", "delete_data", "forget-dataset", "memory_only", "empty_dataset", "everything"],
)
async def test_a_dry_run_returns_the_real_result_and_changes_nothing(two_docs, call):
    stack, ids = two_docs
    await _turn(stack, ids, "chat", "Who discovered Polonium?", ids["curie_elements"])
    await _turn(stack, ids, "chat", "Where did Turing work?", ids["turing_elements"])
    await stack.remember("a note", session_id="notes", self_improvement=False)
    before = await _snapshot(stack, ids, "chat", "notes")
    dry = await call(stack, ids, True)
    assert dry.dry_run and await _snapshot(stack, ids, "chat", "notes") == before
    assert dry.node_ids and dry.cleanup.sessions
    real = await call(stack, ids, False)
    assert not real.dry_run
    assert dry.model_dump(exclude={"dry_run"}) == real.model_dump(exclude={"dry_run"})


async def test_bad_deletes_raise_before_anything_is_removed(two_docs):
    stack, ids = two_docs
    bob = await stack.users.create("bob")
    await stack.datasets.grant("science", bob, "read")
    await _turn(stack, ids, "chat", "Who discovered Polonium?", ids["curie_elements"])
    before = await _snapshot(stack, ids, "chat")
    with pytest.raises(ValidationError, match="has no document"):
        await stack.forget(data_id="00000000-0000-0000-0000-000000000001", dataset="science")
    with pytest.raises(ValidationError, match="data_id must be a UUID"):
        await stack.forget(data_id="not-a-uuid", dataset="science")
    with pytest.raises(ValidationError, match="does not exist|no dataset named"):
        await stack.forget(data_id=ids["curie"], dataset="nope")
    with pytest.raises(PermissionDeniedError):
        await stack.forget(data_id=ids["curie"], dataset=ids["dataset"], user=bob)
    with pytest.raises(PermissionDeniedError):
        await stack.datasets.empty_dataset(ids["dataset"], user=bob, dry_run=True)
    for flag in ("dry_run", "memory_only", "everything"):
        with pytest.raises(ValidationError, match=flag):
            await stack.forget(dataset="science", **{flag: "yes"})
    assert await _snapshot(stack, ids, "chat") == before


async def test_a_failing_cache_never_fails_the_delete_and_the_receipt_says_so(tmp_path):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    config = fast_config(tmp_path / "root", cache=CacheConfig(db_url=f"sqlite:///{cache_dir}/cache.db"))
    async with MemoryStack.from_config(config, clock=FakeClock()) as stack:
        curie = await stack.remember(CURIE, dataset="science")
        elements = await _only_of(stack, curie.dataset_id, curie.data_ids[0])
        user = str((await stack.users.default()).id)
        await stack.session_manager.add_qa(user, "q", "a", session_id="chat", dataset_id=curie.dataset_id, used_graph_element_ids=elements)
        await stack.cache.close()
        shutil.rmtree(cache_dir)
        cache_dir.write_text("the cache directory is gone")  # the cache cannot be reopened
        result = await stack.forget(data_id=curie.data_ids[0], dataset="science")
        assert result.data_ids == curie.data_ids and set(result.node_ids) == set(elements["node_ids"])
        assert await stack.datasets.list_data("science") == []  # the relational delete completed
        [failure] = result.cleanup.failures
        assert (failure.user_id, failure.session_id, failure.operation) == (user, "chat", "read_session")
        assert failure.error and result.cleanup.sessions == []


async def test_caching_off_gives_an_empty_receipt(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path, cache=CacheConfig(enabled=False))) as stack:
        remembered = await stack.remember(CURIE)
        result = await stack.forget(data_id=remembered.data_ids[0])
        assert result.data_ids == remembered.data_ids and result.cleanup.sessions == [] and result.cleanup.failures == []


async def test_the_persist_watermark_counts_bridged_turns_and_a_delete_lowers_it(two_docs):
    stack, ids = two_docs
    manager, user = stack.session_manager, ids["user"]
    mark_id = None

    async def mark() -> int:
        rows = await manager.get_context_entries(user, session_id="chat")
        [row] = [row for row in rows if row["kind"] == "session_persist_watermark_state"]
        nonlocal mark_id
        mark_id = row["id"]
        return row["count"]

    await stack.remember("Ada Lovelace wrote the first program.", session_id="chat")
    await stack.wait_for_background()
    assert await mark() == 1
    cited = await _turn(stack, ids, "chat", "Who discovered Polonium?", ids["curie_elements"])
    await stack.remember("Grace Hopper built the first compiler.", session_id="chat")
    await stack.wait_for_background()
    assert await mark() == 3
    bridged = {record.name for record in await stack.datasets.list_data("main_dataset")}
    result = await stack.forget(data_id=ids["curie"], dataset="science")
    assert result.cleanup.qa_ids == [cited] and await mark() == 2  # the removed turn had been counted
    assert mark_id not in result.cleanup.context_ids  # bookkeeping rows are not listed as removed entries
    await stack.remember("Katherine Johnson computed orbits.", session_id="chat")
    await stack.wait_for_background()
    assert await mark() == 3
    texts = [record for record in await stack.datasets.list_data("main_dataset")]
    assert len(texts) == len(bridged) + 1  # only the new turn became a document


@pytest.mark.parametrize("how", ["document", "dataset"])
async def test_a_session_attributed_elsewhere_is_cleaned_when_a_dataset_it_read_loses_elements(stack, how):
    """A session belongs to its first dataset; a later turn over every dataset still gets cleaned when another dataset's element goes."""
    await stack.remember(CURIE, dataset="science")
    turing = await stack.remember(TURING, dataset="history")
    await stack.remember("Ada Lovelace wrote the first program.", dataset="history")
    [kept] = await stack.search("Who discovered Polonium?", session_id="chat", datasets=["science"])
    [mixed] = await stack.search("Where did Alan Turing work?", session_id="chat")  # every dataset the user can read
    if how == "document":
        result = await stack.forget(data_id=turing.data_ids[0], dataset="history")
    else:
        result = await stack.forget(dataset="history")
    removed = set(result.node_ids) | set(result.edge_ids)
    assert set(mixed.raw["used_node_ids"]) & removed
    assert [(s.session_id, s.qa_ids, s.whole_session) for s in result.cleanup.sessions] == [("chat", [mixed.raw["qa_id"]], False)]
    assert [turn.qa_id for turn in await stack.session.get_session("chat")] == [kept.raw["qa_id"]]
