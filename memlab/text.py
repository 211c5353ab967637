"""Text helpers shared across memlab: one definition each, named for its purpose.

Tokenizers (three purposes, three rules):

* :func:`session_tokens` - the session keyword tokenizer (cognee's rule, exported as
  :func:`memlab.session.tokenize`): the *set* of lower-cased ``\\w+`` runs of length >= 2;
* :func:`lexical_tokens` - the BM25 tokens of ``CHUNKS_LEXICAL``: lower-cased ``\\w+``
  runs in order, repeats kept;
* :func:`content_words` with :data:`STOP_WORDS` - the content-word set the offline LLM,
  the turn analyser's cue rules and the follow-up filler use (alphanumeric words, stop
  words dropped, a plural ``s`` folded).

Sentences (two purposes):

* :func:`sentence_spans` - the character spans chunking packs: a sentence ends at every
  line break and after ``.``, ``!`` or ``?`` (runs such as ``?!`` or ``...`` and closing
  quotes or brackets included) when whitespace or the end of the text follows. A period
  does not end a sentence after a known abbreviation (``Dr.``, ``e.g.``, ``vs.``, ... see
  :data:`ABBREVIATIONS`), a single capital initial (``J. K. Rowling``) or a dotted acronym
  (``U.S.``); decimals (``3.5``) never split because no whitespace follows their period.
  A span never starts or ends with whitespace;
* :func:`context_sentences` - the sentences of a prompt's context block (what the offline
  answerer picks from): split at line breaks and after ``.``/``!``/``?``, list bullets
  stripped, lines without a letter or digit dropped.

Also :func:`message_text` (the text of one chat message in any of litellm's shapes) and
:data:`I_DONT_KNOW` (the answer given when the context holds none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "ABBREVIATIONS",
    "I_DONT_KNOW",
    "STOP_WORDS",
    "content_words",
    "context_sentences",
    "lexical_tokens",
    "message_text",
    "sentence_spans",
    "session_tokens",
]

#: the answer an extractive model gives when the context holds none
I_DONT_KNOW = "I don't know."

_WORD = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(r"\w+")
_SESSION_TOKEN = re.compile(r"\b\w+\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BULLET = re.compile(r"^(?:[-*\u2022]+|\d+[.)])\s+")
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


def session_tokens(text: str) -> set[str]:
    """The session keyword tokenizer: lower-cased ``\\w+`` runs of length >= 2.

    Unicode word characters and ``_`` belong to tokens; ``-`` and ``'`` split them.
    """
    return {token for token in _SESSION_TOKEN.findall(text.lower()) if len(token) >= 2}


def lexical_tokens(text: str) -> list[str]:
    """The lowercase word tokens of ``text``, in order (repeats kept)."""
    return _TOKEN.findall(text.lower())


def context_sentences(context: str) -> list[str]:
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


#: lowercase words (without their final period) after which a period does not end a sentence
ABBREVIATIONS = frozenset(
    "mr mrs ms mx dr prof sr jr st mt rev hon gen col capt lt sgt gov sen rep pres "
    "vs cf e.g i.e approx ca dept est fig no nos vol pp inc ltd corp jan feb mar apr jun jul aug sep sept oct nov dec".split()
)

_BOUNDARY = re.compile(r"\n|[.!?]+[\"')\]\u201d\u2019]*(?=\s|$)")
_INITIAL_OR_ACRONYM = re.compile(r"[\"'(\[]*(?:[A-Z]|(?:[A-Za-z]\.)+[A-Za-z])")
_LOOKBEHIND = 24  # characters searched for the word before a period (abbreviations are short)


def _ends_sentence(text: str, match: re.Match[str]) -> bool:
    """False for a lone period after an abbreviation, an initial or a dotted acronym."""
    if match.group() != ".":
        return True
    period = match.start()
    words = text[max(0, period - _LOOKBEHIND) : period].split()
    if not words or text[period - 1].isspace():
        return True
    stem = words[-1]
    return stem.lower().lstrip("\"'([") not in ABBREVIATIONS and _INITIAL_OR_ACRONYM.fullmatch(stem) is None


def _stripped_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """``(start, end)`` narrowed to exclude surrounding whitespace; None when only whitespace is left."""
    piece = text[start:end]
    kept = piece.strip()
    if not kept:
        return None
    first = start + len(piece) - len(piece.lstrip())
    return first, first + len(kept)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of the sentences of ``text`` (see the module docstring)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if not _ends_sentence(text, match):
            continue
        span = _stripped_span(text, start, match.end())
        if span is not None:
            spans.append(span)
        start = match.end()
    span = _stripped_span(text, start, len(text))
    if span is not None:
        spans.append(span)
    return spans
