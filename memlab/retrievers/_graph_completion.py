"""Graph completion: answer from the relationship triplets relevant to the query.

Context (:func:`relationship_triplets`): the ``top_k`` relationship edges nearest
the query in the ``triplets`` collection (score: their distance) plus every
relationship edge (entity → entity) incident to the ``top_k`` entities nearest
the query in the ``entities`` collection (score: the entity's distance +
:data:`ENTITY_HOP_COST`); an edge found both ways keeps its best score. Ranked
by score (ties: vector hits first, then graph order), re-ranked by feedback weights when
``scope.feedback_influence`` is above 0 (:func:`~memlab.retrievers._base.feedback_ranked`), at most ``top_k``. Each
item is a ``triplet`` rendered ``"Source relation Target"``; ``raw["via"]`` is
``"triplet"`` or ``"entity"`` (then ``raw["entity_id"]`` names the entity).

The subclasses refine that answer (each makes more LLM calls than the base):

* :class:`GraphCompletionCotRetriever`: after the first answer, up to
  ``max_iter`` rounds of: a structured call asks a :class:`FollowUpQuestion`
  about what is missing, its triplets extend the context, the question is
  answered again.
* :class:`GraphCompletionContextExtensionRetriever`: the same rounds, with the
  last answer itself as the extension query (no extra call).
* :class:`GraphSummaryCompletionRetriever`: one call summarises the triplets,
  a second answers from the summary.

In the round-based types a round that finds no new triplet ends the rounds;
the last answer is the result. Only the final answer call gets
``response_model``; when the rounds end early, the plain answer they produced
is followed by one more call with ``response_model``. Their completion context
is every triplet in the final prompt, in order of arrival (the first retrieval,
then each round's new triplets), so it may hold more than ``top_k`` items.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from memlab.exceptions import ValidationError
from memlab.text import I_DONT_KNOW, content_words
from memlab.retrievers._base import (
    Completion,
    RetrievalScope,
    SearchResultItem,
    add_usage,
    answer,
    best_per_id,
    context_lines,
    dataset_graphs,
    element_item,
    feedback_ranked,
    has_element_item,
    vector_hits,
    no_usage,
    vector_items,
)
from memlab.retrievers._completion import AnswerFromContext, structured_call
from memlab.retrievers._types import SearchType

__all__ = [
    "ENTITY_HOP_COST",
    "FollowUpQuestion",
    "GraphCompletionContextExtensionRetriever",
    "GraphCompletionCotRetriever",
    "GraphCompletionRetriever",
    "GraphSummaryCompletionRetriever",
    "candidate_triplets",
    "offline_follow_up",
    "relationship_triplets",
]

#: added to an entity's distance to score the relationship edges reached through it
ENTITY_HOP_COST = 0.25

FOLLOW_UP_INSTRUCTIONS = (
    "The draft answer was written from the context below. Ask one follow-up question whose answer "
    "would add what the draft still lacks to answer the question fully. Reply with JSON."
)
SUMMARY_INSTRUCTIONS = (
    "Summarise the facts in the context that bear on the question, in a few sentences. "
    "Use only the context; if nothing bears on it, say that you don't know."
)
_DRAFT_LABEL = "Draft answer:"


async def relationship_triplets(query: str, scope: RetrievalScope) -> list[SearchResultItem]:
    """The graph-completion context of ``query`` (see the module docstring): at most ``scope.top_k`` triplets."""
    if scope.feedback_influence > 0 and scope.feedback_weights is not None:  # every candidate is re-scored: build them all
        return (await feedback_ranked(best_per_id(await candidate_triplets(query, scope)), scope))[: scope.top_k]
    # the same ranking as best_per_id over those candidates (the first with the lowest score per id, sorted by score,
    # ties in first-appearance order), building items only for the top_k that are kept
    best: dict[str, tuple[float, uuid.UUID, Any, str | None]] = {}  # id -> (score, dataset, graph, entity reached through or None)
    for score, dataset_id, element_id, graph in await vector_hits(query, scope, "triplets"):
        if element_id not in best or score < best[element_id][0]:
            best[element_id] = (score, dataset_id, graph, None)
    for entity_score, dataset_id, entity_id, graph in await vector_hits(query, scope, "entities"):
        score = max(0.0, float(entity_score + ENTITY_HOP_COST))  # as element_item scores it
        for edge_id in _relationship_edges(graph, entity_id):
            if (edge_id not in best or score < best[edge_id][0]) and has_element_item(graph, edge_id):
                best[edge_id] = (score, dataset_id, graph, entity_id)
    kept = []
    for edge_id, (score, dataset_id, graph, through) in sorted(best.items(), key=lambda pair: pair[1][0])[: scope.top_k]:
        extra = {"via": "triplet"} if through is None else {"via": "entity", "entity_id": through}
        built = element_item(graph, dataset_id, edge_id, score, **extra)
        assert built is not None  # has_element_item said so, and nothing ran in between
        kept.append(built)
    return kept


async def candidate_triplets(query: str, scope: RetrievalScope) -> list[SearchResultItem]:
    """Every candidate of :func:`relationship_triplets` as an item, in arrival order: the vector-hit triplets, then the
    relationship edges of each entity hit (an id may come more than once)."""
    found = [item.model_copy(update={"raw": {**item.raw, "via": "triplet"}}) for item in await vector_items(query, scope, "triplets")]
    entities = await vector_items(query, scope, "entities")
    graphs = await dataset_graphs(scope, entities)
    for entity in entities:
        graph = graphs[entity.dataset_id]
        for edge_id in _relationship_edges(graph, entity.id):
            item = element_item(graph, entity.dataset_id, edge_id, entity.score + ENTITY_HOP_COST, via="entity", entity_id=entity.id)
            if item is not None:
                found.append(item)
    return found


def _relationship_edges(graph: Any, entity_id: str) -> list[str]:
    """Ids of the entity → entity edges leaving or entering ``entity_id``, in graph order (kept per entity until the graph changes)."""
    memo: dict[str, list[str]] = graph.memo("graph_completion.relationship_edges", lambda _graph: {})
    found = memo.get(entity_id)
    if found is None:
        found = memo[entity_id] = _incident_relationship_edges(graph, entity_id)
    return found


def _incident_relationship_edges(graph: Any, entity_id: str) -> list[str]:
    view = graph.nx
    if entity_id not in view:
        return []
    incident = [*view.out_edges(entity_id, keys=True), *view.in_edges(entity_id, keys=True)]
    nodes = view.nodes
    return list(dict.fromkeys(key for source, target, key in incident if nodes[source]["type"] == nodes[target]["type"] == "entity"))


class GraphCompletionRetriever(AnswerFromContext):
    """``GRAPH_COMPLETION``: relationship triplets (vector + entity neighbourhood), then one answer call."""

    search_type = SearchType.GRAPH_COMPLETION
    concurrent_turns = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        return await relationship_triplets(query, scope)

    async def _answer_in_rounds(
        self,
        query: str,
        scope: RetrievalScope,
        rounds: int,
        next_query: Callable[[str, Completion, RetrievalScope, dict[str, int]], Awaitable[str]],
        response_model: type[BaseModel] | None,
    ) -> Completion:
        """Answer, then up to ``rounds`` times: ``next_query`` → new triplets → answer again (see the module docstring)."""
        context = await self.get_context(query, scope)
        seen = {item.id for item in context}
        draft = await answer(query, context, scope, response_model=response_model if rounds == 0 else None)
        usage = draft.usage
        for done in range(1, rounds + 1):
            follow_up = await next_query(query, draft, scope, usage)
            new = [item for item in await self.get_context(follow_up, scope) if item.id not in seen]
            if not new:
                break
            context += new
            seen.update(item.id for item in new)
            draft = await answer(query, context, scope, response_model=response_model if done == rounds else None, usage=usage)
            usage = draft.usage
        if response_model is not None and draft.structured is None:
            draft = await answer(query, context, scope, response_model=response_model, usage=usage)
        return draft


class FollowUpQuestion(BaseModel):
    """The question a chain-of-thought round retrieves more triplets for."""

    question: str = Field(description="one question about what the context still lacks to answer the original question")


_WORD = re.compile(r"[A-Za-z0-9]+")


def offline_follow_up(request: Any) -> dict[str, str]:
    """Offline :class:`FollowUpQuestion` filler: ask about the draft answer's words the question does not contain.

    "What else is known about Marie Curie?" for the draft "Marie Curie discovered
    Polonium" to "Who discovered Polonium?"; the question itself when the draft
    adds no word (or is "I don't know."), which then finds nothing new.
    """
    user: Mapping[str, Any] = next((message for message in reversed(request.messages) if message.get("role") == "user"), {})
    content = user.get("content")
    draft = ""
    for line in (content if isinstance(content, str) else "").splitlines():
        if line.startswith(_DRAFT_LABEL):
            draft = line[len(_DRAFT_LABEL) :].strip()
    asked = content_words(request.question)
    terms = [word for word in dict.fromkeys(_WORD.findall(draft)) if content_words(word) - asked]
    if draft == I_DONT_KNOW or not terms:
        return {"question": request.question}
    return {"question": f"What else is known about {' '.join(terms)}?"}


def _check_rounds(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"{name} must be an int >= 0, got {value!r}")
    return value


class GraphCompletionCotRetriever(GraphCompletionRetriever):
    """``GRAPH_COMPLETION_COT``: graph completion refined by up to ``max_iter`` follow-up-question rounds.

    LLM calls: 1 + 2 per round that found new triplets (+1 follow-up call for
    the round that found none, +1 structured answer call when that ended the
    rounds and ``response_model`` is given). ``max_iter=0`` is the base behaviour.
    """

    search_type = SearchType.GRAPH_COMPLETION_COT

    def __init__(self, max_iter: int = 2) -> None:
        self.max_iter = _check_rounds("max_iter", max_iter)

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        return await self._answer_in_rounds(query, scope, self.max_iter, self._follow_up, response_model)

    async def _follow_up(self, query: str, draft: Completion, scope: RetrievalScope, usage: dict[str, int]) -> str:
        from memlab.llm import context_prompt

        messages = context_prompt(query, context_lines(draft.context), instructions=FOLLOW_UP_INSTRUCTIONS)
        messages[-1]["content"] = f"{_DRAFT_LABEL} {' '.join(draft.text.split())}\n{messages[-1]['content']}"
        chosen = await structured_call(scope, messages, FollowUpQuestion, usage, offline=offline_follow_up)
        return chosen.question


class GraphCompletionContextExtensionRetriever(GraphCompletionRetriever):
    """``GRAPH_COMPLETION_CONTEXT_EXTENSION``: each answer becomes the query that extends the context.

    Up to ``context_extension_rounds`` rounds; a round adds the triplets the last
    answer retrieves that are not in the context yet, and stops the rounds when
    there are none. LLM calls: 1 + 1 per round that found new triplets (+1
    structured answer call when a round ended early and ``response_model`` is given).
    """

    search_type = SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION

    def __init__(self, context_extension_rounds: int = 2) -> None:
        self.context_extension_rounds = _check_rounds("context_extension_rounds", context_extension_rounds)

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        return await self._answer_in_rounds(query, scope, self.context_extension_rounds, self._answer_as_query, response_model)

    @staticmethod
    async def _answer_as_query(query: str, draft: Completion, scope: RetrievalScope, usage: dict[str, int]) -> str:
        return draft.text


class GraphSummaryCompletionRetriever(GraphCompletionRetriever):
    """``GRAPH_SUMMARY_COMPLETION``: one call summarises the triplets, a second answers from the summary alone.

    The completion's context and used ids are the summarised triplets. With no
    triplet the summary call is skipped (one call: "I don't know").
    """

    search_type = SearchType.GRAPH_SUMMARY_COMPLETION

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        from memlab.llm import context_prompt

        items = await self.get_context(query, scope)
        if not items:
            return await answer(query, items, scope, response_model=response_model)
        usage = no_usage()
        messages = context_prompt(query, context_lines(items), instructions=SUMMARY_INSTRUCTIONS)
        summary = await scope.llm.complete(messages)
        add_usage(usage, summary)
        return await answer(query, items, scope, lines=[" ".join(summary.text.split())], response_model=response_model, usage=usage)
