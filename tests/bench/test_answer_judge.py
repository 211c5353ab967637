"""The answer-level evaluation's prompts (issue 26 item 6): the offline answerer and judge through memlab's client,
the parser of judge outputs that are not the JSON verdict, answer normalisation."""

from __future__ import annotations

import pytest

from memlab.bench._answer_judge import (
    AnswerJudgement,
    GeneratedAnswer,
    answer_messages,
    context_line,
    judge_messages,
    normalise_answer,
    parse_verdict,
    register_offline_handlers,
)
from memlab.llm import LLMClient


async def test_the_offline_answerer_echoes_the_retrieved_turns_or_declines():
    client = LLMClient()
    register_offline_handlers(client, client)
    lines = [context_line("2023-01-05", "We moved to Castle Terrace.", "Congratulations."), context_line("2023-01-01", "Hi\nthere", "")]
    assert lines[1] == '{"date": "2023-01-01", "user": "Hi\\nthere"}'  # one line per turn, an empty side left out
    messages = answer_messages("Where do I live?", lines, "2023-02-01")
    assert messages[0]["role"] == "system" and messages[0]["content"].endswith("The question is asked on 2023-02-01.")
    result = await client.complete(messages, response_model=GeneratedAnswer)
    assert result.structured.answer == "[2023-01-05] We moved to Castle Terrace. Congratulations. [2023-01-01] Hi\nthere"
    empty = await client.complete(answer_messages("Where do I live?", []), response_model=GeneratedAnswer)
    assert empty.structured.answer == "I don't know."


def test_a_handler_registered_first_is_kept():
    client = LLMClient()
    mine = client.handlers.register(AnswerJudgement.__name__, lambda request: "Yes.")
    register_offline_handlers(client, client)
    assert mine is None and client.handlers.lookup(AnswerJudgement.__name__)(None) == "Yes."


@pytest.mark.parametrize(
    ("gold", "response", "abstention", "verdict"),
    [
        ("Castle Terrace", "We live on castle terrace now.", False, "yes"),  # case and punctuation normalised
        ("the Midnight Ferns", "Midnight Ferns, at the arena.", False, "yes"),  # articles dropped
        ("Castle Terrace", "Elm Street.", False, "no"),
        ("Ital", "I study Italian.", False, "no"),  # whole words only
        ("", "anything", False, "no"),  # nothing to match
        ("I don't know.", "I don't know.", True, "yes"),  # abstention: a decline is correct
        ("Height was never stated.", "That was not mentioned in our chats.", True, "yes"),
        ("I don't know.", "You are 180 cm tall.", True, "no"),
    ],
)
async def test_the_offline_judge_through_the_client(gold, response, abstention, verdict):
    client = LLMClient()
    register_offline_handlers(client, client)
    result = await client.complete(judge_messages("Where do I live?", gold, response, abstention=abstention), response_model=AnswerJudgement)
    assert result.structured.verdict == verdict and result.structured.reason


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"reason": "fine", "verdict": "Yes"}', "yes"),
        ('```json\n{"label": "WRONG"}\n```', "no"),
        ('{"correct": true}', "yes"),
        ("CORRECT", "yes"),
        ("No, the response names another street.", "no"),
        ("The response names the right street.\nVerdict: yes", "yes"),
        ("It gets the date wrong.\n**no**", "no"),
        ("maybe", None),
        ("", None),
        ("The response is not correct", None),  # a label only inside a sentence: unreadable, not a pass
        ('{"reason": "no verdict given"}', None),
    ],
)
def test_parse_verdict_reads_labels_and_refuses_anything_else(text, verdict):
    assert parse_verdict(text) == verdict


def test_normalise_answer():
    assert normalise_answer("  The $115, in TOTAL! ") == "115 in total"
