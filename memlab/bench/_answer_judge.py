"""The answer and judge prompts of the answer-level evaluation, the judge parser, and the offline answerer and judge.

Used by :mod:`memlab.bench.quality_answers` (which documents the evaluation); kept apart
so the prompts can be read in one place.

The answer call
---------------
One structured call (``response_model=``:class:`GeneratedAnswer`) per question:
:data:`ANSWER_INSTRUCTIONS` as the system message (plus ``"The question is asked on
<date>."`` when the question has a date), then :func:`memlab.llm.context_prompt`'s user
message: a ``Context:`` block with one retrieved memlab turn per line, best first, each a
JSON object ``{"date": <its session's date>, "user": ..., "assistant": ...}`` (an empty
side left out; JSON keeps a multi-line message on one line), and the ``Question:`` line.
An output that is not the JSON object is taken as the answer verbatim (a model that
answered in plain text still answered).

The judge call
--------------
One structured call (``response_model=``:class:`AnswerJudgement`) per answered question, in
the spirit of LongMemEval's and LoCoMo's LLM judges: a yes/no correctness verdict.
:data:`JUDGE_INSTRUCTIONS` for an answerable question (yes when the response gives the
correct answer, in other words or with detail that does not contradict it; the latest
value for an update; off-by-one in a count of days; a recommendation that follows the
described taste), :data:`ABSTENTION_JUDGE_INSTRUCTIONS` for an abstention question (yes
when the response declines or says the information is not there). The user message holds
tagged blocks: ``<question>``, then ``<correct_answer>`` (answerable) or ``<note>`` (the
gold "answer" of an abstention question: what is missing), then ``<response>``.

:func:`parse_verdict` reads an output that is not a valid :class:`AnswerJudgement`: a JSON
object with a ``verdict`` / ``label`` / ``correct`` / ``answer`` / ``result`` / ``grade`` key
(``yes`` / ``no``, ``correct`` / ``incorrect`` / ``wrong``, ``true`` / ``false``, any case), else
a text whose first word is such a label (``"Yes."``, ``"CORRECT"``), else a last line that is
one (``"...\\nVerdict: no"``). Anything else is unreadable (None): the evaluation counts a
**judge failure**, never a verdict.

The offline answerer and judge
------------------------------
Registered (``replace=False``, so a handler registered first is kept) on the clients'
:class:`~memlab.llm.StructuredHandlers`; deterministic, for tests and pipeline checks:

* :func:`offline_answer`: ``"I don't know."`` when nothing was retrieved, else every
  retrieved turn echoed in rank order (``[date] user text assistant text ...``): a reader
  that never misreads, so offline accuracy measures whether the retrieval put the answer
  in front of the model.
* :func:`offline_judgement`: answerable: ``yes`` when the :func:`normalise_answer` form of
  the correct answer occurs, as whole words, in that of the response (an empty correct
  answer: ``no``); abstention: ``yes`` when the response holds one of
  :data:`DECLINE_PHRASES` (normalised).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from memlab.llm import I_DONT_KNOW, LLMClient, OfflineRequest, context_prompt
from memlab.text import message_text

__all__ = [
    "ABSTENTION_JUDGE_INSTRUCTIONS",
    "ANSWER_INSTRUCTIONS",
    "DECLINE_PHRASES",
    "JUDGE_INSTRUCTIONS",
    "AnswerJudgement",
    "GeneratedAnswer",
    "Verdict",
    "answer_messages",
    "context_line",
    "judge_messages",
    "normalise_answer",
    "offline_answer",
    "offline_judgement",
    "parse_verdict",
    "register_offline_handlers",
]

Verdict = Literal["yes", "no"]

ANSWER_INSTRUCTIONS = (
    "You answer a question about a user's past conversations with an AI assistant.\n"
    "The context holds excerpts of those conversations, one per line, most relevant first. Each is a JSON object: "
    '"date" is when that conversation took place, "user" what the user said, "assistant" what the assistant replied.\n'
    "Answer from the excerpts only, briefly: a few words or one sentence. When excerpts disagree, the most recent one "
    f'holds. If the excerpts do not contain the answer, answer "{I_DONT_KNOW}" and nothing else.\n'
    'Reply with a JSON object: {"answer": "<your answer>"}.'
)

_JUDGE_REPLY = 'Reply with a JSON object: {"reason": "<one short sentence>", "verdict": "yes"} or the same with "verdict": "no".'

JUDGE_INSTRUCTIONS = (
    "You check a response to a question about a user's past conversations. You are given the question, the correct "
    "answer and the response.\n"
    'Say "yes" when the response gives the correct answer: the same fact in other words, the same date or number in '
    'another format, or the correct answer with extra detail that does not contradict it. Also say "yes" when the '
    "question asks for a current value and the response gives the latest one, even if it mentions earlier ones; when "
    "the question asks for a number of days, weeks or months and the response is off by one; and when the correct "
    "answer describes what a good recommendation looks like and the response follows that description.\n"
    'Say "no" when the response is wrong, contradicts the correct answer, gives only part of what the answer needs, '
    "or does not answer (for example, says it does not know).\n" + _JUDGE_REPLY
)

ABSTENTION_JUDGE_INSTRUCTIONS = (
    "You check a response to a question that cannot be answered from a user's past conversations: what it asks about "
    "was never mentioned. You are given the question, a note on what is missing (it may be empty) and the response.\n"
    'Say "yes" when the response declines to answer or says the information is not available; it may mention related '
    'things it does know. Say "no" when the response answers the question as if the information were known.\n'
    + _JUDGE_REPLY
)

#: normalised phrases that make a response a decline for the offline judge (abstention questions)
DECLINE_PHRASES = (
    "i don t know",
    "i do not know",
    "don t have",
    "do not have",
    "not mentioned",
    "never mentioned",
    "not stated",
    "no information",
    "not enough information",
    "not available",
    "cannot answer",
    "can t answer",
    "unanswerable",
    "no record",
)


class GeneratedAnswer(BaseModel):
    """The answer model's output: the answer to the question."""

    answer: str


