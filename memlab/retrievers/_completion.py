"""RAG completion (answer from the nearest chunks) and what every completion retriever shares.

Every completion retriever here makes its final answer call even when the
context is empty: the LLM then says it does not know (the offline provider
answers ``"I don't know."``), and a ``response_model`` is still filled, so a
caller always gets a :class:`~memlab.retrievers._base.Completion` of the same
shape and ``usage`` always counts the answer call.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from memlab.llm import StructuredHandler
from memlab.retrievers._base import (
    Completion,
    RetrievalScope,
    Retriever,
    SearchResultItem,
    add_usage,
    vector_items,
)
from memlab.retrievers._types import SearchType

__all__ = ["AnswerFromContext", "CompletionRetriever", "structured_call"]


class AnswerFromContext(Retriever):
    """A completion retriever whose answer is one :func:`answer` call over :meth:`get_context`
    (the base class's lane protocol, unchanged)."""

    completes = True

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        return await self.answer_from(query, await self.get_context(query, scope), scope, response_model=response_model)


class CompletionRetriever(AnswerFromContext):
    """``RAG_COMPLETION``: the ``top_k`` chunks nearest the query, then one answer call."""

    search_type = SearchType.RAG_COMPLETION
    concurrent_turns = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        return await vector_items(query, scope, "chunks")


async def structured_call(
    scope: RetrievalScope,
    messages: list[dict[str, str]],
    response_model: type[BaseModel],
    usage: dict[str, int],
    *,
    offline: StructuredHandler | None = None,
) -> Any:
    """One structured LLM call counted into ``usage``; returns the validated instance.

    ``offline`` is the ``memlab/offline`` filler of ``response_model``: it is
    registered on ``scope.llm.handlers`` first, unless a handler (a researcher's
    own) is registered there already.
    """
    if offline is not None:
        scope.llm.handlers.register(response_model.__name__, offline, replace=False)
    result = await scope.llm.complete(messages, response_model=response_model)
    add_usage(usage, result)
    return result.structured
