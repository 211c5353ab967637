"""Loaders for LongMemEval and LoCoMo files the user supplies (re-exported by :mod:`memlab.bench.conversations`).

Nothing is downloaded or bundled. Every problem with the file (missing, not JSON, a
field of the wrong shape) raises :class:`memlab.ValidationError` naming the path and
the item index / field, never a bare ``KeyError``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memlab.bench._conversation_model import (
    Benchmark,
    Conversation,
    Question,
    Role,
    Session,
    Turn,
    TurnUnit,
    check_turn_unit,
    parse_iso,
)
from memlab.exceptions import ValidationError

__all__ = ["LOCOMO_CATEGORIES", "LONGMEMEVAL_CATEGORIES", "load_locomo", "load_longmemeval"]

#: LongMemEval ``question_type`` -> category (a ``question_id`` ending in ``_abs`` is ``abstention`` whatever its type)
LONGMEMEVAL_CATEGORIES: dict[str, str] = {
    "single-session-user": "single_session_fact",
    "single-session-assistant": "single_session_fact",
    "single-session-preference": "preference",
    "multi-session": "multi_session_aggregation",
    "knowledge-update": "knowledge_update",
    "temporal-reasoning": "temporal",
}

#: LoCoMo ``category`` number -> category (the numbers of ``locomo10.json``, not the paper's table order)
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi_session_aggregation",  # multi-hop
    2: "temporal",
    3: "open_domain",  # open-domain / commonsense inference about a speaker
    4: "single_session_fact",  # single-hop
    5: "abstention",  # adversarial
}

_LONGMEMEVAL_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")
_LOCOMO_DATE = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$", re.IGNORECASE)
_MONTHS = {
    name: number
    for number, names in enumerate(
        (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
         ("december", "dec")),
        start=1,
    )
    for name in names
}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D(\d+):(\d+)")


class _Where:
    """Builds error messages that name the file and the place in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, place: str, message: str) -> ValidationError:
        return ValidationError(f"{self.path}: {place}: {message}")

    def field(self, item: Mapping[str, Any], key: str, kind: type | tuple[type, ...], place: str, *, optional: bool = False) -> Any:
        value = item.get(key)
        if value is None and optional:
            return None
        if key not in item:
            raise self.fail(place, f"missing field {key!r}")
        if not isinstance(value, kind) or isinstance(value, bool) and bool not in _kinds(kind):
            names = " or ".join(k.__name__ for k in _kinds(kind))
            raise self.fail(place, f"field {key!r} must be {names}, got {type(value).__name__}")
        return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _read(path: str | os.PathLike[str]) -> tuple[Path, list[Any]]:
    file = Path(path)
    if not file.is_file():
        raise ValidationError(f"{file}: no such file")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValidationError(f"{file}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from error
    except (OSError, UnicodeDecodeError) as error:
        raise ValidationError(f"{file}: cannot be read ({error})") from error
    if not isinstance(data, list):
        raise ValidationError(f"{file}: expected a JSON list of items at the top level, got {type(data).__name__}")
    return file, data


def _answer_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _longmemeval_date(text: str) -> str:
    """``2023/05/20 (Sat) 02:21`` as ``2023-05-20T02:21:00``; ISO text as it is; anything else unchanged."""
    match = _LONGMEMEVAL_DATE.match(text)
    if match:
        year, month, day, hour, minute = match.groups()
        try:
            return datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0)).isoformat()
        except ValueError:
            return text
    return text


def _locomo_date(text: str) -> str:
    """``1:56 pm on 8 May, 2023`` as ``2023-05-08T13:56:00``; anything else unchanged."""
    match = _LOCOMO_DATE.match(text)
    if not match:
        return text
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        return text
    clock = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    try:
        return datetime(int(year), month, int(day), clock, int(minute)).isoformat()
    except ValueError:
        return text


def _chronological(sessions: list[Session]) -> list[Session]:
    """Sorted by date (stable) when every date is ISO-8601; otherwise in the file's order."""
    moments = [moment for moment in (parse_iso(session.date) for session in sessions) if moment is not None]
    if len(moments) != len(sessions):
        return sessions
    order = sorted(range(len(sessions)), key=moments.__getitem__)
    return [sessions[index] for index in order]


