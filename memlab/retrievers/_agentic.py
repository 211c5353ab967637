"""LLM-steered retrieval: a planned set of sub-queries (agentic), or an LLM-chosen search type (feeling lucky)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from memlab.exceptions import ValidationError
from memlab.retrievers._base import Completion, RetrievalScope, Retriever, SearchResultItem, answer, best_per_id, no_usage
from memlab.retrievers._completion import structured_call
from memlab.retrievers._hybrid import HybridSections, answer_sections, hybrid_sections
from memlab.retrievers._types import SearchType

__all__ = [
    "LUCKY_SEARCH_TYPES",
    "MAX_SUB_QUERIES",
    "AgenticCompletionRetriever",
    "FeelingLuckyRetriever",
    "RetrievalPlan",
    "SearchTypeChoice",
    "offline_plan",
    "offline_search_type",
]

#: sub-queries an agentic plan may use (more are merged into the last one)
MAX_SUB_QUERIES = 3
#: the search types FEELING_LUCKY may pick
LUCKY_SEARCH_TYPES = tuple(t for t in SearchType if t not in (SearchType.FEELING_LUCKY, SearchType.AGENTIC_COMPLETION))

PLAN_INSTRUCTIONS = (
    f"Plan the searches that answer the question: at most {MAX_SUB_QUERIES} short, self-contained search "
    "queries that together cover every part of it (the question itself when it has one part). Reply with JSON."
)
CHOICE_INSTRUCTIONS = (
    "Pick the search type that best answers the question. CHUNKS, SUMMARIES: nearest text passages or their "
    "summaries; CHUNKS_LEXICAL: exact words or a quoted phrase; RAG_COMPLETION: an answer from passages; "
    "GRAPH_COMPLETION (+ _COT, _CONTEXT_EXTENSION, GRAPH_SUMMARY_COMPLETION): an answer from knowledge-graph "
    "relationships, refined by follow-up questions, by extending the context, or from a summary; "
    "TRIPLET_COMPLETION: an answer from the nearest relationships; HYBRID_COMPLETION: passages, entities and "
    "relationships together; TEMPORAL: a question about a date or period; CODING_RULES: coding rules and "
    "conventions; SKILLS: how-to procedures. Reply with JSON."
)


def _question_prompt(instructions: str, query: str) -> list[dict[str, str]]:
    """A system message and a ``Question:`` user message (the offline provider's convention)."""
    return [{"role": "system", "content": instructions}, {"role": "user", "content": f"Question: {query}"}]


class RetrievalPlan(BaseModel):
    """The sub-queries an agentic completion retrieves for."""

    sub_queries: list[str] = Field(description=f"at most {MAX_SUB_QUERIES} self-contained search queries covering the question")


_PARTS = re.compile(r"\s+and\s+|,", re.IGNORECASE)


def offline_plan(request: Any) -> dict[str, list[str]]:
    """Offline :class:`RetrievalPlan` filler: the question split on " and " and ",", else the question itself."""
    parts = [part.strip() for part in _PARTS.split(request.question) if part.strip()]
    if len(parts) < 2:
        return {"sub_queries": [request.question.strip()]}
    return {"sub_queries": parts}


def _plan_queries(plan: RetrievalPlan, query: str) -> list[str]:
    """The plan's distinct non-blank sub-queries, at most :data:`MAX_SUB_QUERIES` (the rest joined into the last); else ``[query]``."""
    queries = list(dict.fromkeys(" ".join(sub.split()) for sub in plan.sub_queries if sub.strip()))
    if len(queries) > MAX_SUB_QUERIES:
        queries[MAX_SUB_QUERIES - 1 :] = [" and ".join(queries[MAX_SUB_QUERIES - 1 :])]
    return queries or [query]


def _merge(found: list[tuple[str, list[SearchResultItem]]]) -> list[SearchResultItem]:
    """``(sub_query, items)`` lists merged: one item per id with its best score, ``raw["sub_query"]`` the sub-query that scored it."""
    return best_per_id(item.model_copy(update={"raw": {**item.raw, "sub_query": sub_query}}) for sub_query, items in found for item in items)


class AgenticCompletionRetriever(Retriever):
    """``AGENTIC_COMPLETION``: one structured call plans sub-queries, hybrid retrieval per sub-query, one answer.

    Every sub-query retrieves a hybrid section set (``top_k`` chunks, entities and
    triplets, as ``HYBRID_COMPLETION``); the sections are merged by id (best score
    kept, ``raw["sub_query"]`` records which sub-query found it) and answered as
    one sectioned prompt for the original question. LLM calls: 2 (plan, answer);
    :meth:`get_context` makes the plan call too, and returns the ``top_k`` best of
    the merged items. A blank query plans nothing (no call).
    """

    search_type = SearchType.AGENTIC_COMPLETION
    skill_gate = False
    completes = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        return (await self._retrieve(query, scope, no_usage())).ranked()[: scope.top_k]

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        usage = no_usage()
        sections = await self._retrieve(query, scope, usage)
        return await answer_sections(query, sections, scope, response_model=response_model, usage=usage)

    async def _retrieve(self, query: str, scope: RetrievalScope, usage: dict[str, int]) -> HybridSections:
        if not query.strip():
            return HybridSections()
        plan = await structured_call(scope, _question_prompt(PLAN_INSTRUCTIONS, query), RetrievalPlan, usage, offline=offline_plan)
        found = [(sub_query, await hybrid_sections(sub_query, scope)) for sub_query in _plan_queries(plan, query)]
        return HybridSections.of(lambda name: _merge([(sub, getattr(sections, name)) for sub, sections in found]))


class SearchTypeChoice(BaseModel):
    """The search type FEELING_LUCKY delegates to."""

    search_type: Literal[tuple(t.value for t in LUCKY_SEARCH_TYPES)]  # type: ignore[valid-type]


def offline_search_type(request: Any) -> dict[str, str]:
    """Offline :class:`SearchTypeChoice` filler: the rule router's type (:func:`~memlab.retrievers.route_query`)."""
    from memlab.retrievers._routing import route_query

    return {"search_type": route_query(request.question).search_type.value}


class FeelingLuckyRetriever(Retriever):
    """``FEELING_LUCKY``: one structured call picks a :class:`SearchTypeChoice`, then that type's retriever runs.

    ``retriever_for(search_type)`` gives the retriever of a type (default: the
    scope's ``retrievers``, which the stack fills from its own registry). Every
    returned item records the choice in ``raw["chosen_type"]``. A completion
    runs the chosen retriever's completion, or, for a retrieval-only type, one
    answer call over its context; ``usage`` counts the choice call too. A blank
    query chooses nothing (no call): no context, and the answer call says it
    does not know.
    """

    search_type = SearchType.FEELING_LUCKY
    completes = True

    def __init__(self, retriever_for: Callable[[SearchType], Retriever] | None = None) -> None:
        if retriever_for is not None and not callable(retriever_for):
            raise ValidationError(f"retriever_for must be a callable SearchType -> Retriever, got {retriever_for!r}")
        self._retriever_for = retriever_for

    async def choose(self, query: str, scope: RetrievalScope, usage: dict[str, int] | None = None) -> SearchType:
        """The search type the LLM picks for ``query`` (one structured call, counted into ``usage``)."""
        messages = _question_prompt(CHOICE_INSTRUCTIONS, query)
        choice = await structured_call(scope, messages, SearchTypeChoice, no_usage() if usage is None else usage, offline=offline_search_type)
        return SearchType(choice.search_type)

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        if not query.strip():
            return []
        chosen = await self.choose(query, scope)
        return _tagged(await self._delegate(chosen, scope).get_context(query, scope), chosen)

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        if not query.strip():
            return await answer(query, [], scope, response_model=response_model)
        usage = no_usage()
        chosen = await self.choose(query, scope, usage)
        delegate = self._delegate(chosen, scope)
        if delegate.completes:
            completion = await delegate.get_completion(query, scope, response_model=response_model)
        else:
            completion = await answer(query, await delegate.get_context(query, scope), scope, response_model=response_model)
        completion.context = _tagged(completion.context, chosen)
        completion.usage = {key: usage[key] + completion.usage[key] for key in usage}
        return completion

    def _delegate(self, search_type: SearchType, scope: RetrievalScope) -> Retriever:
        lookup = self._retriever_for or scope.retrievers
        if lookup is None:
            raise ValidationError("FeelingLuckyRetriever needs retriever_for=... or a RetrievalScope with retrievers")
        return lookup(search_type)


def _tagged(items: list[SearchResultItem], chosen: SearchType) -> list[SearchResultItem]:
    return [item.model_copy(update={"raw": {**item.raw, "chosen_type": chosen.value}}) for item in items]
