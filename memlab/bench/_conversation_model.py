"""The conversational-memory benchmark model (re-exported by :mod:`memlab.bench.conversations`).

Frozen dataclasses, checked on construction: a bad value raises
:class:`memlab.ValidationError` naming the field or the id, never a bare ``KeyError``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Literal, cast

from memlab.exceptions import ValidationError
from memlab.text import content_words

if TYPE_CHECKING:
    import pandas

__all__ = [
    "CATEGORIES",
    "DEV_SHARE",
    "FRAME_COLUMNS",
    "SPLITS",
    "TURN_UNITS",
    "Benchmark",
    "Conversation",
    "Question",
    "Role",
    "Session",
    "Split",
    "Turn",
    "TurnUnit",
    "check_turn_unit",
    "parse_iso",
    "split_of",
]

#: the categories every source maps to, in report order (see :mod:`memlab.bench.conversations`)
CATEGORIES = (
    "single_session_fact",
    "multi_session_aggregation",
    "knowledge_update",
    "temporal",
    "preference",
    "abstention",
)

Role = Literal["user", "assistant"]
_ROLES = ("user", "assistant")
#: what one memlab turn of a benchmark's haystack holds: a user/assistant exchange, or one message
TurnUnit = Literal["exchange", "message"]
TURN_UNITS: tuple[TurnUnit, ...] = ("exchange", "message")


def check_turn_unit(value: object) -> TurnUnit:
    """``value`` when it is ``"exchange"`` or ``"message"``; :class:`ValidationError` naming it otherwise."""
    if value not in TURN_UNITS:
        raise ValidationError(f"turns must be 'exchange' (one memlab turn per user/assistant exchange) or 'message' (one per message), got {value!r}")
    return cast(TurnUnit, value)

Split = Literal["dev", "heldout"]
#: the two parts of every benchmark: ``dev`` (tune on it) and ``heldout`` (report it)
SPLITS: tuple[Split, ...] = ("dev", "heldout")
#: the share of a benchmark's conversations in its ``dev`` part (in expectation: see :func:`split_of`)
DEV_SHARE = 0.5
_SPLIT_KEY = b"memlab-split-v1"


def _text(owner: str, name: str, value: object, *, empty: bool = True) -> None:
    if not isinstance(value, str):
        raise ValidationError(f"{owner}: {name} must be a string, got {type(value).__name__}")
    if not empty and not value.strip():
        raise ValidationError(f"{owner}: {name} must not be empty")


def _ids(owner: str, name: str, values: object) -> None:
    if not isinstance(values, list) or not all(isinstance(value, str) and value for value in values):
        raise ValidationError(f"{owner}: {name} must be a list of non-empty strings")
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValidationError(f"{owner}: {name} lists {value!r} twice")
        seen.add(value)


def parse_iso(value: str) -> datetime | None:
    """``value`` as a naive UTC datetime when it is ISO-8601 (a date or a date-time), else None."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


@dataclass(frozen=True)
class Turn:
    """One message: ``turn_id`` is unique in its conversation; ``time`` is ISO-8601 or ``""``.

    ``has_answer`` marks a turn that is gold evidence for some question of the conversation.
    """

    turn_id: str
    session_id: str
    role: Role
    text: str
    time: str = ""
    has_answer: bool = False

    def __post_init__(self) -> None:
        _text("turn", "turn_id", self.turn_id, empty=False)
        owner = f"turn {self.turn_id!r}"
        _text(owner, "session_id", self.session_id, empty=False)
        if self.role not in _ROLES:
            raise ValidationError(f"{owner}: role must be 'user' or 'assistant', got {self.role!r}")
        _text(owner, "text", self.text)
        _text(owner, "time", self.time)
        if self.time and parse_iso(self.time) is None:
            raise ValidationError(f"{owner}: time must be ISO-8601 or empty, got {self.time!r}")
        if not isinstance(self.has_answer, bool):
            raise ValidationError(f"{owner}: has_answer must be a bool")


