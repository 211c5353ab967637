"""The search types a recall can run, and parsing them from user input."""

from __future__ import annotations

import enum

from memlab.exceptions import ValidationError

__all__ = ["SearchType", "parse_search_type"]


class SearchType(str, enum.Enum):
    """A retrieval strategy for the graph lane. Each value equals its name."""

    CHUNKS = "CHUNKS"
    CHUNKS_LEXICAL = "CHUNKS_LEXICAL"
    SUMMARIES = "SUMMARIES"
    RAG_COMPLETION = "RAG_COMPLETION"
    GRAPH_COMPLETION = "GRAPH_COMPLETION"
    GRAPH_COMPLETION_COT = "GRAPH_COMPLETION_COT"
    GRAPH_COMPLETION_CONTEXT_EXTENSION = "GRAPH_COMPLETION_CONTEXT_EXTENSION"
    GRAPH_SUMMARY_COMPLETION = "GRAPH_SUMMARY_COMPLETION"
    TRIPLET_COMPLETION = "TRIPLET_COMPLETION"
    HYBRID_COMPLETION = "HYBRID_COMPLETION"
    TEMPORAL = "TEMPORAL"
    AGENTIC_COMPLETION = "AGENTIC_COMPLETION"
    FEELING_LUCKY = "FEELING_LUCKY"
    CODING_RULES = "CODING_RULES"
    SKILLS = "SKILLS"


def parse_search_type(value: SearchType | str) -> SearchType:
    """``value`` as a :class:`SearchType`: a member as is, or a member name in any case.

    Raises :class:`~memlab.exceptions.ValidationError` naming ``value`` and listing the
    valid names for anything else.
    """
    if isinstance(value, SearchType):
        return value
    if isinstance(value, str):
        member = SearchType.__members__.get(value.upper())
        if member is not None:
            return member
    valid = ", ".join(SearchType.__members__)
    raise ValidationError(f"unknown search type {value!r}; valid names: {valid}")