class AnswerJudgement(BaseModel):
    """The judge's output: a one-sentence reason, then the verdict (``yes``: the response is correct)."""

    reason: str
    verdict: Verdict


def normalise_answer(text: str) -> str:
    """Lowercase alphanumeric runs joined by single spaces, the articles ``a`` / ``an`` / ``the`` dropped (SQuAD-style)."""
    return " ".join(word for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in ("a", "an", "the"))


def context_line(date: str, user: str, assistant: str) -> str:
    """One retrieved turn as a context line: a JSON object with ``date``, ``user`` and ``assistant`` (empty ones left out)."""
    fields = {"date": date, "user": user, "assistant": assistant}
    return json.dumps({key: value for key, value in fields.items() if value}, ensure_ascii=False)


def answer_messages(question: str, lines: Sequence[str], question_date: str = "") -> list[dict[str, str]]:
    """The answer prompt (module docstring): instructions, the context lines, the question."""
    instructions = ANSWER_INSTRUCTIONS + (f"\nThe question is asked on {question_date}." if question_date else "")
    return context_prompt(question, list(lines), instructions=instructions)


def judge_messages(question: str, gold: str, response: str, *, abstention: bool) -> list[dict[str, str]]:
    """The judge prompt (module docstring) for one response."""
    tag = "note" if abstention else "correct_answer"
    body = f"<question>\n{question}\n</question>\n<{tag}>\n{gold}\n</{tag}>\n<response>\n{response}\n</response>"
    instructions = ABSTENTION_JUDGE_INSTRUCTIONS if abstention else JUDGE_INSTRUCTIONS
    return [{"role": "system", "content": instructions}, {"role": "user", "content": body}]


# -- reading a judge's output ------------------------------------------------------------------------

