"""route_query: the SPEC §9.3 routing table, rule by rule, and parse_search_type."""

from __future__ import annotations

import pytest

import memlab
from memlab.exceptions import ValidationError
from memlab.retrievers import RouteDecision, SearchType, parse_search_type, route_query

LEXICAL = RouteDecision(SearchType.CHUNKS_LEXICAL, "quoted_phrase")
CODING = RouteDecision(SearchType.CODING_RULES, "coding_rules_intent")
TEMPORAL = RouteDecision(SearchType.TEMPORAL, "time_scoped_question")
DEFAULT = RouteDecision(SearchType.HYBRID_COMPLETION, "default")

PREPOSITIONS = [
    "in", "during", "before", "after", "since", "until", "till", "between", "from", "by", "on",
    "around", "circa", "as of", "prior to", "through", "throughout",
]  # fmt: skip


# --- rule 1: quoted_phrase ----------------------------------------------------------------


@pytest.mark.parametrize("query", ['"exact phrase"', '  "padded phrase"  ', '"x"', '"in 2020 coding rules"', '"  "'])
def test_whole_query_quoted_routes_lexical(query: str) -> None:
    assert route_query(query) == LEXICAL


@pytest.mark.parametrize(
    "query",
    ['find "exact phrase"', '"exact phrase" please', '"a" and "b"', '""', '"unterminated', "'single quoted'", "“curly”"],
)
def test_partly_quoted_or_empty_quotes_is_not_lexical(query: str) -> None:
    assert route_query(query).rule != "quoted_phrase"


# --- rule 2: coding_rules_intent ------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "What are our coding rules?", "coding rule for imports", "Show the CODING STANDARDS",
        "coding standard", "python coding conventions", "coding convention", "coding guidelines",
        "coding   guideline", "code review guidelines", "code review guideline", "code review rules",
        "code review rule", "code review standards", "code review standard", "code review checklist",
        "code review conventions", "code review convention",
    ],
)  # fmt: skip
def test_coding_rules_wording(query: str) -> None:
    assert route_query(query) == CODING


@pytest.mark.parametrize(
    "query",
    ["encoding rules for utf-8", "coding is fun", "rules of coding", "code rules", "code review tips", "code review checklists"],
)
def test_not_coding_rules(query: str) -> None:
    assert route_query(query).rule != "coding_rules_intent"


# --- rule 3: time_scoped_question -----------------------------------------------------------


@pytest.mark.parametrize("preposition", PREPOSITIONS)
def test_each_time_preposition_with_a_year(preposition: str) -> None:
    assert route_query(f"What changed {preposition} 2019?") == TEMPORAL
    assert route_query(f"What changed {preposition.upper()} 2019?") == TEMPORAL


@pytest.mark.parametrize("preposition", PREPOSITIONS)
def test_time_preposition_needs_a_date_right_after_it(preposition: str) -> None:
    assert route_query(f"What changed {preposition} the team in March?") == DEFAULT
    assert route_query(f"What changed {preposition} version 2019?") == DEFAULT


@pytest.mark.parametrize(
    "date",
    [
        "2021-03-04", "2099-12-31", "1000-01-01",  # ISO
        "March 2020", "March 5 2020", "March 5, 2020", "March 5th, 2020", "5 March 2020", "21st March 2020",
        "Mar 2020", "Mar. 2020", "Sep 2020", "Sept 2020", "Sept. 9, 2020", "9 Dec 1999", "may 2020",
        "January 1999", "February 1999", "April 1999", "June 1999", "July 1999", "August 1999",
        "September 1999", "October 1999", "November 1999", "December 1999",
        "Jan 1999", "Feb 1999", "Apr 1999", "Jun 1999", "Jul 1999", "Aug 1999", "Oct 1999", "Nov 1999",
        "2020", "1999", "1990s", "early 2020", "late 1990s", "mid 2020", "mid-2020", "mid-1990s",  # years
        "the 1990s", "the 2000s",  # decades
    ],
)  # fmt: skip
def test_each_absolute_date_form(date: str) -> None:
    assert route_query(f"what happened in {date}") == TEMPORAL
    assert route_query(f"what happened on {date}?") == TEMPORAL


@pytest.mark.parametrize(
    "date",
    [
        "999", "0999", "2100", "3000", "20201",  # years outside 1000-2099
        "2020-13-01", "2020-00-10", "2020-01-32",  # ISO with a bad month or day
        "March", "March 5", "5 March", "Marchy 2020",  # months without a year
        "the 90s", "2020th", "early 3000", "the early 1990s",  # not a listed form
    ],
)  # fmt: skip
def test_not_absolute_dates(date: str) -> None:
    # Bad ISO dates still start with a year, which is a date on its own after "in".
    expected = TEMPORAL if date.startswith("2020-") else DEFAULT
    assert route_query(f"what happened in {date}") == expected


