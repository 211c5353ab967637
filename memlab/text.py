"""Text helpers shared across memlab: one definition each.

* :data:`STOP_WORDS` and :func:`content_words`: the content-word tokenizer the offline
  LLM, the turn analyser's cue rules and the follow-up filler use (lowercased
  alphanumeric words, stop words dropped, a plural ``s`` folded);
* :func:`message_text`: the text of one chat message in any of litellm's shapes;
* :data:`I_DONT_KNOW`: the answer given when the context holds none.

The session keyword tokenizer (:func:`memlab.session.tokenize`, cognee's rule) and
the lexical retriever's BM25 tokens are different purposes with different rules;
they stay with their indexes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["I_DONT_KNOW", "STOP_WORDS", "content_words", "message_text"]

#: the answer an extractive model gives when the context holds none
I_DONT_KNOW = "I don't know."

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS_TEXT = """
    a about after again all also am an and any are as at be been before being both but by can could
    did didn do does doesn don done down each few for from had has have he her here hers him his how i
    if in into is it its just know me more most much my no nor not of off on once only or other our
    ours out over own please s same shall she should so some such t tell than that the their theirs
    them then there these they this those through to too under until up very was we were what when
    where which while who whom whose why will with would you your yours
"""
#: English function words that carry no topic
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def _fold(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Lowercased alphanumeric words of ``text`` without stop words, a plural ``s`` folded."""
    return {_fold(word) for word in _WORD.findall(text.lower()) if word not in STOP_WORDS}


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message (``content`` a string, or a list of ``{"type": "text"}`` parts)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)
