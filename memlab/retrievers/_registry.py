"""``SearchType`` → retriever class: the only place a search type becomes a class."""

from __future__ import annotations

from collections.abc import Mapping

from memlab.retrievers._agentic import AgenticCompletionRetriever, FeelingLuckyRetriever
from memlab.retrievers._base import Retriever
from memlab.retrievers._chunks import ChunksRetriever, SummariesRetriever
from memlab.retrievers._completion import CompletionRetriever
from memlab.retrievers._graph_completion import (
    GraphCompletionContextExtensionRetriever,
    GraphCompletionCotRetriever,
    GraphCompletionRetriever,
    GraphSummaryCompletionRetriever,
)
from memlab.retrievers._hybrid import HybridCompletionRetriever
from memlab.retrievers._lexical import LexicalChunksRetriever
from memlab.retrievers._tagged import CodingRulesRetriever, SkillsRetriever
from memlab.retrievers._temporal import TemporalRetriever
from memlab.retrievers._triplet import TripletCompletionRetriever
from memlab.retrievers._types import SearchType, parse_search_type

__all__ = ["RETRIEVERS", "Retrievers", "get_retriever"]

#: search type -> its retriever class
RETRIEVERS: dict[SearchType, type[Retriever]] = {
    SearchType.CHUNKS: ChunksRetriever,
    SearchType.CHUNKS_LEXICAL: LexicalChunksRetriever,
    SearchType.SUMMARIES: SummariesRetriever,
    SearchType.RAG_COMPLETION: CompletionRetriever,
    SearchType.GRAPH_COMPLETION: GraphCompletionRetriever,
    SearchType.GRAPH_COMPLETION_COT: GraphCompletionCotRetriever,
    SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION: GraphCompletionContextExtensionRetriever,
    SearchType.GRAPH_SUMMARY_COMPLETION: GraphSummaryCompletionRetriever,
    SearchType.TRIPLET_COMPLETION: TripletCompletionRetriever,
    SearchType.HYBRID_COMPLETION: HybridCompletionRetriever,
    SearchType.TEMPORAL: TemporalRetriever,
    SearchType.AGENTIC_COMPLETION: AgenticCompletionRetriever,
    SearchType.FEELING_LUCKY: FeelingLuckyRetriever,
    SearchType.CODING_RULES: CodingRulesRetriever,
    SearchType.SKILLS: SkillsRetriever,
}



class Retrievers:
    """One retriever instance per search type, owned by whoever builds it (a stack holds one; nothing is shared)."""

    def __init__(
        self, classes: dict[SearchType, type[Retriever]] | None = None, *, instances: Mapping[SearchType, Retriever] | None = None
    ) -> None:
        """``classes``: the class built (on first use) per search type; ``instances``: retrievers given ready-made, which win."""
        self._classes = dict(RETRIEVERS if classes is None else classes)
        self._instances: dict[SearchType, Retriever] = dict(instances or {})

    def get(self, search_type: SearchType | str) -> Retriever:
        """The retriever of ``search_type`` (``ValidationError`` for an unknown type)."""
        key = parse_search_type(search_type)
        found = self._instances.get(key)
        if found is None:
            found = self._instances[key] = self._classes[key]()
        return found


def get_retriever(search_type: SearchType | str) -> Retriever:
    """A new instance of the retriever of ``search_type``, for use outside a stack."""
    return Retrievers().get(search_type)
