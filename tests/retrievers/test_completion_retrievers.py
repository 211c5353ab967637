"""Completion retrievers (issue 5) on a real stack with the offline LLM and the hashing embedder."""

from __future__ import annotations

import uuid

import pytest

from memlab.retrievers import Retrievers
from pydantic import BaseModel

import memlab.retrievers as retrievers
from memlab import MemoryStack, ValidationError
from memlab.llm import I_DONT_KNOW, StructuredOutputError
from memlab.retrievers import (
    AgenticCompletionRetriever,
    CompletionRetriever,
    FeelingLuckyRetriever,
    FollowUpQuestion,
    GraphCompletionContextExtensionRetriever,
    GraphCompletionCotRetriever,
    GraphCompletionRetriever,
    GraphSummaryCompletionRetriever,
    HybridCompletionRetriever,
    RetrievalPlan,
    SearchType,
    SearchTypeChoice,
    TripletCompletionRetriever,
)
from memlab.retrievers._base import RetrievalScope, Retriever, SearchResultItem, vector_items
from memlab.retrievers._agentic import offline_plan, offline_search_type
from memlab.retrievers._graph_completion import ENTITY_HOP_COST, offline_follow_up, relationship_triplets
from memlab.testing import FakeClock, fast_config

DOCS = [
    "Marie Curie discovered Polonium in 1898.",
    "Marie Curie was born in Warsaw.",
    "Alan Turing worked at Bletchley Park.",
    "Pierre Curie married Marie Curie in 1895.",
]
QUESTION = "Who discovered Polonium?"

ALL = [
    CompletionRetriever,
    GraphCompletionRetriever,
    GraphCompletionCotRetriever,
    GraphCompletionContextExtensionRetriever,
    GraphSummaryCompletionRetriever,
    TripletCompletionRetriever,
    HybridCompletionRetriever,
    AgenticCompletionRetriever,
    FeelingLuckyRetriever,
]


class RecordingLLM:
    """Wraps the stack's LLM client and records every call (messages, response_model) and its result."""

    def __init__(self, llm) -> None:
        self.llm = llm
        self.handlers = llm.handlers
        self.calls: list[tuple[list[dict], type | None]] = []
        self.results = []

    async def complete(self, messages, *, response_model=None, **kwargs):
        self.calls.append((messages, response_model))
        result = await self.llm.complete(messages, response_model=response_model, **kwargs)
        self.results.append(result)
        return result

    def prompt(self, index: int = -1) -> str:
        return "\n".join(message["content"] for message in self.calls[index][0])


@pytest.fixture
async def dataset_id(stack):
    return (await stack.remember(DOCS)).dataset_id


def _scope(stack, dataset_id, top_k=3, **kwargs) -> tuple[RetrievalScope, RecordingLLM]:
    llm = RecordingLLM(stack.llm)
    kwargs.setdefault("retrievers", stack.retrievers.get)  # as the stack's flows build it
    return RetrievalScope(stack.memory, [dataset_id], top_k, llm, **kwargs), llm


# --- answers and the Completion contract ------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
async def test_answers_an_obvious_question(stack, dataset_id, cls) -> None:
    scope, llm = _scope(stack, dataset_id)
    completion = await cls().get_completion(QUESTION, scope)
    assert "Marie Curie" in completion.text
    assert completion.structured is None
    assert completion.usage["llm_calls"] == len(llm.calls) >= 1
    assert completion.usage["tokens_in"] == sum(result.tokens_in for result in llm.results)
    assert completion.usage["tokens_out"] == sum(result.tokens_out for result in llm.results)