@dataclass(frozen=True)
class Session:
    """One chat session: its ``date`` (ISO-8601 when the source's date could be read, else the source's text) and turns."""

    session_id: str
    date: str
    turns: list[Turn]

    def __post_init__(self) -> None:
        _text("session", "session_id", self.session_id, empty=False)
        owner = f"session {self.session_id!r}"
        _text(owner, "date", self.date)
        if not isinstance(self.turns, list) or not all(isinstance(turn, Turn) for turn in self.turns):
            raise ValidationError(f"{owner}: turns must be a list of Turn")
        for turn in self.turns:
            if turn.session_id != self.session_id:
                raise ValidationError(f"{owner}: turn {turn.turn_id!r} names session {turn.session_id!r}")


@dataclass(frozen=True)
class Question:
    """A question with its gold answer and gold evidence.

    ``evidence_session_ids`` / ``evidence_turn_ids`` are in chronological order; an
    ``abstention`` question (about something never stated) has no evidence.
    ``paraphrase``: True when the question was worded to share (almost) no content word
    with its evidence, False when it reuses the evidence's words as users do, None when
    not known (the public sets) or there is no evidence (abstention).
    """

    question_id: str
    category: str
    question: str
    answer: str
    evidence_session_ids: list[str]
    evidence_turn_ids: list[str]
    question_date: str = ""
    abstention: bool = False
    paraphrase: bool | None = None

    def __post_init__(self) -> None:
        _text("question", "question_id", self.question_id, empty=False)
        owner = f"question {self.question_id!r}"
        _text(owner, "category", self.category, empty=False)
        _text(owner, "question", self.question, empty=False)
        _text(owner, "answer", self.answer)
        _text(owner, "question_date", self.question_date)
        _ids(owner, "evidence_session_ids", self.evidence_session_ids)
        _ids(owner, "evidence_turn_ids", self.evidence_turn_ids)
        if not isinstance(self.abstention, bool):
            raise ValidationError(f"{owner}: abstention must be a bool")
        if self.abstention and (self.evidence_session_ids or self.evidence_turn_ids):
            raise ValidationError(f"{owner}: an abstention question has no evidence")
        if self.paraphrase is not None and not isinstance(self.paraphrase, bool):
            raise ValidationError(f"{owner}: paraphrase must be a bool or None")