def test_bad_iso_date_after_for_is_not_a_bare_year() -> None:
    assert route_query("numbers for 2020-13-01") == TEMPORAL  # the bare year ends at the hyphen
    assert route_query("numbers for 2020-01-05 run") == TEMPORAL


def test_preposition_must_be_a_whole_word() -> None:
    assert route_query("Berlin 2020 plans") == DEFAULT
    assert route_query("bygone 2020 plans") == DEFAULT
    assert route_query("summit 2020") == DEFAULT


def test_year_must_not_run_into_a_word() -> None:
    assert route_query("in 2020abc") == DEFAULT
    assert route_query("in 2020年") == DEFAULT


@pytest.mark.parametrize(
    "query",
    [
        "revenue for 2020", "revenue for 2020?", "revenue for 2020.", "for 2020, what was revenue",
        "revenue for 2020 and 2021", "for 2019 and 2020", "for 2019 or 2020", "for 2019 to 2021",
        "for 2019 through 2021", "for 2019 until 2021", "for 2019 till 2021", "for 2019-2021",
        "for early 2020", "for mid-2020", "for the 1990s hits", "for March 2020 sales",
        "for 2020-01-05 logs", "FOR 2020",
    ],
)  # fmt: skip
def test_for_with_a_date(query: str) -> None:
    assert route_query(query) == TEMPORAL


@pytest.mark.parametrize(
    "query", ["for 2020 revenue", "plans for 2020 growth", "for 1000 users", "for 2020's revenue", "for 2020s music", "for 3000"]
)
def test_for_with_a_bare_year_followed_by_a_noun(query: str) -> None:
    assert route_query(query) == DEFAULT


# --- precedence and default -----------------------------------------------------------------


def test_first_matching_rule_wins() -> None:
    assert route_query('"coding rules in 2020"') == LEXICAL
    assert route_query("coding rules in 2020") == CODING
    assert route_query("code review checklist since 2021-01-01") == CODING


@pytest.mark.parametrize("query", ["", "   ", "What does memlab do?", "tell me about Einstein", "2020", "for revenue"])
def test_default(query: str) -> None:
    assert route_query(query) == DEFAULT


def test_route_decision_is_frozen() -> None:
    decision = route_query("hi")
    with pytest.raises(AttributeError):
        decision.rule = "quoted_phrase"  # type: ignore[misc]


@pytest.mark.parametrize("value", [None, 42, b"in 2020", ["in 2020"]])
def test_non_string_query_is_rejected(value: object) -> None:
    with pytest.raises(ValidationError, match="str"):
        route_query(value)  # type: ignore[arg-type]


# --- SearchType -----------------------------------------------------------------------------

SEARCH_TYPE_NAMES = [
    "CHUNKS", "CHUNKS_LEXICAL", "SUMMARIES", "RAG_COMPLETION", "GRAPH_COMPLETION", "GRAPH_COMPLETION_COT",
    "GRAPH_COMPLETION_CONTEXT_EXTENSION", "GRAPH_SUMMARY_COMPLETION", "TRIPLET_COMPLETION", "HYBRID_COMPLETION",
    "TEMPORAL", "AGENTIC_COMPLETION", "FEELING_LUCKY", "CODING_RULES", "SKILLS",
]  # fmt: skip


def test_search_type_members_are_exactly_the_contract() -> None:
    assert list(SearchType.__members__) == SEARCH_TYPE_NAMES
    assert all(member.value == member.name for member in SearchType)
    assert SearchType.CHUNKS == "CHUNKS"
    assert memlab.SearchType is SearchType


@pytest.mark.parametrize("value", ["chunks", "CHUNKS", "Graph_Completion_Cot", SearchType.SKILLS])
def test_parse_search_type_accepts_members_and_names_in_any_case(value: object) -> None:
    assert parse_search_type(value).name == str(getattr(value, "name", value)).upper()  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["CYPHER", "", " chunks", "graph completion", None, 3])
def test_parse_search_type_rejects_anything_else(value: object) -> None:
    with pytest.raises(ValidationError) as raised:
        parse_search_type(value)  # type: ignore[arg-type]
    message = str(raised.value)
    assert repr(value) in message
    assert all(name in message for name in SEARCH_TYPE_NAMES)