@pytest.mark.parametrize("cls", ALL)
async def test_context_contract(stack, dataset_id, cls) -> None:
    scope, _ = _scope(stack, dataset_id, top_k=2)
    items = await cls().get_context(QUESTION, scope)
    assert 1 <= len(items) <= 2
    scores = [item.score for item in items]
    assert scores == sorted(scores) and all(score >= 0 for score in scores)
    assert len({item.id for item in items}) == len(items)
    again, _ = _scope(stack, dataset_id, top_k=2)
    assert [item.id for item in await cls().get_context(QUESTION, again)] == [item.id for item in items]
    assert await cls().get_context("   ", scope) == []


@pytest.mark.parametrize("cls", ALL)
async def test_used_ids_are_graph_elements_in_the_prompt(stack, dataset_id, cls) -> None:
    scope, llm = _scope(stack, dataset_id)
    completion = await cls().get_completion(QUESTION, scope)
    graph = await stack.memory.graph(dataset_id)
    assert completion.context
    assert completion.used_node_ids == list(dict.fromkeys(n for item in completion.context for n in item.node_ids))
    assert completion.used_edge_ids == list(dict.fromkeys(e for item in completion.context for e in item.edge_ids))
    assert all(graph.has_element(element) for element in completion.used_node_ids + completion.used_edge_ids)
    # every context item is in the prompt that produced the answer (the summarising call for the summary type)
    prompt = llm.prompt(0 if cls is GraphSummaryCompletionRetriever else -1)
    assert all(" ".join(item.text.split()) in prompt for item in completion.context)


async def test_completion_context_of_the_graph_types_is_triplets(stack, dataset_id) -> None:
    scope, _ = _scope(stack, dataset_id)
    for cls in (GraphCompletionRetriever, GraphCompletionCotRetriever, TripletCompletionRetriever):
        completion = await cls().get_completion(QUESTION, scope)
        for item in completion.context:
            assert item.kind == "triplet" and len(item.node_ids) == 2 and item.edge_ids == [item.id]


# --- classes ------------------------------------------------------------------------------


def test_subclass_relations_and_search_types() -> None:
    for cls in (GraphCompletionCotRetriever, GraphCompletionContextExtensionRetriever, GraphSummaryCompletionRetriever):
        assert issubclass(cls, GraphCompletionRetriever) and cls is not GraphCompletionRetriever
    assert not issubclass(TripletCompletionRetriever, (GraphCompletionRetriever, CompletionRetriever))
    assert not issubclass(HybridCompletionRetriever, (GraphCompletionRetriever, CompletionRetriever))
    assert type(GraphCompletionRetriever()) is GraphCompletionRetriever
    assert type(GraphCompletionCotRetriever()) is not GraphCompletionRetriever
    assert [cls.search_type for cls in ALL] == [
        SearchType.RAG_COMPLETION,
        SearchType.GRAPH_COMPLETION,
        SearchType.GRAPH_COMPLETION_COT,
        SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION,
        SearchType.GRAPH_SUMMARY_COMPLETION,
        SearchType.TRIPLET_COMPLETION,
        SearchType.HYBRID_COMPLETION,
        SearchType.AGENTIC_COMPLETION,
        SearchType.FEELING_LUCKY,
    ]
    assert all(cls.completes for cls in ALL)
    assert {cls.__name__ for cls in ALL} <= set(retrievers.__all__)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda value: GraphCompletionCotRetriever(max_iter=value), "max_iter"),
        (lambda value: GraphCompletionContextExtensionRetriever(context_extension_rounds=value), "context_extension_rounds"),
    ],
)
@pytest.mark.parametrize("value", [-1, 1.5, "2", True, None])
def test_bad_round_counts_raise(make, name, value) -> None:
    with pytest.raises(ValidationError, match=name):
        make(value)


def test_feeling_lucky_rejects_a_non_callable_registry() -> None:
    with pytest.raises(ValidationError, match="retriever_for"):
        FeelingLuckyRetriever({SearchType.CHUNKS: CompletionRetriever})  # type: ignore[arg-type]


# --- LLM calls ----------------------------------------------------------------------------


