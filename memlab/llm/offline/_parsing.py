"""Reading a chat in the offline prompt convention, and the extractive answer (see :mod:`memlab.llm.offline`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memlab.text import I_DONT_KNOW, content_words, message_text

__all__ = ["best_sentence", "extractive_answer", "parse_prompt", "split_sentences"]

_MARKER = re.compile(r"^\s*(context|question)\s*:[ \t]?(.*)$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BULLET = re.compile(r"^(?:[-*\u2022]+|\d+[.)])\s+")


def _blocks(text: str) -> tuple[list[str], list[str], list[str]]:
    """(context lines, question lines, other lines) of one message text."""
    context: list[str] = []
    question: list[str] = []
    other: list[str] = []
    target = other
    for line in text.splitlines():
        match = _MARKER.match(line)
        if match:
            target = context if match.group(1).lower() == "context" else question
            line = match.group(2)
        target.append(line)
    return context, question, other


def parse_prompt(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """``(question, context)`` of a chat following the offline prompt convention."""
    contexts: list[str] = []
    question: str | None = None
    last_user_other = ""
    for message in messages:
        role = message.get("role")
        if role not in ("system", "user", "developer"):
            continue
        context, asked, other = _blocks(message_text(message))
        if any(line.strip() for line in context):
            contexts.append("\n".join(context).strip())
        if role == "user":
            if any(line.strip() for line in asked):
                question = "\n".join(asked).strip()
            last_user_other = "\n".join(other).strip()
    return (question if question is not None else last_user_other), "\n".join(contexts)


def split_sentences(context: str) -> list[str]:
    """The sentences of a context block: split at line breaks and after ``.``, ``!`` or ``?``;
    list bullets stripped; lines without a letter or digit (``---`` separators) dropped."""
    sentences: list[str] = []
    for line in context.splitlines():
        line = _BULLET.sub("", line.strip())
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if piece and any(ch.isalnum() for ch in piece):
                sentences.append(piece)
    return sentences


def best_sentence(question: str, sentences: Sequence[str]) -> str | None:
    """The sentence sharing the most content words with ``question`` (ties: denser, then earlier), or None."""
    asked = content_words(question)
    if not asked:
        return None
    best: tuple[int, float, int] | None = None
    chosen: str | None = None
    for index, sentence in enumerate(sentences):
        words = content_words(sentence)
        shared = len(asked & words)
        if not shared:
            continue
        rank = (shared, shared / len(words), -index)
        if best is None or rank > best:
            best, chosen = rank, sentence
    return chosen


def extractive_answer(messages: Sequence[Mapping[str, Any]]) -> str:
    """The offline plain-completion answer for ``messages``: the best context sentence, else ``"I don't know."``."""
    question, context = parse_prompt(messages)
    return best_sentence(question, split_sentences(context)) or I_DONT_KNOW