# -- LongMemEval ----------------------------------------------------------------------------------


def load_longmemeval(path: str | os.PathLike[str], *, turns: TurnUnit = "exchange") -> Benchmark:
    """A LongMemEval file (``longmemeval_s.json``, ``_m``, ``_oracle``) as a :class:`Benchmark` (see the module map).

    ``turns`` (checked before the file is read): the benchmark's :attr:`Benchmark.turns`.
    """
    unit = check_turn_unit(turns)
    file, items = _read(path)
    where = _Where(file)
    conversations = [_longmemeval_item(where, index, item) for index, item in enumerate(items)]
    try:
        return Benchmark(f"longmemeval:{file.name}", conversations, unit)
    except ValidationError as error:
        raise ValidationError(f"{file}: {error}") from error


def _longmemeval_item(where: _Where, index: int, item: Any) -> Conversation:
    place = f"item {index}"
    if not isinstance(item, dict):
        raise where.fail(place, f"expected an object, got {type(item).__name__}")
    question_id = where.field(item, "question_id", str, place)
    place = f"item {index} (question_id {question_id!r})"
    question_type = where.field(item, "question_type", str, place)
    question_text = where.field(item, "question", str, place)
    if "answer" not in item:
        raise where.fail(place, "missing field 'answer'")
    question_date = where.field(item, "question_date", str, place, optional=True) or ""
    session_ids = where.field(item, "haystack_session_ids", list, place)
    dates = where.field(item, "haystack_dates", list, place)
    raw_sessions = where.field(item, "haystack_sessions", list, place)
    answer_session_ids = where.field(item, "answer_session_ids", list, place)
    if not len(session_ids) == len(dates) == len(raw_sessions):
        raise where.fail(
            place,
            f"haystack_session_ids, haystack_dates and haystack_sessions differ in length "
            f"({len(session_ids)}, {len(dates)}, {len(raw_sessions)})",
        )
    for name, values in (("haystack_session_ids", session_ids), ("haystack_dates", dates), ("answer_session_ids", answer_session_ids)):
        for position, value in enumerate(values):
            if not isinstance(value, str) or (name != "haystack_dates" and not value):
                raise where.fail(place, f"{name}[{position}] must be a non-empty string, got {value!r}")
    abstention = question_id.endswith("_abs")
    if abstention:
        category = "abstention"
    elif question_type in LONGMEMEVAL_CATEGORIES:
        category = LONGMEMEVAL_CATEGORIES[question_type]
    else:
        raise where.fail(place, f"unknown question_type {question_type!r} (known: {', '.join(LONGMEMEVAL_CATEGORIES)})")

    answer_sessions = set() if abstention else set(answer_session_ids)
    sessions: list[Session] = []
    evidence_turns: list[str] = []
    try:
        for position, (session_id, date, raw_turns) in enumerate(zip(session_ids, dates, raw_sessions)):
            session_place = f"{place}, haystack_sessions[{position}]"
            if not isinstance(raw_turns, list):
                raise where.fail(session_place, f"expected a list of turns, got {type(raw_turns).__name__}")
            iso = _longmemeval_date(date)
            time = iso if parse_iso(iso) is not None else ""
            turns = []
            for turn_index, raw in enumerate(raw_turns):
                turn = _longmemeval_turn(where, f"{session_place}[{turn_index}]", raw, session_id, turn_index, time)
                if turn.has_answer and session_id not in answer_sessions:  # has_answer means: evidence of the question
                    turn = dataclasses.replace(turn, has_answer=False)
                turns.append(turn)
            sessions.append(Session(session_id, iso, turns))
            if session_id in answer_sessions:
                evidence_turns += [turn.turn_id for turn in turns if turn.has_answer]
        sessions = _chronological(sessions)
        order = {session.session_id: rank for rank, session in enumerate(sessions)}
        evidence_sessions = [] if abstention else sorted(dict.fromkeys(answer_session_ids), key=lambda s: order.get(s, len(order)))
        turn_order = {turn.turn_id: rank for rank, turn in enumerate(t for s in sessions for t in s.turns)}
        question = Question(
            question_id=question_id,
            category=category,
            question=question_text,
            answer=_answer_text(item["answer"]),
            evidence_session_ids=evidence_sessions,
            evidence_turn_ids=[] if abstention else sorted(evidence_turns, key=turn_order.__getitem__),
            question_date=_longmemeval_date(question_date),
            abstention=abstention,
        )
        return Conversation(question_id, sessions, [question])
    except ValidationError as error:
        if str(error).startswith(str(where.path)):
            raise
        raise where.fail(place, str(error)) from error