_LABELS: dict[str, Verdict] = {"yes": "yes", "correct": "yes", "true": "yes", "no": "no", "incorrect": "no", "wrong": "no", "false": "no"}
_KEYS = ("verdict", "label", "correct", "answer", "result", "grade")
_LABEL = r"(yes|no|correct|incorrect|wrong)"
_FIRST_WORD = re.compile(rf"^\W*{_LABEL}\b", re.IGNORECASE)
_LAST_LINE = re.compile(rf"^\W*(?:(?:final\s+)?(?:verdict|answer|label|grade)\W*)?{_LABEL}\W*$", re.IGNORECASE)


def _json_verdict(value: Any) -> Verdict | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return _LABELS.get(value.strip().strip(".!").lower())
    return None


def parse_verdict(text: str) -> Verdict | None:
    """The verdict in a judge output that is not a valid :class:`AnswerJudgement`; None when unreadable (module docstring)."""
    stripped = text.strip()
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        try:
            data = json.loads(stripped[start : end + 1])
        except ValueError:
            data = None
        if isinstance(data, dict):
            keyed = {str(key).lower(): value for key, value in data.items()}
            return next((found for key in _KEYS if key in keyed and (found := _json_verdict(keyed[key])) is not None), None)
    first = _FIRST_WORD.match(stripped)
    if first:
        return _LABELS[first.group(1).lower()]
    lines = [line for line in stripped.splitlines() if line.strip()]
    last = _LAST_LINE.match(lines[-1]) if lines else None
    return _LABELS[last.group(1).lower()] if last else None


# -- the offline answerer and judge ------------------------------------------------------------------

_BLOCK = re.compile(r"<(question|correct_answer|note)>\n?(.*?)\n?</\1>", re.DOTALL)


def _echo(line: str) -> str:
    try:
        data = json.loads(line)
    except ValueError:
        return line.strip()
    if not isinstance(data, dict):
        return line.strip()
    date = f"[{data['date']}]" if data.get("date") else ""
    return " ".join(str(part) for part in (date, data.get("user"), data.get("assistant")) if part)


def offline_answer(request: OfflineRequest) -> GeneratedAnswer:
    """The offline answerer: every retrieved turn echoed in rank order; ``"I don't know."`` when none was retrieved."""
    lines = [line for line in request.context.splitlines() if line.strip()]
    return GeneratedAnswer(answer=" ".join(_echo(line) for line in lines) if lines else I_DONT_KNOW)


def _judge_blocks(messages: Sequence[Mapping[str, Any]]) -> tuple[dict[str, str], str]:
    """The tagged blocks and the response of the last user message of a judge prompt."""
    text = next((message_text(message) for message in reversed(messages) if message.get("role") == "user"), "")
    blocks = {match.group(1): match.group(2) for match in _BLOCK.finditer(text)}
    opening = text.find("<response>", max((text.find(f"</{name}>") for name in blocks), default=0))
    closing = text.rfind("</response>")
    response = text[opening + len("<response>") : closing].strip("\n") if 0 <= opening < closing else ""
    return blocks, response


def offline_judgement(request: OfflineRequest) -> AnswerJudgement:
    """The offline judge (module docstring): whole-word containment of the correct answer, or a decline phrase."""
    blocks, response = _judge_blocks(request.messages)
    said = f" {normalise_answer(response)} "
    if "note" in blocks:
        declined = any(f" {phrase} " in said for phrase in DECLINE_PHRASES)
        reason = "the response declines to answer" if declined else "the response does not decline to answer"
        return AnswerJudgement(reason=reason, verdict="yes" if declined else "no")
    gold = normalise_answer(blocks.get("correct_answer", ""))
    found = bool(gold) and f" {gold} " in said
    reason = f"the correct answer {gold!r} {'occurs' if found else 'does not occur'} in the response"
    return AnswerJudgement(reason=reason, verdict="yes" if found else "no")


def register_offline_handlers(answer_llm: LLMClient, judge_llm: LLMClient) -> None:
    """Register :func:`offline_answer` and :func:`offline_judgement` on the two clients, keeping handlers already there."""
    answer_llm.handlers.register(GeneratedAnswer.__name__, offline_answer, replace=False)
    judge_llm.handlers.register(AnswerJudgement.__name__, offline_judgement, replace=False)
