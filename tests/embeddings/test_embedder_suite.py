"""The hashing embedder (and the packaged MiniLM, slow) against the shipped EmbedderSuite, and proof the suite can fail."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from memlab.embeddings import Embedder, HashingEmbedder, MiniLMEmbedder
from memlab.testing import EmbedderSuite


class TestHashing(EmbedderSuite):
    @pytest.fixture
    def embedder(self) -> Embedder:
        return HashingEmbedder()


class TestHashingSmallBatches(EmbedderSuite):
    @pytest.fixture
    def embedder(self) -> Embedder:
        return HashingEmbedder(dim=16, bigrams=False, batch_size=2)


@functools.cache
def _minilm() -> Embedder:
    """One MiniLM for every test of the class (the model loads once)."""
    return MiniLMEmbedder()


@pytest.mark.slow
class TestMiniLM(EmbedderSuite):
    @pytest.fixture
    def embedder(self) -> Embedder:
        return _minilm()


class _BatchDependent(Embedder):
    """Broken on purpose: a row depends on the batch it is in."""

    name = "batch-dependent"
    dim = 2

    async def _ensure_loaded(self) -> None:
        return None

    async def _embed_batch(self, texts: list[str]) -> Any:
        return np.array([[len(texts), 1.0] for _ in texts], dtype=np.float32)


def test_the_suite_rejects_rows_that_depend_on_the_batch() -> None:
    with pytest.raises(AssertionError):
        EmbedderSuite().test_deterministic_and_batch_independent(embedder=_BatchDependent())