def _longmemeval_turn(where: _Where, place: str, raw: Any, session_id: str, index: int, time: str) -> Turn:
    if not isinstance(raw, dict):
        raise where.fail(place, f"expected a turn object, got {type(raw).__name__}")
    role = where.field(raw, "role", str, place)
    if role not in ("user", "assistant"):
        raise where.fail(place, f"field 'role' must be 'user' or 'assistant', got {role!r}")
    content = where.field(raw, "content", str, place)
    has_answer = where.field(raw, "has_answer", bool, place, optional=True) or False
    typed: Role = "user" if role == "user" else "assistant"
    return Turn(f"{session_id}:{index}", session_id, typed, content, time, has_answer)


# -- LoCoMo ---------------------------------------------------------------------------------------


def load_locomo(path: str | os.PathLike[str], *, strict: bool = True, turns: TurnUnit = "exchange") -> Benchmark:
    """A LoCoMo file (``locomo10.json``) as a :class:`Benchmark` (see the module map).

    With ``strict`` (the default) an evidence dialogue id that names no turn of its
    conversation raises :class:`ValidationError`; with ``strict=False`` such ids are
    dropped and one ``UserWarning`` counts them. ``turns`` (checked before the file is
    read): the benchmark's :attr:`Benchmark.turns`.
    """
    unit = check_turn_unit(turns)
    file, samples = _read(path)
    where = _Where(file)
    dropped: list[str] = []
    conversations = [_locomo_sample(where, index, sample, strict, dropped) for index, sample in enumerate(samples)]
    if dropped:
        warnings.warn(
            f"{file}: dropped {len(dropped)} evidence id(s) naming no turn: {', '.join(dropped[:5])}"
            + (" ..." if len(dropped) > 5 else ""),
            UserWarning,
            stacklevel=3,
        )
    try:
        return Benchmark(f"locomo:{file.name}", conversations, unit)
    except ValidationError as error:
        raise ValidationError(f"{file}: {error}") from error


