"""The turn analyzer: one structured-output LLM call reading a new message against the previous turn (SPEC §5).

:func:`analyze_turn` sends the previous question and answer, the guidance served to
that answer and the new message, and gets back a :class:`SessionTurnAnalysis`: a
reply for a message that needs no retrieval, the effective query, verdicts on the
served guidance, candidate guidance updates and a 1..5 rating of the previous answer.

The offline provider fills the schema with :func:`offline_turn_analysis`, a
deterministic reading of cue words (registered on the call's ``llm.handlers``
before each call unless a researcher registered their own handler there), so
every path runs without a network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlab.text import STOP_WORDS, content_words

__all__ = [
    "ANALYSIS_INSTRUCTIONS",
    "MAX_ANALYSIS_ITEMS",
    "ContextUpdate",
    "ServedContextRating",
    "SessionTurnAnalysis",
    "TurnAnalysisResult",
    "analysis_messages",
    "analyze_turn",
    "coerce_rating_or_none",
    "offline_turn_analysis",
]

#: ratings and candidate updates beyond the first this many are dropped
MAX_ANALYSIS_ITEMS = 3
#: the label of the JSON turn block in the analysis prompt's user message
_TURN_LABEL = "Turn:"

ANALYSIS_INSTRUCTIONS = (
    "You review one turn of a conversation between a user and an assistant that answers from a knowledge base. "
    "The turn block is JSON: the previous question and answer (null when there was none), the guidance items "
    "served to that answer (id, section, content), and the user's new message. Reply with JSON:\n"
    "- query_to_answer: the new message as a self-contained question to retrieve and answer (resolve a terse "
    "follow-up with the previous question's topic); null when the message asks nothing (thanks, feedback, instructions).\n"
    "- response_to_user: a short reply when the message needs no answer (e.g. 'Got it.'), else null.\n"
    "- served_context_ratings: for served guidance the message shows to be helpful or harmful: "
    "{id, verdict: helpful|harmful|neutral}.\n"
    "- candidate_context_updates: durable guidance the message states: {section: goals|rules|preferences|"
    "lessons_learned, content (one sentence, at most 280 characters), confidence 0..1, profile: qa}.\n"
    "- previous_answer_rating: 1..5 when the message judges the previous answer, else null."
)


def coerce_rating_or_none(value: Any) -> int | None:
    """A 1..5 rating, or None: None, bools, non-integral floats, unparseable values and values outside 1..5 give None.

    ``4`` / ``"4"`` / ``3.0`` / ``" 3.0 "`` give 4, 4, 3, 3.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int):
        return None
    return value if 1 <= value <= 5 else None


