"""build_conversational_query against every rule of SPEC §6.4."""

from __future__ import annotations

import pytest

import memlab.analysis
from memlab.analysis import MAX_QUERY_CHARS, build_conversational_query
from memlab.exceptions import ValidationError

USER = "Prior user: "
ASSISTANT = "Prior assistant (untrusted retrieval guidance): "
CURRENT = "Current user request: "


def test_exports() -> None:
    assert set(memlab.analysis.__all__) >= {"build_conversational_query", "MAX_QUERY_CHARS"}
    assert MAX_QUERY_CHARS == 2000


def test_no_prior_turns_returns_the_normalised_raw_query() -> None:
    assert build_conversational_query("  what\tis\n\n memlab? ", []) == "what is memlab?"
    assert build_conversational_query("x" * 2500, []) == "x" * 2000


def test_turns_with_nothing_left_after_normalising_count_as_absent() -> None:
    assert build_conversational_query(" q ", [(" ", "\n\t"), ("", "")]) == "q"


def test_rendering() -> None:
    rewrite = build_conversational_query(
        "and in 2021?", [("what was\nrevenue in 2020 ", " 5M.  Up 10%"), ("and profit?", "1M")]
    )
    assert rewrite == (
        f"{USER}what was revenue in 2020\n{ASSISTANT}5M. Up 10%\n\n"
        f"{USER}and profit?\n{ASSISTANT}1M\n\n"
        f"{CURRENT}and in 2021?"
    )


def test_empty_fields_omit_their_line() -> None:
    assert build_conversational_query("r", [("q", ""), ("", "a")]) == f"{USER}q\n\n{ASSISTANT}a\n\n{CURRENT}r"


def test_only_the_two_most_recent_turns_are_used() -> None:
    rewrite = build_conversational_query("r", [("q1", "a1"), ("q2", "a2"), ("q3", "a3")])
    assert rewrite == f"{USER}q2\n{ASSISTANT}a2\n\n{USER}q3\n{ASSISTANT}a3\n\n{CURRENT}r"
    # the two given last are taken before empty turns are dropped
    assert build_conversational_query("r", [("q1", "a1"), ("q2", "a2"), (" ", " ")]) == f"{USER}q2\n{ASSISTANT}a2\n\n{CURRENT}r"


def test_exactly_at_the_cap_is_untouched() -> None:
    fixed = len(f"{USER}q\n{ASSISTANT}\n\n{CURRENT}r")
    answer = "a" * (MAX_QUERY_CHARS - fixed)
    rewrite = build_conversational_query("r", [("q", answer)])
    assert len(rewrite) == MAX_QUERY_CHARS
    assert rewrite == f"{USER}q\n{ASSISTANT}{answer}\n\n{CURRENT}r"


def test_long_answers_are_trimmed_first_oldest_first() -> None:
    old_answer, new_answer = "o" * 1500, "n" * 1500
    rewrite = build_conversational_query("r", [("old q", old_answer), ("new q", new_answer)])
    assert len(rewrite) == MAX_QUERY_CHARS
    fixed = len(f"{USER}old q\n{ASSISTANT}\n\n{USER}new q\n{ASSISTANT}{new_answer}\n\n{CURRENT}r")
    assert rewrite == f"{USER}old q\n{ASSISTANT}{'o' * (MAX_QUERY_CHARS - fixed)}\n\n{USER}new q\n{ASSISTANT}{new_answer}\n\n{CURRENT}r"


def test_an_emptied_old_answer_then_the_newer_answer_is_cut() -> None:
    # the old answer alone cannot absorb the overflow: it disappears with its line, then the new one is cut
    rewrite = build_conversational_query("r", [("old q", "o" * 300), ("new q", "n" * 2500)])
    assert len(rewrite) == MAX_QUERY_CHARS
    assert rewrite.count(ASSISTANT) == 1
    fixed = len(f"{USER}old q\n\n{USER}new q\n{ASSISTANT}\n\n{CURRENT}r")
    assert rewrite == f"{USER}old q\n\n{USER}new q\n{ASSISTANT}{'n' * (MAX_QUERY_CHARS - fixed)}\n\n{CURRENT}r"


def test_questions_are_trimmed_after_answers_older_first() -> None:
    old_q, new_q = "p" * 1200, "q" * 1200
    rewrite = build_conversational_query("r", [(old_q, "a" * 500), (new_q, "b" * 500)])
    assert ASSISTANT not in rewrite  # both answers went first
    fixed = len(f"{USER}\n\n{USER}{new_q}\n\n{CURRENT}r")
    assert rewrite == f"{USER}{'p' * (MAX_QUERY_CHARS - fixed)}\n\n{USER}{new_q}\n\n{CURRENT}r"


def test_a_raw_query_longer_than_the_cap_is_cut_without_prior_turns_or_prefix() -> None:
    raw = "w  " * 1200  # normalises to 2,399 characters
    rewrite = build_conversational_query(raw, [("question", "answer")])
    # as cognee: the normalised raw request cut to the cap, no prior turns, no prefix
    assert rewrite == " ".join(raw.split())[:MAX_QUERY_CHARS]
    assert not rewrite.startswith(CURRENT)
    # exactly at the cap, the raw request is not over it: prior turns are trimmed away, the prefix stays
    at_cap = "w" * MAX_QUERY_CHARS
    assert build_conversational_query(at_cap, [("question", "answer")]) == (CURRENT + at_cap)[:MAX_QUERY_CHARS]


def test_a_raw_query_that_nearly_fills_the_cap_keeps_its_ending() -> None:
    raw = "w" * (MAX_QUERY_CHARS - len(CURRENT) - 40)
    rewrite = build_conversational_query(raw, [("question " * 10, "answer " * 10)])
    # the answer goes, then the question is cut to what fits
    assert rewrite == f"{USER}{('question ' * 10).strip()[:26]}\n\n{CURRENT}{raw}"
    assert len(rewrite) == MAX_QUERY_CHARS
    # with no room for any prior line, only the current request is left
    raw = "w" * (MAX_QUERY_CHARS - len(CURRENT) - 10)
    assert build_conversational_query(raw, [("question " * 10, "answer " * 10)]) == f"{CURRENT}{raw}"


@pytest.mark.parametrize(
    ("raw", "turns", "message"),
    [
        (None, [], "raw must be a string, got None"),
        ("r", "qa", "prior_turns must be a sequence"),
        ("r", [("q",)], "a prior turn must be a (question, answer) pair of strings, got ('q',)"),
        ("r", [("q", None)], "pair of strings, got ('q', None)"),
        ("r", ["qa"], "pair of strings, got 'qa'"),
    ],
)
def test_bad_arguments(raw: object, turns: object, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        build_conversational_query(raw, turns)  # type: ignore[arg-type]
    assert message in str(raised.value)
