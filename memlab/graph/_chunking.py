"""Sentence-aware chunking with character offsets.

Sizes are in tokens as :func:`memlab.llm.estimate_tokens` counts them (SPEC §8).

Sentences come from :func:`memlab.text.sentence_spans` (the rules are there).

Chunks (:func:`chunk_text`) pack whole sentences while the chunk's text fits in
``chunk_size`` tokens. A sentence above ``chunk_size`` is cut into pieces at
word boundaries (a single word above ``chunk_size`` becomes an oversized piece
of its own). Each chunk after the first starts with the longest run of trailing
pieces of the previous chunk that totals at most ``overlap`` tokens, is a proper
suffix of it, and leaves room for the next new piece. ``Chunk.text`` is exactly
``original[start:end]``: it starts and ends on non-whitespace, so whitespace
between chunks belongs to none of them, and every non-whitespace character
belongs to at least one chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlab.exceptions import ValidationError
from memlab.llm import estimate_tokens
from memlab.text import ABBREVIATIONS, sentence_spans

__all__ = ["ABBREVIATIONS", "MIN_CHUNK_SIZE", "Chunk", "chunk_text", "sentence_spans"]

MIN_CHUNK_SIZE = 16

_NON_SPACE = re.compile(r"\S+")


@dataclass(frozen=True)
class Chunk:
    """One chunk: ``text == original[start:end]``, ``tokens == estimate_tokens(text)``, ``index`` from 0."""

    index: int
    text: str
    start: int
    end: int
    tokens: int


def _pieces(text: str, chunk_size: int) -> list[tuple[int, int]]:
    """Sentence spans, with every sentence above ``chunk_size`` tokens cut at word boundaries."""
    pieces: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        if estimate_tokens(text[start:end]) <= chunk_size:
            pieces.append((start, end))
            continue
        piece_start = piece_end = -1
        for word in _NON_SPACE.finditer(text, start, end):
            if piece_start >= 0 and estimate_tokens(text[piece_start : word.end()]) <= chunk_size:
                piece_end = word.end()
                continue
            if piece_start >= 0:
                pieces.append((piece_start, piece_end))
            piece_start, piece_end = word.start(), word.end()
        pieces.append((piece_start, piece_end))
    return pieces


def _check_sizes(chunk_size: object, overlap: object) -> None:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < MIN_CHUNK_SIZE:
        raise ValidationError(f"chunk_size must be an int >= {MIN_CHUNK_SIZE}, got {chunk_size!r}")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < chunk_size:
        raise ValidationError(f"overlap must be an int with 0 <= overlap < chunk_size ({chunk_size}), got {overlap!r}")


def chunk_text(text: str, *, chunk_size: int = 512, overlap: int = 64) -> list[Chunk]:
    """The chunks of ``text`` (see the module docstring); ``[]`` for whitespace-only text.

    Deterministic. Raises :class:`~memlab.exceptions.ValidationError` when
    ``text`` is not a str, ``chunk_size < 16`` or not ``0 <= overlap < chunk_size``.
    """
    if not isinstance(text, str):
        raise ValidationError(f"chunk_text expects a str, got {type(text).__name__}")
    _check_sizes(chunk_size, overlap)
    pieces = _pieces(text, chunk_size)
    groups: list[tuple[int, int]] = []  # [first, last) piece indexes of each chunk
    first = 0
    for index in range(1, len(pieces) + 1):
        if index < len(pieces) and estimate_tokens(text[pieces[first][0] : pieces[index][1]]) <= chunk_size:
            continue
        groups.append((first, index))
        if index == len(pieces):
            break
        first = index
        while (
            first - 1 > groups[-1][0]
            and estimate_tokens(text[pieces[first - 1][0] : pieces[index - 1][1]]) <= overlap
            and estimate_tokens(text[pieces[first - 1][0] : pieces[index][1]]) <= chunk_size
        ):
            first -= 1
    chunks = []
    for number, (low, high) in enumerate(groups):
        start, end = pieces[low][0], pieces[high - 1][1]
        body = text[start:end]
        chunks.append(Chunk(index=number, text=body, start=start, end=end, tokens=estimate_tokens(body)))
    return chunks
