"""``LiteLLMEmbedder``: a provider's embedding model through ``litellm.aembedding``.

A real provider is a model string away, like :class:`~memlab.llm.LLMClient`::

    LiteLLMEmbedder("openai/text-embedding-3-small", api_key=os.environ["EMBEDDING_API_KEY"])
    LiteLLMEmbedder("openai/text-embedding-3-large", dimensions=256)          # provider-side truncation
    LiteLLMEmbedder("ollama/nomic-embed-text", dim=768, api_base="http://localhost:11434")
    LiteLLMEmbedder("openai/my-model", dim=1024, api_base="http://127.0.0.1:8000/v1")  # any OpenAI-compatible server

litellm is imported on first use through :func:`memlab.llm._litellm.load_litellm`
(offline cost map, no banner). Extra keyword arguments (``api_base``,
``timeout``, ``num_retries``, ``dimensions``, ``input_type``, ...) go to every
``litellm.aembedding`` call. Errors of litellm or the provider become
:class:`EmbeddingError` with the original as ``__cause__``; the key never
appears in a message or a repr.
"""

from __future__ import annotations

import base64
from typing import Any

from memlab.embeddings._base import Embedder, EmbeddingError, _check_batch_size
from memlab.exceptions import ValidationError

__all__ = ["LiteLLMEmbedder"]

#: inputs per request (Cohere's limit is 96; OpenAI takes up to 2,048)
LITELLM_BATCH_SIZE = 96


def _row(item: Any) -> tuple[int, Any]:
    if isinstance(item, dict):
        return int(item.get("index", 0)), item.get("embedding")
    return int(getattr(item, "index", 0)), getattr(item, "embedding", None)


def _decode(vector: Any) -> Any:
    import numpy as np

    if isinstance(vector, str):  # encoding_format="base64": little-endian float32
        return np.frombuffer(base64.b64decode(vector), dtype="<f4")
    return np.asarray(vector, dtype=np.float32)


class LiteLLMEmbedder(Embedder):
    """Embeddings from any litellm embedding model (``EMBEDDING_MODEL``).

    ``dim`` is the vector size; when omitted it is taken from ``dimensions``
    (if passed) or from litellm's bundled model map (``output_vector_size``,
    known for OpenAI's models, for example), which imports litellm on first
    access of :attr:`dim`. A model unknown there needs ``dim=``. Empty strings
    are sent as ``" "`` because several providers reject empty inputs.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        *,
        dim: int | None = None,
        batch_size: int = LITELLM_BATCH_SIZE,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"model must be a non-empty litellm model string, got {model!r}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ValidationError(f"dim must be a positive int, got {dim!r}")
        self.model = model.strip()
        self._api_key = api_key or None
        self.batch_size = _check_batch_size(batch_size)
        self.litellm_kwargs = dict(litellm_kwargs)
        dimensions = self.litellm_kwargs.get("dimensions")
        if dim is not None and dimensions is not None and dim != dimensions:
            raise ValidationError(f"dim={dim} contradicts dimensions={dimensions}")
        self._dim = dim if dim is not None else dimensions
        self.name = f"litellm:{self.model}" + (f"@{dimensions}" if dimensions is not None else "")

    @property
    def dim(self) -> int:  # type: ignore[override]
        """Vector size: ``dim=``, else ``dimensions=``, else litellm's model map; ValidationError when unknown."""
        if self._dim is None:
            self._dim = self._dim_from_model_map()
        return self._dim

    def _dim_from_model_map(self) -> int:
        from memlab.llm import load_litellm

        litellm = load_litellm()
        try:
            size = litellm.get_model_info(self.model).get("output_vector_size")
        except Exception:  # noqa: BLE001 - litellm raises various errors for models it does not map
            size = None
        if not isinstance(size, int) or size < 1:
            raise ValidationError(f"the vector size of {self.model!r} is not in litellm's model map: pass dim=")
        return size

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        return f"LiteLLMEmbedder(model={self.model!r}{key}, dim={self._dim})"

    def request_kwargs(self, texts: list[str]) -> dict[str, Any]:
        """The keyword arguments of the ``litellm.aembedding`` call for one batch."""
        call = dict(self.litellm_kwargs)
        call["model"] = self.model
        call["input"] = [text if text else " " for text in texts]
        if self._api_key:
            call["api_key"] = self._api_key
        return call

    async def _ensure_loaded(self) -> None:
        self.dim  # noqa: B018 - resolve the vector size (and fail early) before the first request

    async def _embed_batch(self, texts: list[str]) -> Any:
        import numpy as np

        from memlab.llm import load_litellm

        litellm = load_litellm()
        try:
            response = await litellm.aembedding(**self.request_kwargs(texts))
        except Exception as exc:  # every litellm / provider failure becomes an EmbeddingError
            raise self._wrap(exc) from exc
        data = getattr(response, "data", None)
        if data is None and isinstance(response, dict):
            data = response.get("data")
        rows = sorted((_row(item) for item in data or []), key=lambda pair: pair[0])
        if len(rows) != len(texts) or any(vector is None for _, vector in rows):
            raise EmbeddingError(f"{self.model} returned {len(rows)} embeddings for {len(texts)} inputs", model=self.model)
        vectors = [_decode(vector) for _, vector in rows]
        if any(vector.shape != (self.dim,) for vector in vectors):
            shapes = sorted({vector.shape[0] for vector in vectors})
            raise EmbeddingError(f"{self.model} returned vectors of size {shapes}, expected {self.dim}", model=self.model)
        matrix = np.stack(vectors)
        if not np.isfinite(matrix).all() or not np.linalg.norm(matrix, axis=1).all():
            raise EmbeddingError(f"{self.model} returned a zero or non-finite vector", model=self.model)
        return matrix

    def _wrap(self, exc: Exception) -> EmbeddingError:
        message = str(exc) or type(exc).__name__
        if self._api_key:
            message = message.replace(self._api_key, "***")
        return EmbeddingError(f"{self.model} embedding failed ({type(exc).__name__}): {message}", model=self.model, provider_error=type(exc).__name__)
