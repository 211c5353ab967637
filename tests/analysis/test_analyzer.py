"""The turn analyzer (issue 6 item 4, SPEC §5): schema coercion, caps, the prompt, the offline cues."""

from __future__ import annotations

import json
import math

import pytest

from memlab.analysis import SessionTurnAnalysis, analyze_turn, coerce_rating_or_none
from memlab.analysis._analyzer import analysis_messages
from memlab.llm import LLMClient
from memlab.models import SessionContextEntry, SessionQAEntry


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None), (True, None), (False, None), (3.5, None), (math.nan, None), (math.inf, None), ("x", None), ("", None),
        (0, None), (6, None), ("6", None), (-1, None), ([4], None),
        (1, 1), (5, 5), ("4", 4), (" 2 ", 2), (3.0, 3), ("3.0", 3),
    ],
)
def test_rating_coercion(value, expected) -> None:
    assert coerce_rating_or_none(value) == expected
    assert SessionTurnAnalysis(previous_answer_rating=value).previous_answer_rating == expected


def test_text_fields_are_stripped_and_blank_is_none() -> None:
    analysis = SessionTurnAnalysis(response_to_user="  Got it.  ", query_to_answer=" \n\t ")
    assert analysis.response_to_user == "Got it." and analysis.query_to_answer is None
    assert SessionTurnAnalysis(query_to_answer="   ").query_to_answer is None
    assert not SessionTurnAnalysis().has_signal


def test_lists_keep_their_first_three() -> None:
    analysis = SessionTurnAnalysis.model_validate(
        {
            "served_context_ratings": [{"id": f"c{i}", "verdict": "helpful"} for i in range(5)],
            "candidate_context_updates": [{"section": "rules", "content": f"rule {i}", "confidence": 0.9} for i in range(5)],
            "served_context_ratings_extra": "ignored",
        }
    )
    assert [rating.id for rating in analysis.served_context_ratings] == ["c0", "c1", "c2"]
    assert [update.content for update in analysis.candidate_context_updates] == ["rule 0", "rule 1", "rule 2"]
    assert analysis.candidate_context_updates[0].profile == "qa" and analysis.has_signal
    assert SessionTurnAnalysis(served_context_ratings=None).served_context_ratings == []


def _qa(question: str, answer: str) -> SessionQAEntry:
    return SessionQAEntry(time="2026-01-01T00:00:00+00:00", question=question, context="", answer=answer, qa_id="q1")


def test_the_prompt_carries_previous_turn_served_guidance_and_message() -> None:
    served = [SessionContextEntry(id="g1", section="rules", content="Cite sources.", confidence=0.9)]
    messages = analysis_messages("And then?", _qa("Who discovered Polonium?", "Marie Curie."), served)
    assert messages[0]["role"] == "system" and "previous_answer_rating" in messages[0]["content"]
    turn = json.loads(messages[1]["content"].removeprefix("Turn:"))
    assert turn == {
        "previous_question": "Who discovered Polonium?",
        "previous_answer": "Marie Curie.",
        "served_guidance": [{"id": "g1", "section": "rules", "content": "Cite sources."}],
        "new_message": "And then?",
    }
    assert json.loads(analysis_messages("hi", None, [])[1]["content"].removeprefix("Turn:"))["previous_question"] is None


async def _analyze(message: str, previous: SessionQAEntry | None = None, served=()) -> SessionTurnAnalysis:
    result = await analyze_turn(LLMClient(), message, previous, list(served))
    assert result.llm_calls == 1 and result.tokens_in > 0 and result.tokens_out > 0
    return result.analysis


async def test_blank_message_is_empty_without_a_call() -> None:
    result = await analyze_turn(LLMClient("no-such-provider/model"), "   ")  # a call would fail
    assert result.analysis == SessionTurnAnalysis() and result.llm_calls == 0


async def test_offline_terse_follow_up_gets_the_previous_topic() -> None:
    analysis = await _analyze("And where did she work?", _qa("Who discovered Polonium?", "Marie Curie discovered Polonium."))
    assert analysis.query_to_answer == "And where did she work? (about: discovered Polonium)"
    assert analysis.response_to_user is None and not analysis.candidate_context_updates
    standalone = await _analyze("Who described the Turing machine?", _qa("Who discovered Polonium?", "Marie Curie."))
    assert standalone.query_to_answer == "Who described the Turing machine?"
    assert (await _analyze("And where did she work?")).query_to_answer == "And where did she work?"  # no previous turn


@pytest.mark.parametrize("message", ["thanks", "Ok.", "okay thanks!", "Got it"])
async def test_offline_acknowledgements_gate(message) -> None:
    analysis = await _analyze(message, _qa("q", "a"))
    assert analysis.query_to_answer is None and analysis.response_to_user == "Got it."
    assert analysis.previous_answer_rating is None and not analysis.candidate_context_updates


@pytest.mark.parametrize(
    ("message", "section"),
    [
        ("Always cite the source document.", "rules"),
        ("Never guess dates.", "rules"),
        ("Please answer in French.", "rules"),
        ("I prefer short answers.", "preferences"),
        ("I like bullet points.", "preferences"),
        ("My goal is to pass the physics exam.", "goals"),
        ("I want to learn about radioactivity.", "goals"),
    ],
)
async def test_offline_guidance_cues(message, section) -> None:
    analysis = await _analyze(message, _qa("q", "a"))
    [update] = analysis.candidate_context_updates
    assert (update.section, update.content, update.profile) == (section, message, "qa")
    assert update.confidence >= 0.75
    assert analysis.query_to_answer is None and analysis.response_to_user


async def test_offline_ratings_of_the_previous_answer_and_served_guidance() -> None:
    served = [SessionContextEntry(id=f"g{i}", section="rules", content=f"rule {i}", confidence=0.9) for i in range(4)]
    low = await _analyze("That's wrong.", _qa("q", "a"), served)
    assert low.previous_answer_rating == 1 and low.query_to_answer is None
    assert [(rating.id, rating.verdict) for rating in low.served_context_ratings] == [("g0", "harmful"), ("g1", "harmful"), ("g2", "harmful")]
    assert (await _analyze("That is incorrect.", _qa("q", "a"))).previous_answer_rating == 1
    high = await _analyze("Great, that's correct!", _qa("q", "a"), served[:1])
    assert high.previous_answer_rating == 5 and [rating.verdict for rating in high.served_context_ratings] == ["helpful"]
    assert (await _analyze("That's wrong.")).previous_answer_rating is None  # nothing to rate


async def test_offline_mixed_message_keeps_its_question() -> None:
    analysis = await _analyze("That's wrong. Always cite sources. Who discovered Radium?", _qa("q", "a"))
    assert analysis.previous_answer_rating == 1
    assert [update.section for update in analysis.candidate_context_updates] == ["rules"]
    assert analysis.query_to_answer == "Who discovered Radium?" and analysis.response_to_user is None
