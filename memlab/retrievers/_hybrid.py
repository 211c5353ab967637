"""Hybrid completion: chunks, entities and triplets, each retrieved under its own limit, in one sectioned prompt.

Each section holds the ``top_k`` nearest elements of its collection, so the
prompt holds at most ``3 * top_k`` items. The prompt lists the chunk texts, then
one line ``Entities: A; B; ...``, then the triplet lines, the three parts
separated by ``---`` lines (the entity names share one line so that a bare name
never outweighs a sentence for an extractive reader). The ranked context is the
three sections merged by score (a stable sort of chunks + triplets + entities, so
ties keep that order): :meth:`HybridCompletionRetriever.get_context` returns its
``top_k`` best, the completion's context all of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from pydantic import BaseModel

from memlab.retrievers._base import ANSWER_INSTRUCTIONS, Completion, RetrievalScope, Retriever, SearchResultItem, answer, vector_items
from memlab.retrievers._types import SearchType

__all__ = ["HYBRID_INSTRUCTIONS", "HybridCompletionRetriever", "HybridSections", "answer_sections", "hybrid_sections"]

HYBRID_INSTRUCTIONS = (
    ANSWER_INSTRUCTIONS + " The context has up to three parts separated by '---': text passages, "
    "the entities they mention, and relationships written as 'subject relation object'."
)


@dataclass
class HybridSections:
    """The three retrieved sections of a hybrid prompt, each ranked best first."""

    chunks: list[SearchResultItem] = field(default_factory=list)
    entities: list[SearchResultItem] = field(default_factory=list)
    triplets: list[SearchResultItem] = field(default_factory=list)

    @classmethod
    def of(cls, section: Callable[[str], list[SearchResultItem]]) -> HybridSections:
        """The sections ``section("chunks")``, ``section("entities")``, ``section("triplets")``."""
        return cls(*(section(each.name) for each in fields(cls)))

    def ranked(self) -> list[SearchResultItem]:
        """Every item, by score (ties: chunks, then triplets, then entities)."""
        return sorted([*self.chunks, *self.triplets, *self.entities], key=lambda item: item.score)

    def lines(self) -> list[str]:
        """The prompt's context lines (see the module docstring)."""
        parts: list[list[str]] = []
        if self.chunks:
            parts.append([_line(item.text) for item in self.chunks])
        if self.entities:
            parts.append(["Entities: " + "; ".join(_line(item.text) for item in self.entities)])
        if self.triplets:
            parts.append([_line(item.text) for item in self.triplets])
        return [line for index, part in enumerate(parts) for line in (["---"] if index else []) + part]


def _line(text: str) -> str:
    return " ".join(text.split())


async def hybrid_sections(query: str, scope: RetrievalScope) -> HybridSections:
    """The ``scope.top_k`` nearest chunks, entities and triplets of ``query``."""
    return HybridSections(
        await vector_items(query, scope, "chunks"),
        await vector_items(query, scope, "entities"),
        await vector_items(query, scope, "triplets"),
    )


async def answer_sections(
    query: str,
    sections: HybridSections,
    scope: RetrievalScope,
    *,
    response_model: type[BaseModel] | None = None,
    usage: dict[str, int] | None = None,
) -> Completion:
    """One answer call over the sectioned prompt; the completion's context is ``sections.ranked()``."""
    return await answer(
        query, sections.ranked(), scope, lines=sections.lines(), response_model=response_model, instructions=HYBRID_INSTRUCTIONS, usage=usage
    )


class HybridCompletionRetriever(Retriever):
    """``HYBRID_COMPLETION``: chunks + entities + triplets (``top_k`` each) in one sectioned prompt, one answer call."""

    search_type = SearchType.HYBRID_COMPLETION
    concurrent_turns = True
    completes = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        return (await hybrid_sections(query, scope)).ranked()[: scope.top_k]

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        return await self.answer_from(query, await hybrid_sections(query, scope), scope, response_model=response_model)

    async def retrieve_lane(self, query: str, scope: RetrievalScope) -> HybridSections:
        """The retrieved sections of one query lane of a dual-query turn."""
        return await hybrid_sections(query, scope)

    def merge_lanes(self, raw: HybridSections | None, rewrite: HybridSections | None, policy: Any, limit: int) -> HybridSections:
        """Chunks, entities and triplets of the two lanes (None: failed or absent), each merged by ``policy`` under ``limit``."""
        return HybridSections.of(
            lambda name: policy.merge(getattr(raw, name) if raw is not None else None, getattr(rewrite, name) if rewrite is not None else None, limit)
        )

    def lane_ids(self, lane: HybridSections) -> list[str]:
        """Every item id of the sections, by score (:meth:`HybridSections.ranked`)."""
        return [item.id for item in lane.ranked()]

    async def answer_from(
        self, query: str, sections: HybridSections, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None
    ) -> Completion:
        """One answer call for ``query`` over the given sections."""
        return await answer_sections(query, sections, scope, response_model=response_model)
