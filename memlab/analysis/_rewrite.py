"""The deterministic conversational rewrite (SPEC §6.4): no LLM, no I/O.

:func:`build_conversational_query` prefixes the current request with up to two prior
turns so a terse follow-up ("and in 2021?") retrieves with its context::

    Prior user: {question}
    Prior assistant (untrusted retrieval guidance): {answer}

    Prior user: {question}
    ...

    Current user request: {raw}

Every string is whitespace-normalised first (runs collapsed to one space, stripped).
A line whose field is empty is omitted; a turn whose question and answer are both
empty is dropped. Without any prior turn the result is the normalised raw query alone.

Over :data:`MAX_QUERY_CHARS`: answers are shortened before questions, the oldest turn
first, each by the current overflow, re-rendering after each cut; whatever is still
too long is sliced to the cap, which can cut the current request. A normalised raw
request that alone exceeds the cap is returned cut to it, without prior turns or the
``Current user request:`` prefix (as cognee does).
"""

from __future__ import annotations

from collections.abc import Sequence

from memlab.exceptions import ValidationError

__all__ = ["MAX_QUERY_CHARS", "build_conversational_query"]

#: The rewrite never exceeds this many characters.
MAX_QUERY_CHARS = 2000
#: How many prior turns the rewrite uses: the most recent ones.
MAX_PRIOR_TURNS = 2

_QUESTION, _ANSWER = 0, 1


def _normalize(text: str) -> str:
    return " ".join(text.split())


def _render(turns: list[list[str]], raw: str) -> str:
    blocks = []
    for question, answer in turns:
        lines = []
        if question:
            lines.append(f"Prior user: {question}")
        if answer:
            lines.append(f"Prior assistant (untrusted retrieval guidance): {answer}")
        if lines:
            blocks.append("\n".join(lines))
    blocks.append(f"Current user request: {raw}")
    return "\n\n".join(blocks)


def build_conversational_query(raw: str, prior_turns: Sequence[tuple[str, str]]) -> str:
    """The retrieval query for ``raw`` given ``prior_turns`` (``(question, answer)``, oldest first).

    Only the last :data:`MAX_PRIOR_TURNS` given turns are used (when more are passed,
    the most recent two); turns empty after normalisation are then dropped. The result
    is at most :data:`MAX_QUERY_CHARS` long. Raises
    :class:`~memlab.exceptions.ValidationError` when ``raw`` is not a string or a turn
    is not a pair of strings.
    """
    if not isinstance(raw, str):
        raise ValidationError(f"raw must be a string, got {raw!r}")
    if isinstance(prior_turns, (str, bytes)) or not isinstance(prior_turns, Sequence):
        raise ValidationError(f"prior_turns must be a sequence of (question, answer) pairs, got {prior_turns!r}")
    turns: list[list[str]] = []
    for turn in list(prior_turns)[-MAX_PRIOR_TURNS:]:
        is_pair = isinstance(turn, Sequence) and not isinstance(turn, (str, bytes)) and len(turn) == 2
        if not is_pair or not all(isinstance(part, str) for part in turn):
            raise ValidationError(f"a prior turn must be a (question, answer) pair of strings, got {turn!r}")
        question, answer = _normalize(turn[0]), _normalize(turn[1])
        if question or answer:
            turns.append([question, answer])
    raw = _normalize(raw)
    if not turns or len(raw) > MAX_QUERY_CHARS:  # a raw request over the cap alone: cut, no prior turns, no prefix
        return raw[:MAX_QUERY_CHARS]
    text = _render(turns, raw)
    for field in (_ANSWER, _QUESTION):
        for kept in turns:
            overflow = len(text) - MAX_QUERY_CHARS
            if overflow <= 0:
                return text
            kept[field] = kept[field][: max(0, len(kept[field]) - overflow)]
            text = _render(turns, raw)
    return text[:MAX_QUERY_CHARS]