@dataclass(frozen=True)
class Conversation:
    """One user's history (``sessions``, chronological) and the questions asked about it.

    Checked: session ids and turn ids are unique; sessions whose dates are ISO-8601 are
    in order; every evidence id names a session / turn of this conversation, and every
    evidence turn lies in one of the question's evidence sessions.
    """

    conversation_id: str
    sessions: list[Session]
    questions: list[Question]

    def __post_init__(self) -> None:
        _text("conversation", "conversation_id", self.conversation_id, empty=False)
        owner = f"conversation {self.conversation_id!r}"
        if not isinstance(self.sessions, list) or not all(isinstance(s, Session) for s in self.sessions):
            raise ValidationError(f"{owner}: sessions must be a list of Session")
        if not isinstance(self.questions, list) or not all(isinstance(q, Question) for q in self.questions):
            raise ValidationError(f"{owner}: questions must be a list of Question")
        sessions: dict[str, Session] = {}
        turns: dict[str, Turn] = {}
        for session in self.sessions:
            if session.session_id in sessions:
                raise ValidationError(f"{owner}: session id {session.session_id!r} occurs twice")
            sessions[session.session_id] = session
            for turn in session.turns:
                if turn.turn_id in turns:
                    raise ValidationError(f"{owner}: turn id {turn.turn_id!r} occurs twice")
                turns[turn.turn_id] = turn
        self._check_order(owner)
        question_ids: set[str] = set()
        for question in self.questions:
            if question.question_id in question_ids:
                raise ValidationError(f"{owner}: question id {question.question_id!r} occurs twice")
            question_ids.add(question.question_id)
            where = f"{owner}, question {question.question_id!r}"
            for session_id in question.evidence_session_ids:
                if session_id not in sessions:
                    raise ValidationError(f"{where}: evidence session id {session_id!r} is not a session of the conversation")
            for turn_id in question.evidence_turn_ids:
                if turn_id not in turns:
                    raise ValidationError(f"{where}: evidence turn id {turn_id!r} is not a turn of the conversation")
                if turns[turn_id].session_id not in question.evidence_session_ids:
                    raise ValidationError(
                        f"{where}: evidence turn id {turn_id!r} lies in session {turns[turn_id].session_id!r}, "
                        "which is not among its evidence sessions"
                    )
        self.__dict__["_sessions"] = sessions  # what the cached properties below would compute
        self.__dict__["_turns"] = turns

    @cached_property
    def _sessions(self) -> dict[str, Session]:
        return {session.session_id: session for session in self.sessions}

    @cached_property
    def _turns(self) -> dict[str, Turn]:
        return {turn.turn_id: turn for turn in self.turns()}

    def _check_order(self, owner: str) -> None:
        previous: tuple[str, datetime] | None = None
        for session in self.sessions:
            moment = parse_iso(session.date)
            if moment is None:
                continue
            if previous is not None and moment < previous[1]:
                raise ValidationError(
                    f"{owner}: sessions are not chronological ({session.session_id!r} on {session.date!r} "
                    f"follows {previous[0]!r})"
                )
            previous = (session.session_id, moment)

    def session(self, session_id: str) -> Session:
        """The session ``session_id`` (a :class:`ValidationError` naming it when absent)."""
        try:
            return self._sessions[session_id]
        except KeyError:
            raise ValidationError(f"conversation {self.conversation_id!r} has no session {session_id!r}") from None

    def turn(self, turn_id: str) -> Turn:
        """The turn ``turn_id`` (a :class:`ValidationError` naming it when absent)."""
        try:
            return self._turns[turn_id]
        except KeyError:
            raise ValidationError(f"conversation {self.conversation_id!r} has no turn {turn_id!r}") from None

    def turns(self) -> Iterator[Turn]:
        """Every turn, session by session."""
        for session in self.sessions:
            yield from session.turns

    def evidence_turns(self, question: Question) -> list[Turn]:
        """The gold evidence turns of ``question``."""
        return [self.turn(turn_id) for turn_id in question.evidence_turn_ids]

    def lexical_overlap(self, question: Question) -> float | None:
        """The share of the question's content words found in its evidence turns (None: no evidence turn or no content word).

        Words are :func:`memlab.text.content_words` (lower-cased, stop words dropped, a
        plural ``s`` folded): 0.0 means a retriever ranking turns by shared words has
        nothing to go on, 1.0 that every content word of the question is in the evidence.
        """
        words = content_words(question.question)
        turns = self.evidence_turns(question)
        if not words or not turns:
            return None
        found = set().union(*(content_words(turn.text) for turn in turns))
        return len(words & found) / len(words)


def split_of(conversation_id: str, dev_share: float = DEV_SHARE) -> Split:
    """The part a conversation belongs to: ``dev`` when a keyed BLAKE2b hash of its id, as a fraction in [0, 1), is below ``dev_share``.

    Depends on the id alone (not on the order or number of conversations), so a
    conversation keeps its part in a larger benchmark of the same seed, on any machine.
    """
    if isinstance(dev_share, bool) or not isinstance(dev_share, (int, float)) or not 0.0 < dev_share < 1.0:
        raise ValidationError(f"dev_share must be a number in (0, 1), got {dev_share!r}")
    digest = hashlib.blake2b(conversation_id.encode("utf-8"), digest_size=8, key=_SPLIT_KEY).digest()
    return "dev" if int.from_bytes(digest, "big") / 2**64 < dev_share else "heldout"


def _category_order(categories: Sequence[str]) -> list[str]:
    known = [category for category in CATEGORIES if category in categories]
    return known + sorted(set(categories) - set(CATEGORIES))