def _locomo_sample(where: _Where, index: int, sample: Any, strict: bool, dropped: list[str]) -> Conversation:
    place = f"item {index}"
    if not isinstance(sample, dict):
        raise where.fail(place, f"expected an object, got {type(sample).__name__}")
    sample_id = where.field(sample, "sample_id", (str, int), place)
    sample_id = str(sample_id)
    place = f"item {index} (sample_id {sample_id!r})"
    conversation = where.field(sample, "conversation", dict, place)
    qa = where.field(sample, "qa", list, place)
    speaker_a = where.field(conversation, "speaker_a", str, f"{place}, conversation")
    where.field(conversation, "speaker_b", str, f"{place}, conversation")

    numbered = sorted((int(m.group(1)), key) for key in conversation if (m := _SESSION_KEY.match(key)))
    raw_sessions: list[tuple[str, str, list[tuple[str, str, str]]]] = []  # (session id, date, [(dia id, speaker, text)])
    for _, key in numbered:
        session_place = f"{place}, conversation.{key}"
        raw_turns = conversation[key]
        if not isinstance(raw_turns, list):
            raise where.fail(session_place, f"expected a list of turns, got {type(raw_turns).__name__}")
        date = where.field(conversation, f"{key}_date_time", str, f"{place}, conversation", optional=True) or ""
        turns = []
        for turn_index, raw in enumerate(raw_turns):
            turn_place = f"{session_place}[{turn_index}]"
            if not isinstance(raw, dict):
                raise where.fail(turn_place, f"expected a turn object, got {type(raw).__name__}")
            speaker = where.field(raw, "speaker", str, turn_place)
            dia_id = where.field(raw, "dia_id", str, turn_place)
            text = where.field(raw, "text", str, turn_place)
            caption = raw.get("blip_caption")
            if isinstance(caption, str) and caption:
                text = f"{text} [shares {caption}]"
            turns.append((dia_id, speaker, f"{speaker}: {text}"))
        if turns:
            raw_sessions.append((key, _locomo_date(date), turns))

    # dia ids by (session number, turn number), so "D3:07" and "D3:7" name the same turn
    by_number: dict[tuple[int, int], str] = {}
    session_of: dict[str, str] = {}
    for session_id, _, turns in raw_sessions:
        for dia_id, _, _ in turns:
            session_of[dia_id] = session_id
            match = _DIA_ID.fullmatch(dia_id.strip())
            if match:
                by_number.setdefault((int(match.group(1)), int(match.group(2))), dia_id)

    questions: list[Question] = []
    evidence_ids: set[str] = set()
    for position, raw in enumerate(qa):
        question = _locomo_question(where, f"{place}, qa[{position}]", raw, f"{sample_id}:q{position}", by_number, session_of, strict, dropped)
        questions.append(question)
        evidence_ids.update(question.evidence_turn_ids)

    try:
        sessions = []
        for session_id, date, turns in raw_sessions:
            time = date if parse_iso(date) is not None else ""
            sessions.append(
                Session(
                    session_id,
                    date,
                    [Turn(dia_id, session_id, _role(speaker, speaker_a), text, time, dia_id in evidence_ids) for dia_id, speaker, text in turns],
                )
            )
        return Conversation(sample_id, _chronological(sessions), questions)
    except ValidationError as error:
        raise where.fail(place, str(error)) from error


def _role(speaker: str, speaker_a: str) -> Role:
    return "user" if speaker == speaker_a else "assistant"


def _locomo_question(
    where: _Where,
    place: str,
    raw: Any,
    question_id: str,
    by_number: dict[tuple[int, int], str],
    session_of: dict[str, str],
    strict: bool,
    dropped: list[str],
) -> Question:
    if not isinstance(raw, dict):
        raise where.fail(place, f"expected a question object, got {type(raw).__name__}")
    text = where.field(raw, "question", str, place)
    code = where.field(raw, "category", int, place)
    if code not in LOCOMO_CATEGORIES:
        raise where.fail(place, f"unknown category {code!r} (known: {', '.join(map(str, LOCOMO_CATEGORIES))})")
    category = LOCOMO_CATEGORIES[code]
    abstention = category == "abstention"
    raw_evidence = where.field(raw, "evidence", list, place, optional=True) or []
    if "answer" not in raw and not abstention:
        raise where.fail(place, "missing field 'answer'")
    answer = _answer_text(raw["answer"]) if "answer" in raw else ""

    found: dict[tuple[int, int], str] = {}
    for position, entry in enumerate(raw_evidence):
        if not isinstance(entry, str):
            raise where.fail(place, f"evidence[{position}] must be a string, got {type(entry).__name__}")
        if abstention:
            continue  # an abstention question carries no evidence
        # entries such as "D8:6; D9:17" or "(D1:3)" hold several or decorated ids
        for match in _DIA_ID.finditer(entry):
            number = (int(match.group(1)), int(match.group(2)))
            dia_id = by_number.get(number)
            if dia_id is not None:
                found[number] = dia_id
            elif strict:
                raise where.fail(
                    place, f"evidence id {match.group(0)!r} names no turn of the conversation (pass strict=False to drop it)"
                )
            else:
                dropped.append(f"{question_id} {match.group(0)}")
    ordered = [found[number] for number in sorted(found)]
    session_ids = list(dict.fromkeys(session_of[dia_id] for dia_id in ordered))
    try:
        return Question(
            question_id=question_id,
            category=category,
            question=text,
            answer=answer,
            evidence_session_ids=session_ids,
            evidence_turn_ids=ordered,
            question_date="",
            abstention=abstention,
        )
    except ValidationError as error:
        raise where.fail(place, str(error)) from error