async def test_refining_types_make_more_calls_than_the_base(stack, dataset_id) -> None:
    scope, _ = _scope(stack, dataset_id)
    base = await GraphCompletionRetriever().get_completion(QUESTION, scope)
    cot = await GraphCompletionCotRetriever().get_completion(QUESTION, scope)
    extension = await GraphCompletionContextExtensionRetriever().get_completion(QUESTION, scope)
    summary = await GraphSummaryCompletionRetriever().get_completion(QUESTION, scope)
    assert base.usage["llm_calls"] == 1
    assert summary.usage["llm_calls"] == 2
    # answer, follow-up, answer (new triplets), follow-up (nothing new): rounds end
    assert cot.usage["llm_calls"] == 4 and len(cot.context) > len(base.context)
    assert extension.usage["llm_calls"] >= 2 and len(extension.context) > len(base.context)
    assert cot.context[: len(base.context)] == base.context


async def test_cot_asks_about_what_the_draft_adds_and_extends_the_context(stack, dataset_id) -> None:
    scope, llm = _scope(stack, dataset_id, top_k=1)
    completion = await GraphCompletionCotRetriever(max_iter=1).get_completion(QUESTION, scope)
    assert [model for _, model in llm.calls] == [None, FollowUpQuestion, None]
    assert llm.results[1].structured.question == "What else is known about Marie Curie?"
    assert completion.context[0].text == "Marie Curie discovered Polonium" and len(completion.context) == 2
    assert "Marie Curie" in completion.context[1].text


async def test_researcher_follow_up_handler_is_kept(stack, dataset_id) -> None:
    stack.llm.handlers.register(FollowUpQuestion.__name__, lambda request: {"question": "Where did Alan Turing work?"})
    scope, _ = _scope(stack, dataset_id, top_k=1)
    completion = await GraphCompletionCotRetriever(max_iter=1).get_completion(QUESTION, scope)
    assert [item.text for item in completion.context] == ["Marie Curie discovered Polonium", "Alan Turing worked at Bletchley Park"]


async def test_zero_rounds_is_the_base_behaviour(stack, dataset_id) -> None:
    scope, _ = _scope(stack, dataset_id)
    base = await GraphCompletionRetriever().get_completion(QUESTION, scope)
    for retriever in (GraphCompletionCotRetriever(max_iter=0), GraphCompletionContextExtensionRetriever(context_extension_rounds=0)):
        completion = await retriever.get_completion(QUESTION, scope)
        assert (completion.text, completion.context, completion.usage["llm_calls"]) == (base.text, base.context, 1)


async def test_summary_answers_from_the_summary(stack, dataset_id) -> None:
    scope, llm = _scope(stack, dataset_id)
    completion = await GraphSummaryCompletionRetriever().get_completion(QUESTION, scope)
    summary = llm.results[0].text
    assert "Marie Curie" in summary
    assert summary in llm.prompt(1) and "Bletchley" not in llm.prompt(1).split("Context:")[1]
    assert completion.used_edge_ids == [item.id for item in completion.context]


# --- structured output and history ------------------------------------------------------


class Fact(BaseModel):
    answer: str


class BrokenFact(BaseModel):
    value: int


@pytest.mark.parametrize("cls", ALL)
async def test_structured_output_on_the_final_call_only(stack, dataset_id, cls) -> None:
    scope, llm = _scope(stack, dataset_id)
    completion = await cls().get_completion(QUESTION, scope, response_model=Fact)
    assert isinstance(completion.structured, Fact) and "Marie Curie" in completion.structured.answer
    models = [model for _, model in llm.calls]
    assert models[-1] is Fact and Fact not in models[:-1]
    assert completion.usage["llm_calls"] == len(llm.calls)