@dataclass(frozen=True)
class Benchmark:
    """A named set of conversations; ``len()`` is the number of questions (ids unique across it).

    ``turns`` says how an evaluation writes each conversation as memlab turns:
    ``"exchange"`` (the default) pairs a user message with the assistant message right
    after it into one turn, ``"message"`` makes every message a turn of its own
    (:func:`memlab.bench.quality_eval.haystack_turns`). The gold evidence is message ids
    either way; a memlab turn holds the messages it was made of.
    """

    name: str
    conversations: list[Conversation]
    turns: TurnUnit = "exchange"

    def __post_init__(self) -> None:
        _text("benchmark", "name", self.name, empty=False)
        owner = f"benchmark {self.name!r}"
        try:
            check_turn_unit(self.turns)
        except ValidationError as error:
            raise ValidationError(f"{owner}: {error}") from None
        if not isinstance(self.conversations, list) or not all(isinstance(c, Conversation) for c in self.conversations):
            raise ValidationError(f"{owner}: conversations must be a list of Conversation")
        conversation_ids: set[str] = set()
        question_ids: set[str] = set()
        for conversation in self.conversations:
            if conversation.conversation_id in conversation_ids:
                raise ValidationError(f"{owner}: conversation id {conversation.conversation_id!r} occurs twice")
            conversation_ids.add(conversation.conversation_id)
            for question in conversation.questions:
                if question.question_id in question_ids:
                    raise ValidationError(f"{owner}: question id {question.question_id!r} occurs twice")
                question_ids.add(question.question_id)

    def __len__(self) -> int:
        return sum(len(conversation.questions) for conversation in self.conversations)

    def questions(self) -> Iterator[tuple[Conversation, Question]]:
        """``(conversation, question)`` for every question, in order."""
        for conversation in self.conversations:
            for question in conversation.questions:
                yield conversation, question

    def categories(self) -> list[str]:
        """The categories present: those of :data:`CATEGORIES` in its order, then any others sorted."""
        return _category_order([question.category for _, question in self.questions()])

    def split(self, part: Split, dev_share: float = DEV_SHARE) -> "Benchmark":
        """The conversations of one part (:func:`split_of`), as a benchmark named ``{name}/{part}``.

        ``dev`` and ``heldout`` are disjoint and together make the whole benchmark. The
        hash decides, so the parts are near ``dev_share`` / ``1 - dev_share`` of a large
        benchmark, and a part of a benchmark of a few conversations may be empty.
        """
        if part not in SPLITS:
            raise ValidationError(f"part must be one of {', '.join(SPLITS)}, got {part!r}")
        chosen = [conversation for conversation in self.conversations if split_of(conversation.conversation_id, dev_share) == part]
        return Benchmark(f"{self.name}/{part}", chosen)

    def overlaps(self) -> list[float]:
        """:meth:`Conversation.lexical_overlap` of every question that has one, in order."""
        found = [conversation.lexical_overlap(question) for conversation, question in self.questions()]
        return [value for value in found if value is not None]

    def summary(self) -> dict[str, int]:
        """Questions per category (in :meth:`categories` order)."""
        counts: dict[str, int] = {}
        for _, question in self.questions():
            counts[question.category] = counts.get(question.category, 0) + 1
        return {category: counts[category] for category in _category_order(list(counts))}

    def to_frame(self) -> pandas.DataFrame:
        """One row per question (see ``FRAME_COLUMNS`` in :mod:`memlab.bench.conversations`)."""
        import pandas as pd

        rows = []
        for conversation, question in self.questions():
            rows.append(
                {
                    "conversation_id": conversation.conversation_id,
                    "question_id": question.question_id,
                    "category": question.category,
                    "question": question.question,
                    "answer": question.answer,
                    "question_date": question.question_date,
                    "abstention": question.abstention,
                    "evidence_session_ids": list(question.evidence_session_ids),
                    "evidence_turn_ids": list(question.evidence_turn_ids),
                    "n_evidence_sessions": len(question.evidence_session_ids),
                    "n_evidence_turns": len(question.evidence_turn_ids),
                    "n_sessions": len(conversation.sessions),
                    "n_turns": sum(len(session.turns) for session in conversation.sessions),
                    "paraphrase": question.paraphrase,
                    "overlap": conversation.lexical_overlap(question),
                }
            )
        frame = pd.DataFrame(rows, columns=list(FRAME_COLUMNS))
        return frame.astype(FRAME_COLUMNS)


#: the columns of :meth:`Benchmark.to_frame` and their dtypes
FRAME_COLUMNS: dict[str, str] = {
    "conversation_id": "object",
    "question_id": "object",
    "category": "object",
    "question": "object",
    "answer": "object",
    "question_date": "object",
    "abstention": "bool",
    "evidence_session_ids": "object",
    "evidence_turn_ids": "object",
    "n_evidence_sessions": "int64",
    "n_evidence_turns": "int64",
    "n_sessions": "int64",
    "n_turns": "int64",
    "paraphrase": "boolean",
    "overlap": "Float64",
}