def _stripped_or_none(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip() or None
    return value


class ServedContextRating(BaseModel):
    """A verdict on one guidance item served to the previous answer (``helpful``, ``harmful`` or ``neutral``)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    verdict: str = Field(description="helpful, harmful or neutral")

    @field_validator("id", "verdict", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value


class ContextUpdate(BaseModel):
    """A candidate guidance item; whether it is kept is decided when the analysis is applied."""

    model_config = ConfigDict(extra="ignore")

    section: str = Field(description="goals, rules, preferences or lessons_learned")
    content: str
    confidence: float = 0.0
    profile: str = "qa"

    @field_validator("section", "content", "profile", mode="before")
    @classmethod
    def _strip(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value


class SessionTurnAnalysis(BaseModel):
    """The analysis of one turn (SPEC §5).

    ``response_to_user`` / ``query_to_answer`` are stripped, blank → None;
    ``served_context_ratings`` / ``candidate_context_updates`` keep their first 3;
    ``previous_answer_rating`` goes through :func:`coerce_rating_or_none`.
    """

    model_config = ConfigDict(extra="ignore")

    response_to_user: Optional[str] = None
    query_to_answer: Optional[str] = None
    served_context_ratings: list[ServedContextRating] = Field(default_factory=list)
    candidate_context_updates: list[ContextUpdate] = Field(default_factory=list)
    previous_answer_rating: Optional[int] = None

    @field_validator("response_to_user", "query_to_answer", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return _stripped_or_none(value)

    @field_validator("served_context_ratings", "candidate_context_updates", mode="before")
    @classmethod
    def _cap(cls, value: Any) -> Any:
        if value is None:
            return []
        return list(value)[:MAX_ANALYSIS_ITEMS] if isinstance(value, Sequence) and not isinstance(value, str) else value

    @field_validator("previous_answer_rating", mode="before")
    @classmethod
    def _rating(cls, value: Any) -> int | None:
        return coerce_rating_or_none(value)

    @property
    def has_signal(self) -> bool:
        """True when the analysis says anything at all (a query, a reply, candidates or ratings)."""
        return bool(self.query_to_answer or self.response_to_user or self.candidate_context_updates or self.served_context_ratings)


@dataclass(frozen=True)
class TurnAnalysisResult:
    """An analysis and what its call cost (``llm_calls`` 0 when no call was made)."""

    analysis: SessionTurnAnalysis
    llm_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


def analysis_messages(message: str, previous: Any, served: Sequence[Any]) -> list[dict[str, str]]:
    """The analysis prompt: instructions, then a ``Turn:`` line followed by the turn as JSON.

    ``previous`` is the previous turn (with ``question`` / ``answer``) or None;
    ``served`` the guidance entries served to it (with ``id`` / ``section`` / ``content``).
    """
    turn = {
        "previous_question": previous.question if previous is not None else None,
        "previous_answer": previous.answer if previous is not None else None,
        "served_guidance": [{"id": entry.id, "section": entry.section, "content": entry.content} for entry in served],
        "new_message": message,
    }
    return [
        {"role": "system", "content": ANALYSIS_INSTRUCTIONS},
        {"role": "user", "content": f"{_TURN_LABEL}\n{json.dumps(turn, ensure_ascii=False, indent=1)}"},
    ]


async def analyze_turn(llm: Any, message: str, previous: Any = None, served: Sequence[Any] = ()) -> TurnAnalysisResult:
    """Analyse ``message`` with ONE structured call of ``llm`` (an :class:`~memlab.llm.LLMClient`).

    A blank message gives an empty analysis without a call. Errors of the call
    (:class:`~memlab.llm.LLMError`, :class:`~memlab.llm.StructuredOutputError` for
    malformed output) propagate: the caller decides to fail open.
    """
    if not message.strip():
        return TurnAnalysisResult(SessionTurnAnalysis())
    llm.handlers.register(SessionTurnAnalysis.__name__, offline_turn_analysis, replace=False)
    result = await llm.complete(analysis_messages(message, previous, served), response_model=SessionTurnAnalysis)
    return TurnAnalysisResult(result.structured, 1, result.tokens_in, result.tokens_out)


# --------------------------------------------------------------------------- the offline filler

_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_ACK_WORDS = frozenset("thanks thank you ok okay thx got it cool alright sure nice fine".split())
_LOW = re.compile(r"\b(?:wrong|incorrect|not (?:right|correct))\b")
_HIGH = re.compile(r"\b(?:great|correct|perfect|exactly|right)\b")
_RULE = re.compile(r"\b(?:always|never)\b|^please\b")
_PREFERENCE = re.compile(r"\bi (?:prefer|like)\b")
_GOAL = re.compile(r"\b(?:my goal|i want to)\b")
_FOLLOW_UP_LEAD = re.compile(r"^(?:and|also|but|then|so|what about|how about)\b")
_ANAPHORA = frozenset("she he it they them her him his its their that this there those these".split())
#: confidence the offline filler gives each cue (all clear cues: >= 0.75)
OFFLINE_CONFIDENCE = {"rules": 0.9, "preferences": 0.85, "goals": 0.85}


def _turn_block(request: Any) -> Mapping[str, Any]:
    for message in reversed(request.messages):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and content.startswith(_TURN_LABEL):
            return json.loads(content[len(_TURN_LABEL) :])
    return {"new_message": request.question}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _terse_follow_up(sentence: str) -> bool:
    lowered = sentence.lower().strip()
    return len(content_words(lowered)) <= 4 and (bool(_FOLLOW_UP_LEAD.match(lowered)) or bool(_ANAPHORA & set(_words(lowered))))


def offline_turn_analysis(request: Any) -> dict[str, Any]:
    """Offline :class:`SessionTurnAnalysis` filler: cue words, sentence by sentence.

    * a sentence of acknowledgement words only ("thanks", "ok", "got it") → no query, reply ``"Got it."``;
    * "always" / "never" or a leading "please" → a ``rules`` candidate (confidence 0.9);
      "I prefer" / "I like" → ``preferences`` (0.85); "my goal" / "I want to" → ``goals`` (0.85);
    * a statement with "wrong" / "incorrect" / "not right" → previous-answer rating 1 and every served
      item rated ``harmful``; with "great" / "correct" / "perfect" / "exactly" / "right" → rating 5, ``helpful``
      (ratings only when there was a previous turn);
    * the remaining sentences are the query; a terse follow-up (at most 4 content words, led by
      "and" / "what about" / ... or with a pronoun like "she" / "it") gets the previous question's
      topic (its content words) appended: ``"And where did she work? (about: discovered Polonium)"``.
    """
    turn = _turn_block(request)
    message = str(turn.get("new_message") or "")
    previous_question = turn.get("previous_question")
    has_previous = previous_question is not None
    served_ids = [str(item["id"]) for item in turn.get("served_guidance") or [] if isinstance(item, Mapping) and "id" in item]
    ack = low = high = False
    candidates: list[dict[str, Any]] = []
    asked: list[str] = []
    for match in _SENTENCE.finditer(message):
        sentence = match.group().strip()
        lowered = sentence.lower()
        words = _words(lowered)
        if not words:
            continue
        question = sentence.endswith("?")
        if set(words) <= _ACK_WORDS:
            ack = True
        elif not question and _LOW.search(lowered):
            low = True
        elif not question and _RULE.search(lowered):
            candidates.append({"section": "rules", "content": sentence, "confidence": OFFLINE_CONFIDENCE["rules"]})
        elif not question and _PREFERENCE.search(lowered):
            candidates.append({"section": "preferences", "content": sentence, "confidence": OFFLINE_CONFIDENCE["preferences"]})
        elif not question and _GOAL.search(lowered):
            candidates.append({"section": "goals", "content": sentence, "confidence": OFFLINE_CONFIDENCE["goals"]})
        elif not question and _HIGH.search(lowered) and len(words) <= 4:
            high = True
        else:
            asked.append(sentence)
    query = " ".join(asked) or None
    if query and has_previous and _terse_follow_up(query):
        topic = [word for word in re.findall(r"[A-Za-z0-9]+", str(previous_question)) if word.lower() not in STOP_WORDS]
        if topic:
            query = f"{query} (about: {' '.join(dict.fromkeys(topic))})"
    rated = has_previous and (low or high)
    verdict = "harmful" if low else "helpful"
    reply = None
    if query is None:
        if candidates:
            reply = "Got it, I'll keep that in mind."
        elif rated:
            reply = "Thanks for the feedback."
        elif ack:
            reply = "Got it."
    return {
        "response_to_user": reply,
        "query_to_answer": query,
        "served_context_ratings": [{"id": entry_id, "verdict": verdict} for entry_id in served_ids] if rated else [],
        "candidate_context_updates": [{**candidate, "profile": "qa"} for candidate in candidates],
        "previous_answer_rating": (1 if low else 5) if rated else None,
    }
