"""recall() and search() end to end on a real stack (issue 5): sources, routing, warm-up, skills, search()."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, field_validator

from memlab import (
    GraphRecallResponse,
    MemoryStack,
    PermissionDeniedError,
    SearchType,
    SessionContextEntry,
    SessionContextRecallResponse,
    SessionRecallResponse,
    SkillRecallResponse,
    SystemRecallResponse,
    ValidationError,
)
from memlab.config import LLMConfig, RecallConfig
from memlab.llm import LLMError
from memlab.testing import fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
DEPLOY = "# Deploy the service\n\nHow to deploy the service: build the image, run the migrations, then restart the workers."


@pytest.fixture
async def filled(stack):
    await stack.remember([CURIE, TURING])
    return stack


async def test_fresh_memory_answers_with_a_warming_up_marker(stack):
    [marker] = await stack.recall("Who discovered Polonium?")
    assert isinstance(marker, SystemRecallResponse)
    assert (marker.status, marker.datapoint_count, marker.threshold) == ("memory_warming_up", 0, 1)
    assert "warming up" in marker.text
    assert await stack.recall("Who discovered Polonium?", only_context=True) == []  # only_context bypasses the probe


async def test_failed_build_marker_then_warm_after_a_good_build(tmp_path):
    broken = fast_config(tmp_path, llm=LLMConfig(model="memlab-missing-provider/none"))
    async with MemoryStack.from_config(broken) as stack:
        with pytest.raises(LLMError):
            await stack.remember("Contact alice@example.com about Polonium.")
        [marker] = await stack.recall("Polonium?")
        assert marker.status == "build_failed" and marker.error_class == "LLMError"
        assert marker.error_message and "alice@example.com" not in marker.error_message
        assert "LLMError" in marker.text
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        await stack.remember(CURIE)
        results = await stack.recall("Who discovered Polonium?")
        assert results and all(isinstance(result, GraphRecallResponse) for result in results)


async def test_cold_graph_is_silent_beside_other_sources(stack):
    await stack.remember("Notes about Polonium", session_id="chat", self_improvement=False)
    await stack.datasets.create("empty")
    results = await stack.recall("uranium", session_id="chat", datasets=["empty"])
    assert results == []  # no session hit, and a cold graph adds no marker when it is not the sole source


async def test_warmup_can_be_switched_off(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path, recall=RecallConfig(warmup_shortcircuit=False))) as stack:
        assert await stack.recall("Who discovered Polonium?") == []


async def test_default_routes_to_hybrid_answer_with_provenance(filled):
    [result] = await filled.recall("Who discovered Polonium?")
    assert isinstance(result, GraphRecallResponse)
    assert (result.kind, result.search_type) == ("answer", "HYBRID_COMPLETION")
    assert "Marie Curie" in result.text
    graph = await filled.memory.graph((await filled.datasets.get("main_dataset")).id)
    assert result.raw["used_node_ids"] and all(graph.node(node) for node in result.raw["used_node_ids"])


async def test_quoted_phrase_routes_lexical_and_falls_back_when_empty(filled):
    results = await filled.recall('"Bletchley Park"')
    assert results and {r.search_type for r in results} == {"CHUNKS_LEXICAL"} and "Bletchley Park" in results[0].text
    [fallback] = await filled.recall('"no such phrase anywhere"')
    assert fallback.search_type == "HYBRID_COMPLETION"
    explicit = await filled.recall('"no such phrase anywhere"', query_type=SearchType.CHUNKS_LEXICAL)
    assert explicit == []  # an explicit type is never rerouted


async def test_time_scoped_question_routes_temporal_and_auto_route_off_is_hybrid(filled):
    [temporal] = await filled.recall("What happened in 1898?")
    assert temporal.search_type == "TEMPORAL"
    [hybrid] = await filled.recall("What happened in 1898?", auto_route=False)
    assert hybrid.search_type == "HYBRID_COMPLETION"


async def test_retrieval_types_return_ranked_items(filled):
    results = await filled.recall("Who discovered Polonium?", query_type="CHUNKS", top_k=2)
    assert [r.kind for r in results] == ["chunk", "chunk"] and results[0].text == CURIE
    assert results[0].score <= results[1].score and results[0].raw["data_ids"]
    context = await filled.recall("Who discovered Polonium?", query_type=SearchType.GRAPH_COMPLETION, only_context=True, top_k=3)
    assert context and all(r.kind == "triplet" for r in context) and len(context) <= 3


async def test_session_first_short_circuit(filled):
    await filled.remember("Polonium was on my mind today.", session_id="chat", self_improvement=False)
    results = await filled.recall("polonium", session_id="chat")
    assert results and all(isinstance(r, SessionRecallResponse) for r in results)
    misses = await filled.recall("Who worked at Bletchley Park?", session_id="chat")
    assert misses and all(isinstance(r, GraphRecallResponse) for r in misses)  # no session hit: the graph answers
    both = await filled.recall("polonium", session_id="chat", datasets=["main_dataset"])
    assert {r.source for r in both} == {"session", "graph"}  # datasets given: both contribute
    only_session = await filled.recall("rockets", session_id="chat", scope="session")
    assert only_session == []


async def test_a_recall_answer_in_a_session_is_stored_as_a_turn_with_its_graph_elements(filled):
    [answer] = await filled.recall("Who worked at Bletchley Park?", session_id="chat", query_type="GRAPH_COMPLETION")
    assert answer.kind == "answer" and answer.raw["qa_id"]
    [turn] = await filled.session.get_session("chat")
    assert turn.qa_id == answer.raw["qa_id"] and turn.question == "Who worked at Bletchley Park?" and turn.answer == answer.text
    assert turn.used_graph_element_ids == {"node_ids": answer.raw["used_node_ids"], "edge_ids": answer.raw["used_edge_ids"]}
    assert turn.used_graph_element_ids["node_ids"] and turn.memify_metadata["turn_source"] == "recall"
    hits = await filled.recall("bletchley", session_id="chat", scope="session")
    assert [hit.qa_id for hit in hits] == [turn.qa_id]  # the stored answer is session memory now


async def test_a_recall_only_retrieving_or_in_another_session_stores_nothing_in_this_one(filled):
    await filled.recall("Who worked at Bletchley Park?", query_type="GRAPH_COMPLETION")  # a turn of the default session
    await filled.recall("Bletchley Park", session_id="chat", query_type="CHUNKS")
    await filled.recall("Who worked at Bletchley Park?", session_id="chat", only_context=True)
    assert await filled.session.get_session("chat") == []


async def test_scope_session_context_returns_the_usable_guidance_read_only(filled):
    manager = filled.session_manager
    user = str((await filled.users.default()).id)
    good = SessionContextEntry(section="rules", content="Always cite the source document.", confidence=0.9)
    harmful = SessionContextEntry(section="goals", content="Answer in French.", confidence=0.9, harmful_count=1)
    for entry in (good, harmful):
        await manager.add_context_entry(user, entry, session_id="chat")
    [result] = await filled.recall("Who worked at Bletchley Park?", session_id="chat", scope="session_context")
    assert isinstance(result, SessionContextRecallResponse) and result.session_id == "chat"
    assert [entry.id for entry in result.entries] == [good.id] and "Always cite the source document." in result.content
    assert "French" not in result.content
    stored = {row["id"]: row for row in await manager.get_context_entries(user, session_id="chat")}
    assert stored[good.id].get("last_served_at") is None  # read-only: nothing stamped
    assert await filled.recall("anything", session_id="empty", scope="session_context") == []


async def test_scope_graph_ignores_the_session(filled):
    await filled.remember("Polonium again.", session_id="chat", self_improvement=False)
    results = await filled.recall("polonium", session_id="chat", scope="graph")
    assert results and all(r.source == "graph" for r in results)


class Discovery(BaseModel):
    element: str
    discoverer: str


async def test_structured_output(filled):
    [result] = await filled.recall("Who discovered Polonium?", query_type="GRAPH_COMPLETION", response_model=Discovery)
    assert isinstance(result.structured, Discovery)
    with pytest.raises(ValidationError):
        await filled.recall("Who discovered Polonium?", query_type="CHUNKS", response_model=Discovery)


async def test_permissions_on_recall(filled):
    other = await filled.users.create("other")
    main = await filled.datasets.get("main_dataset")
    with pytest.raises(PermissionDeniedError):
        await filled.recall("Polonium", dataset_ids=[main.id], user=other)
    [marker] = await filled.recall("Polonium", user=other)  # nothing of main_dataset leaks: other has no memory
    assert marker.status == "memory_warming_up"
    await filled.datasets.grant(main, other, "read")
    results = await filled.recall("Who discovered Polonium?", user=other, query_type="CHUNKS")
    assert results[0].text == CURIE


async def test_skill_gate_adds_skills_for_one_dataset(stack):
    await stack.remember(DEPLOY, dataset="ops", tags=["skills"])
    await stack.remember(CURIE, dataset="ops")
    await stack.remember(TURING, dataset="other")
    results = await stack.recall("How do I deploy the service?", datasets=["ops"])
    assert isinstance(results[-1], SkillRecallResponse) and "Deploy the service" in results[-1].text
    assert not any(isinstance(r, SkillRecallResponse) for r in await stack.recall("How do I deploy the service?"))  # no single dataset
    two = await stack.recall("How do I deploy the service?", datasets=["ops", "other"])
    assert not any(isinstance(r, SkillRecallResponse) for r in two)
    quiet = await stack.recall("Who discovered Polonium?", datasets=["ops"])
    assert not any(isinstance(r, SkillRecallResponse) for r in quiet)  # the gate did not fire


async def test_skill_gated_recall_embeds_the_query_once(stack, monkeypatch):
    await stack.remember(DEPLOY, dataset="ops", tags=["skills"])
    await stack.remember(CURIE, dataset="ops")
    query = "How do I deploy the service?"
    embedded = []
    embed = stack.memory.embedder.embed

    async def counted(texts):
        embedded.extend(texts)
        return await embed(texts)

    monkeypatch.setattr(stack.memory.embedder, "embed", counted)
    results = await stack.recall(query, datasets=["ops"])
    assert isinstance(results[-1], SkillRecallResponse)
    assert embedded.count(query) == 1


async def test_skill_gate_can_be_disabled(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path, recall=RecallConfig(skill_gate_enabled=False))) as stack:
        await stack.remember(DEPLOY, dataset="ops", tags=["skills"])
        results = await stack.recall("How do I deploy the service?", datasets=["ops"])
        assert not any(isinstance(r, SkillRecallResponse) for r in results)


async def test_search_completion_saves_the_turn_with_used_elements(filled):
    [answer] = await filled.search("Who discovered Polonium?", session_id="s1")
    assert "Marie Curie" in answer.text and answer.search_type == "GRAPH_COMPLETION"
    [turn] = await filled.session.get_session(session_id="s1")
    assert turn.question == "Who discovered Polonium?" and turn.answer == answer.text and turn.qa_id == answer.raw["qa_id"]
    assert turn.used_graph_element_ids["edge_ids"] == answer.raw["used_edge_ids"] and turn.used_graph_element_ids["node_ids"]
    await filled.search("And where did she work?", session_id="s1")
    assert len(await filled.session.get_session(session_id="s1")) == 2


async def test_search_retrieval_only_leaves_the_session_alone(filled):
    results = await filled.search("Polonium", SearchType.CHUNKS, session_id="s2")
    assert results and results[0].kind == "chunk"
    assert await filled.session.get_session(session_id="s2") == []
    await filled.search("Who discovered Polonium?", only_context=True, session_id="s2")
    assert await filled.session.get_session(session_id="s2") == []


async def test_search_without_session_id_uses_the_dataset_default_session(filled):
    await filled.search("Who discovered Polonium?")
    main = await filled.datasets.get("main_dataset")
    turns = await filled.session.get_session()  # the main_dataset default session
    assert len(turns) == 1 and filled.session_manager.resolve_session_id(None, main.id) == f"default_session_{main.id}"


async def test_empty_query_and_bad_arguments(filled):
    assert await filled.recall("   ") == [] and await filled.search("") == []
    with pytest.raises(ValidationError):
        await filled.search("x", "NOT_A_TYPE")
    with pytest.raises(ValidationError):
        await filled.search("x", top_k=0)


class Impossible(BaseModel):
    year: int

    @field_validator("year")
    @classmethod
    def _never(cls, value: int) -> int:
        raise ValueError("no year is acceptable")


async def test_unfillable_response_model_raises_with_the_raw_text(filled):
    from memlab.llm import StructuredOutputError

    with pytest.raises(StructuredOutputError) as failure:
        await filled.recall("Who discovered Polonium?", query_type="GRAPH_COMPLETION", response_model=Impossible)
    assert isinstance(failure.value, ValidationError) and failure.value.raw_text
    assert (await filled.recall("Who discovered Polonium?", query_type="CHUNKS"))  # the stack still works


async def test_an_agent_user_searches_its_parents_dataset_by_id(filled):
    parent = await filled.users.default()
    agent = await filled.users.create("agent", parent_user_id=parent.id)
    main = await filled.datasets.get("main_dataset")
    await filled.datasets.grant(main, agent, "read")
    with pytest.raises(ValidationError):  # names resolve among the agent's own datasets
        await filled.search("Who discovered Polonium?", datasets=["main_dataset"], user=agent)
    for given in (main.id, str(main.id)):
        [answer] = await filled.search("Who discovered Polonium?", dataset_ids=[given], user=agent)
        assert "Marie Curie" in answer.text
        assert answer.raw["session_id"] == f"default_session_{main.id}"  # the default session of the dataset named by id
    results = await filled.search("Polonium", SearchType.CHUNKS, dataset_ids=[str(main.id)], user=agent)
    assert results and results[0].text == CURIE


@pytest.mark.parametrize("call", ["search", "recall"])
@pytest.mark.parametrize("bad", ["main_dataset", 42, "not-a-uuid"])
async def test_dataset_ids_that_are_not_ids_are_refused_before_any_read(filled, call, bad):
    with pytest.raises(ValidationError, match="dataset_ids must be UUIDs") as caught:
        await getattr(filled, call)("Who discovered Polonium?", dataset_ids=[bad])
    assert repr(bad) in str(caught.value)
