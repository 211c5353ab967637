"""Retrieval layer: search types, query routing, the skill gate, recall scope, and one retriever per search type.

Importing this package loads the standard library and pydantic only; numpy,
faiss, networkx and litellm load when a retriever first runs.
"""

from __future__ import annotations

# --- Research primitives: pure functions, no I/O (DESIGN.md "Research primitives") ---
from memlab.retrievers._routing import RouteDecision, route_query
from memlab.retrievers._scope import normalize_scope, resolve_sources
from memlab.retrievers._skill_gate import SkillGateDecision, should_search_skills, skill_gate_enabled
from memlab.retrievers._types import SearchType, parse_search_type

_PRIMITIVES = [
    "RouteDecision",
    "SearchType",
    "SkillGateDecision",
    "normalize_scope",
    "parse_search_type",
    "resolve_sources",
    "route_query",
    "should_search_skills",
    "skill_gate_enabled",
]
# --- end research primitives ---

# --- retrieval-only retrievers ---
from memlab.retrievers._chunks import ChunksRetriever, SummariesRetriever
from memlab.retrievers._lexical import LexicalChunksRetriever
from memlab.retrievers._tagged import CodingRulesRetriever, SkillsRetriever
from memlab.retrievers._temporal import TemporalRetriever

_RETRIEVAL_ONLY = [
    "ChunksRetriever",
    "CodingRulesRetriever",
    "LexicalChunksRetriever",
    "SkillsRetriever",
    "SummariesRetriever",
    "TemporalRetriever",
]
# --- end retrieval-only retrievers ---

# --- completion retrievers ---
from memlab.retrievers._agentic import AgenticCompletionRetriever, FeelingLuckyRetriever, RetrievalPlan, SearchTypeChoice
from memlab.retrievers._completion import CompletionRetriever
from memlab.retrievers._graph_completion import (
    FollowUpQuestion,
    GraphCompletionContextExtensionRetriever,
    GraphCompletionCotRetriever,
    GraphCompletionRetriever,
    GraphSummaryCompletionRetriever,
)
from memlab.retrievers._hybrid import HybridCompletionRetriever
from memlab.retrievers._triplet import TripletCompletionRetriever

_COMPLETION = [
    "AgenticCompletionRetriever",
    "CompletionRetriever",
    "FeelingLuckyRetriever",
    "FollowUpQuestion",
    "GraphCompletionContextExtensionRetriever",
    "GraphCompletionCotRetriever",
    "GraphCompletionRetriever",
    "GraphSummaryCompletionRetriever",
    "HybridCompletionRetriever",
    "RetrievalPlan",
    "SearchTypeChoice",
    "TripletCompletionRetriever",
]
# --- end completion retrievers ---

# --- the contract and the registry ---
from memlab.retrievers._base import (
    DISTINCT_KEYS,
    NEUTRAL_WEIGHT,
    Completion,
    RetrievalScope,
    Retriever,
    SearchResultItem,
    check_distinct,
    feedback_blend,
    no_usage,
    one_per_source,
)
from memlab.retrievers._registry import RETRIEVERS, Retrievers, get_retriever

_CONTRACT = [
    "Completion",
    "DISTINCT_KEYS",
    "NEUTRAL_WEIGHT",
    "RETRIEVERS",
    "RetrievalScope",
    "Retriever",
    "Retrievers",
    "SearchResultItem",
    "check_distinct",
    "feedback_blend",
    "get_retriever",
    "no_usage",
    "one_per_source",
]
# --- end contract ---

__all__ = [*_PRIMITIVES, *_RETRIEVAL_ONLY, *_COMPLETION, *_CONTRACT]
