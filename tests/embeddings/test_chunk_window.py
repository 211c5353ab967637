"""The default chunk size fits the embedder's input window (``GraphConfig.chunking``, ``Embedder.max_tokens``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab import MemoryStack, StackConfig
from memlab.bench.corpus import synthetic_documents
from memlab.config import EmbeddingConfig, GraphConfig
from memlab.embeddings import MINILM_MAX_TOKENS, HashingEmbedder, MiniLMEmbedder
from memlab.exceptions import ConfigError
from memlab.graph import chunk_text


def test_unset_sizes_follow_the_window() -> None:
    assert MiniLMEmbedder.max_tokens == MINILM_MAX_TOKENS == 256 and HashingEmbedder.max_tokens is None
    assert GraphConfig().chunking(None) == (512, 64)  # no short window: the old default
    assert GraphConfig().chunking(256) == (192, 24)
    assert GraphConfig().chunking(8192) == (512, 64)  # never above the default
    assert GraphConfig().chunking(4) == (16, 2)  # never below the smallest chunk


def test_set_values_win() -> None:
    assert GraphConfig(chunk_size=300).chunking(256) == (300, 37)
    assert GraphConfig(chunk_size=300, chunk_overlap=0).chunking(256) == (300, 0)
    assert GraphConfig(chunk_overlap=10).chunking(256) == (192, 10)
    assert GraphConfig(chunk_overlap=200).chunking(None) == (512, 200)
    with pytest.raises(ConfigError, match="MEMLAB_CHUNK_OVERLAP.*192.*256-token window"):
        GraphConfig(chunk_overlap=200).chunking(256)
    assert StackConfig.from_env({"MEMLAB_CHUNK_SIZE": "100"}).graph.chunking(256) == (100, 12)


def test_a_stack_chunks_for_its_embedder(tmp_path: Path) -> None:
    minilm = MemoryStack.from_config(StackConfig(data_root=tmp_path / "a", embedding=EmbeddingConfig(model="memlab/minilm")))
    hashing = MemoryStack.from_config(StackConfig(data_root=tmp_path / "b", embedding=EmbeddingConfig(model="memlab/hashing")))
    assert (minilm.memory.chunk_size, minilm.memory.chunk_overlap) == (192, 24)
    assert (hashing.memory.chunk_size, hashing.memory.chunk_overlap) == (512, 64)
    with pytest.raises(ConfigError, match="MEMLAB_CHUNK_OVERLAP"):
        MemoryStack.from_config(StackConfig(data_root=tmp_path / "c", graph=GraphConfig(chunk_overlap=300)))


def test_minilm_default_chunks_of_the_benchmark_corpus_fit_the_window() -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(MiniLMEmbedder().tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    size, overlap = GraphConfig().chunking(MINILM_MAX_TOKENS)
    documents = synthetic_documents(50, words=300, seed=0)
    chunks = [chunk.text for document in documents for chunk in chunk_text(document, chunk_size=size, overlap=overlap)]
    lengths = [len(encoding.ids) for encoding in tokenizer.encode_batch(chunks)]
    assert max(lengths) <= MINILM_MAX_TOKENS  # nothing truncated
    old = [len(encoding.ids) for encoding in tokenizer.encode_batch(documents)]  # the old 512 default: one chunk per document
    assert min(old) > MINILM_MAX_TOKENS  # every one of them truncated
