"""Rule-based query routing for the graph lane (SPEC §9.3). No LLM, no I/O.

Rules are tried in order on ``text.strip()``; the first match wins:

1. ``quoted_phrase``: the whole query is one double-quoted phrase -> ``CHUNKS_LEXICAL``.
2. ``coding_rules_intent``: "coding rules/standards/conventions/guidelines" or
   "code review guidelines/rules/standards/checklist/conventions" -> ``CODING_RULES``.
3. ``time_scoped_question``: a time preposition directly followed by an absolute date,
   or ``for`` + a date -> ``TEMPORAL``.
4. ``default`` -> ``HYBRID_COMPLETION``.

Absolute dates (years are 1000-1999 or 2000-2099):

* ISO ``YYYY-MM-DD`` (month 01-12, day 01-31);
* ``Day Month YYYY`` / ``Month [Day][,] YYYY``: full or abbreviated English month names
  (``Sep``/``Sept``, optional trailing dot), days 1-31 with an optional ordinal suffix;
* ``[early|late|mid] YYYY[s]`` and ``mid-YYYY[s]``;
* ``the YYYYs``.

Time prepositions: in, during, before, after, since, until, till, between, from, by, on,
around, circa, as of, prior to, through, throughout. After ``for`` a *bare year* (the
``[early|late|mid] YYYY[s]`` forms) must end the phrase: it is followed by the end of the
text, punctuation other than an apostrophe, or one of and/or/to/through/until/till
("for 2020" and "for 2019 and 2020" route to ``TEMPORAL``, "for 2020 revenue" does not).
The other date forms are dates wherever they stand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlab.exceptions import ValidationError
from memlab.retrievers._types import SearchType

__all__ = ["RouteDecision", "route_query"]


@dataclass(frozen=True)
class RouteDecision:
    """Which search type a query routes to, and the name of the rule that decided it."""

    search_type: SearchType
    rule: str  # "quoted_phrase" | "coding_rules_intent" | "time_scoped_question" | "default"


_QUOTED = re.compile(r'"[^"]+"')

_CODING_RULES = re.compile(
    r"\bcoding\s+(?:rules?|standards?|conventions?|guidelines?)\b"
    r"|\bcode\s+review\s+(?:guidelines?|rules?|standards?|checklist|conventions?)\b",
    re.IGNORECASE,
)

_YEAR = r"(?:1\d{3}|20\d{2})(?!\d)"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?)"
)
_DAY = r"(?:3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?"
_ISO_DATE = rf"{_YEAR}-(?:0[1-9]|1[0-2])-(?:3[01]|[12]\d|0[1-9])(?!\d)"
_MONTH_DATE = rf"(?:{_DAY}\s+{_MONTH},?\s+{_YEAR}|{_MONTH}(?:\s+{_DAY})?,?\s+{_YEAR})"
_DECADE = rf"the\s+{_YEAR}s\b"
_BARE_YEAR = rf"(?:(?:early|late|mid)\s+|mid-)?{_YEAR}s?\b"
_FULL_DATE = rf"(?:{_ISO_DATE}|{_MONTH_DATE}|{_DECADE})"
_PHRASE_END = r"(?=\s*(?:$|[^\w\s'’]|(?:and|or|to|through|until|till)\b))"
_PREPOSITION = (
    r"(?:in|during|before|after|since|until|till|between|from|by|on|around|circa"
    r"|as\s+of|prior\s+to|throughout|through)"
)

_TIME_SCOPED = re.compile(
    rf"\b{_PREPOSITION}\s+(?:{_FULL_DATE}|{_BARE_YEAR})"
    rf"|\bfor\s+(?:{_FULL_DATE}|{_BARE_YEAR}{_PHRASE_END})",
    re.IGNORECASE,
)


def route_query(text: str) -> RouteDecision:
    """Route ``text`` by the first matching rule of SPEC §9.3; total and deterministic.

    Raises :class:`~memlab.exceptions.ValidationError` when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise ValidationError(f"route_query needs a str, got {type(text).__name__}")
    query = text.strip()
    if _QUOTED.fullmatch(query):
        return RouteDecision(SearchType.CHUNKS_LEXICAL, "quoted_phrase")
    if _CODING_RULES.search(query):
        return RouteDecision(SearchType.CODING_RULES, "coding_rules_intent")
    if _TIME_SCOPED.search(query):
        return RouteDecision(SearchType.TEMPORAL, "time_scoped_question")
    return RouteDecision(SearchType.HYBRID_COMPLETION, "default")
