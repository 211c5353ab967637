"""``HashingEmbedder``: a fast, deterministic, dependency-free (numpy) embedder for tests.

Feature hashing of lowercased word tokens and adjacent word pairs: each feature
adds ``±1`` at a position chosen by a keyed BLAKE2b hash (stable across
processes and Python versions, unlike ``hash()``). Texts that share words get
positive cosine; it knows nothing about synonyms. Use it where a test needs
vectors, not meaning.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import re
from typing import Any

from memlab.embeddings._base import DEFAULT_BATCH_SIZE, Embedder, _check_batch_size
from memlab.exceptions import ValidationError

__all__ = ["HashingEmbedder"]

_TOKEN = re.compile(r"\w+", re.UNICODE)
#: feature of a text without tokens ("", "  ", "!!!"), so it still gets a unit vector
_EMPTY_FEATURE = "\x00empty"
#: batches up to this size are hashed on the event loop (a few ms); larger ones in a worker thread
_INLINE_MAX = 64
#: weight of a word-pair feature relative to a word
_BIGRAM_WEIGHT = 0.5


@functools.lru_cache(maxsize=65536)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=b"memlab-hash-v1").digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbedder(Embedder):
    """Deterministic token-hash embedder: ``HashingEmbedder(dim=256)``.

    No model, nothing to load, ~15,000 short texts/s on one core (pure Python
    hashing; batches over 64 texts run in a worker thread so the event loop
    stays free). Identical token sequences give identical vectors (case and
    punctuation are ignored); ``name`` is ``hashing-<dim>``.
    """

    def __init__(self, dim: int = 256, *, bigrams: bool = True, batch_size: int = DEFAULT_BATCH_SIZE * 16) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 8:
            raise ValidationError(f"dim must be an int >= 8, got {dim!r}")
        self.dim = dim
        self.bigrams = bool(bigrams)
        self.batch_size = _check_batch_size(batch_size)
        self.name = f"hashing-{dim}" + ("" if self.bigrams else "-unigram")

    def _features(self, text: str) -> list[tuple[str, float]]:
        tokens = _TOKEN.findall(text.lower())
        if not tokens:
            return [(_EMPTY_FEATURE, 1.0)]
        features = [(token, 1.0) for token in tokens]
        if self.bigrams:
            features.extend((f"{a}\x01{b}", _BIGRAM_WEIGHT) for a, b in itertools.pairwise(tokens))
        return features

    async def _embed_batch(self, texts: list[str]) -> Any:
        if len(texts) > _INLINE_MAX:
            return await asyncio.to_thread(self._vectors, texts)
        return self._vectors(texts)

    def _vectors(self, texts: list[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            vector = out[row]
            for feature, weight in self._features(text):
                index, sign = _slot(feature, self.dim)
                vector[index] += sign * weight
            if not vector.any():  # every feature cancelled out: fall back to the empty vector
                index, sign = _slot(_EMPTY_FEATURE, self.dim)
                vector[index] = sign
        return out