@pytest.mark.parametrize("cls", [GraphCompletionCotRetriever, GraphCompletionContextExtensionRetriever])
async def test_rounds_ending_early_add_one_structured_call(stack, dataset_id, cls) -> None:
    scope, llm = _scope(stack, dataset_id)
    plain = await cls().get_completion(QUESTION, scope)  # both end their rounds early on this memory
    llm.calls.clear()
    structured = await cls().get_completion(QUESTION, scope, response_model=Fact)
    assert structured.usage["llm_calls"] == plain.usage["llm_calls"] + 1
    assert [model for _, model in llm.calls][-2:] == [FollowUpQuestion if cls is GraphCompletionCotRetriever else None, Fact]
    assert structured.context == plain.context


async def test_last_round_answer_carries_the_response_model(stack, dataset_id) -> None:
    scope, llm = _scope(stack, dataset_id, top_k=1)
    completion = await GraphCompletionCotRetriever(max_iter=1).get_completion(QUESTION, scope, response_model=Fact)
    assert [model for _, model in llm.calls] == [None, FollowUpQuestion, Fact]
    assert isinstance(completion.structured, Fact) and len(completion.context) == 2


@pytest.mark.parametrize("cls", ALL)
async def test_structured_output_error_propagates(stack, dataset_id, cls) -> None:
    stack.llm.handlers.register(BrokenFact.__name__, lambda request: {"value": "not a number"})
    scope, _ = _scope(stack, dataset_id)
    with pytest.raises(StructuredOutputError, match="BrokenFact"):
        await cls().get_completion(QUESTION, scope, response_model=BrokenFact)


@pytest.mark.parametrize("cls", ALL)
async def test_history_reaches_the_answer_prompt(stack, dataset_id, cls) -> None:
    history = "Previous turn: the user asked about radium chemistry."
    scope, llm = _scope(stack, dataset_id, history=history)
    await cls().get_completion(QUESTION, scope)
    answer_call = [messages for messages, model in llm.calls if model is None][-1]  # the last plain call answers
    assert answer_call[0]["role"] == "system" and history in answer_call[0]["content"]


# --- graph completion context -------------------------------------------------------------


async def test_entity_neighbourhood_edges_score_entity_distance_plus_hop_cost(stack, dataset_id) -> None:
    scope, _ = _scope(stack, dataset_id, top_k=5)
    items = await relationship_triplets("Pierre Curie", scope)
    entities = {item.id: item.score for item in await vector_items("Pierre Curie", scope, "entities", limit=5)}
    via_entity = [item for item in items if item.raw["via"] == "entity"]
    assert via_entity
    for item in via_entity:
        assert item.score == pytest.approx(entities[item.raw["entity_id"]] + ENTITY_HOP_COST)
        assert item.raw["entity_id"] in item.node_ids
    assert len({item.id for item in items}) == len(items) <= 5
    graph = await stack.memory.graph(dataset_id)
    for item in items:
        edge = graph.edge(item.id)
        assert graph.node(edge["source"])["type"] == graph.node(edge["target"])["type"] == "entity"


async def test_graph_context_reads_each_graph_once_whatever_the_number_of_entities(stack, dataset_id, graph_reads) -> None:
    counts = []
    for top_k in (1, 5):
        graph_reads.clear()
        scope, _ = _scope(stack, dataset_id, top_k=top_k)
        assert await relationship_triplets("Pierre Curie", scope)
        counts.append(len(graph_reads))
    assert counts[0] == counts[1]


def test_a_registry_gives_one_retriever_per_search_type_and_two_registries_share_nothing() -> None:
    registry, other = Retrievers(), Retrievers()
    for search_type in SearchType:
        retriever = registry.get(search_type)
        assert retriever.search_type is search_type
        assert registry.get(search_type.value.lower()) is retriever
        assert other.get(search_type) is not retriever


