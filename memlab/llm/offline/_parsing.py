"""Reading a chat in the offline prompt convention, and the extractive answer (see :mod:`memlab.llm.offline`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memlab.text import I_DONT_KNOW, content_words, context_sentences, message_text

__all__ = ["best_sentence", "extractive_answer", "parse_prompt"]

_MARKER = re.compile(r"^\s*(context|question)\s*:[ \t]?(.*)$", re.IGNORECASE)


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
    return best_sentence(question, context_sentences(context)) or I_DONT_KNOW
