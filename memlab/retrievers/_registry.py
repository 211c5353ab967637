"""``SearchType`` → retriever class: the only place a search type becomes a class."""

from __future__ import annotations

import importlib
from typing import Any

from memlab.retrievers._types import SearchType, parse_search_type

__all__ = ["RETRIEVERS", "get_retriever", "retriever_class"]

#: search type -> "module:Class" of its retriever
RETRIEVERS: dict[SearchType, str] = {
    SearchType.CHUNKS: "memlab.retrievers._chunks:ChunksRetriever",
    SearchType.CHUNKS_LEXICAL: "memlab.retrievers._lexical:LexicalChunksRetriever",
    SearchType.SUMMARIES: "memlab.retrievers._chunks:SummariesRetriever",
    SearchType.RAG_COMPLETION: "memlab.retrievers._completion:CompletionRetriever",
    SearchType.GRAPH_COMPLETION: "memlab.retrievers._graph_completion:GraphCompletionRetriever",
    SearchType.GRAPH_COMPLETION_COT: "memlab.retrievers._graph_completion:GraphCompletionCotRetriever",
    SearchType.GRAPH_COMPLETION_CONTEXT_EXTENSION: "memlab.retrievers._graph_completion:GraphCompletionContextExtensionRetriever",
    SearchType.GRAPH_SUMMARY_COMPLETION: "memlab.retrievers._graph_completion:GraphSummaryCompletionRetriever",
    SearchType.TRIPLET_COMPLETION: "memlab.retrievers._triplet:TripletCompletionRetriever",
    SearchType.HYBRID_COMPLETION: "memlab.retrievers._hybrid:HybridCompletionRetriever",
    SearchType.TEMPORAL: "memlab.retrievers._temporal:TemporalRetriever",
    SearchType.AGENTIC_COMPLETION: "memlab.retrievers._agentic:AgenticCompletionRetriever",
    SearchType.FEELING_LUCKY: "memlab.retrievers._agentic:FeelingLuckyRetriever",
    SearchType.CODING_RULES: "memlab.retrievers._tagged:CodingRulesRetriever",
    SearchType.SKILLS: "memlab.retrievers._tagged:SkillsRetriever",
}

_INSTANCES: dict[SearchType, Any] = {}


def retriever_class(search_type: SearchType | str) -> type:
    """The retriever class of ``search_type`` (a SearchType or its name)."""
    module, _, name = RETRIEVERS[parse_search_type(search_type)].partition(":")
    return getattr(importlib.import_module(module), name)


def get_retriever(search_type: SearchType | str) -> Any:
    """A shared instance of the retriever of ``search_type`` (retrievers hold no state between calls)."""
    key = parse_search_type(search_type)
    if key not in _INSTANCES:
        _INSTANCES[key] = retriever_class(key)()
    return _INSTANCES[key]