def test_concurrent_eligibility_is_declared_by_the_exact_class() -> None:
    from memlab.retrievers import GraphCompletionCotRetriever, GraphCompletionRetriever, TemporalRetriever

    eligible = {search_type for search_type in SearchType if Retrievers().get(search_type).runs_concurrently()}
    assert eligible == {SearchType.RAG_COMPLETION, SearchType.GRAPH_COMPLETION, SearchType.HYBRID_COMPLETION, SearchType.TRIPLET_COMPLETION}
    assert GraphCompletionRetriever.runs_concurrently() and not GraphCompletionCotRetriever.runs_concurrently()
    assert not TemporalRetriever.runs_concurrently()  # a completion subclass of AnswerFromContext that did not declare it


# --- hybrid and agentic -------------------------------------------------------------------


async def test_hybrid_prompt_has_three_sections(stack, dataset_id) -> None:
    scope, llm = _scope(stack, dataset_id, top_k=2)
    completion = await HybridCompletionRetriever().get_completion(QUESTION, scope)
    assert len(completion.context) <= 6
    assert {item.kind for item in completion.context} == {"chunk", "entity", "triplet"}
    assert [item.score for item in completion.context] == sorted(item.score for item in completion.context)
    context = llm.prompt().split("Context:\n", 1)[1]
    assert context.count("\n---\n") == 2 and "\nEntities: " in context
    assert await HybridCompletionRetriever().get_context(QUESTION, scope) == completion.context[:2]


async def test_agentic_plans_sub_queries_and_merges_their_context(stack, dataset_id) -> None:
    scope, llm = _scope(stack, dataset_id, top_k=1)
    question = "Who discovered Polonium and where did Alan Turing work?"
    completion = await AgenticCompletionRetriever().get_completion(question, scope)
    assert llm.results[0].structured.sub_queries == ["Who discovered Polonium", "where did Alan Turing work?"]
    assert completion.usage["llm_calls"] == 2
    chunks = {item.text: item.raw["sub_query"] for item in completion.context if item.kind == "chunk"}
    assert chunks == {DOCS[0]: "Who discovered Polonium", DOCS[2]: "where did Alan Turing work?"}
    assert len({item.id for item in completion.context}) == len(completion.context)


class _SummariesOnly(Retriever):
    search_type = SearchType.SUMMARIES

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        return await vector_items(query, scope, "summaries")


async def test_feeling_lucky_records_the_choice_and_delegates(stack, dataset_id) -> None:
    mapping = {SearchType.SUMMARIES: _SummariesOnly(), SearchType.TRIPLET_COMPLETION: TripletCompletionRetriever()}
    lucky = FeelingLuckyRetriever(mapping.__getitem__)
    stack.llm.handlers.register(SearchTypeChoice.__name__, lambda request: {"search_type": "SUMMARIES"})
    scope, _ = _scope(stack, dataset_id)
    context = await lucky.get_context(QUESTION, scope)
    completion = await lucky.get_completion(QUESTION, scope)
    assert context and all(item.kind == "summary" and item.raw["chosen_type"] == "SUMMARIES" for item in context)
    # a retrieval-only choice is answered from its context: choice + answer
    assert completion.usage["llm_calls"] == 2 and "Marie Curie" in completion.text
    assert all(item.raw["chosen_type"] == "SUMMARIES" for item in completion.context)

    stack.llm.handlers.register(SearchTypeChoice.__name__, lambda request: {"search_type": "TRIPLET_COMPLETION"})
    completion = await lucky.get_completion(QUESTION, scope)
    assert {item.kind for item in completion.context} == {"triplet"}
    assert all(item.raw["chosen_type"] == "TRIPLET_COMPLETION" for item in completion.context)


async def test_feeling_lucky_offline_choice_is_the_rule_router(stack, dataset_id) -> None:
    scope, _ = _scope(stack, dataset_id)
    lucky = FeelingLuckyRetriever({SearchType.HYBRID_COMPLETION: HybridCompletionRetriever()}.__getitem__)
    assert await lucky.choose(QUESTION, scope) is SearchType.HYBRID_COMPLETION
    assert await lucky.choose("What changed in 2020-03-01?", scope) is SearchType.TEMPORAL
    schema = SearchTypeChoice.model_json_schema()["properties"]["search_type"]["enum"]
    assert "FEELING_LUCKY" not in schema and "AGENTIC_COMPLETION" not in schema and len(schema) == len(SearchType) - 2


async def test_offline_handlers_are_registered_on_the_scope_llm_only(stack, dataset_id, tmp_path) -> None:
    async with MemoryStack.from_config(fast_config(tmp_path / "other"), clock=FakeClock()) as other:
        other_scope, _ = _scope(other, (await other.remember(DOCS)).dataset_id)
        other.llm.handlers.register(SearchTypeChoice.__name__, lambda request: {"search_type": "SUMMARIES"})
        scope, _ = _scope(stack, dataset_id)
        assert await FeelingLuckyRetriever().choose(QUESTION, scope) is SearchType.HYBRID_COMPLETION
        await AgenticCompletionRetriever().get_completion(QUESTION, scope)
        await GraphCompletionCotRetriever(max_iter=1).get_completion(QUESTION, scope)
        defaults = {SearchTypeChoice: offline_search_type, RetrievalPlan: offline_plan, FollowUpQuestion: offline_follow_up}
        for model, handler in defaults.items():
            assert stack.llm.handlers.lookup(model.__name__) is handler
            assert other.llm.handlers.lookup(model.__name__) is not handler
        assert await FeelingLuckyRetriever().choose(QUESTION, other_scope) is SearchType.SUMMARIES


# --- empty memory -------------------------------------------------------------------------

EMPTY_CALLS = {
    CompletionRetriever: 1,
    GraphCompletionRetriever: 1,
    GraphCompletionCotRetriever: 2,  # answer + a follow-up that finds nothing
    GraphCompletionContextExtensionRetriever: 1,
    GraphSummaryCompletionRetriever: 1,  # nothing to summarise
    TripletCompletionRetriever: 1,
    HybridCompletionRetriever: 1,
    AgenticCompletionRetriever: 2,  # plan + answer
    FeelingLuckyRetriever: 2,  # choice + the hybrid answer
}


@pytest.mark.parametrize("cls", ALL)
async def test_empty_memory_answers_i_dont_know(stack, cls) -> None:
    scope, llm = _scope(stack, uuid.uuid4())
    assert await cls().get_context(QUESTION, scope) == []
    llm.calls.clear()
    completion = await cls().get_completion(QUESTION, scope)
    assert completion.text == I_DONT_KNOW and completion.context == []
    assert completion.used_node_ids == completion.used_edge_ids == []
    assert completion.usage["llm_calls"] == len(llm.calls) == EMPTY_CALLS[cls]


async def test_feeling_lucky_default_registry(stack, dataset_id) -> None:
    scope, _ = _scope(stack, dataset_id, retrievers=Retrievers().get)
    lucky = FeelingLuckyRetriever()
    hybrid = await lucky.get_completion(QUESTION, scope)
    assert "Marie Curie" in hybrid.text and {item.raw["chosen_type"] for item in hybrid.context} == {"HYBRID_COMPLETION"}
    lexical = await lucky.get_context('"Bletchley Park"', scope)
    assert lexical and {item.raw["chosen_type"] for item in lexical} == {"CHUNKS_LEXICAL"}
    assert "Bletchley Park" in lexical[0].text


def test_plan_is_capped_at_three_sub_queries() -> None:
    from memlab.retrievers._agentic import MAX_SUB_QUERIES, RetrievalPlan, _plan_queries

    plan = RetrievalPlan(sub_queries=["a", " b ", "a", "", "c", "d"])
    assert _plan_queries(plan, "q") == ["a", "b", "c and d"] and MAX_SUB_QUERIES == 3
    assert _plan_queries(RetrievalPlan(sub_queries=["  "]), "q") == ["q"]
