"""The ``Embedder`` contract, and the helpers every embedder shares."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlab.exceptions import EmbeddingError, ValidationError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_BATCH_SIZE", "Embedder", "EmbeddingError", "check_texts", "l2_normalize"]

#: texts per model call unless an embedder is told otherwise
DEFAULT_BATCH_SIZE = 64


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or :class:`~memlab.ValidationError` when it is not a sequence of strings.

    A bare ``str`` is refused (it is a sequence of characters, almost always a
    mistake). Empty strings are allowed: every embedder maps them to a valid
    unit vector.
    """
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise ValidationError(f"texts must be a sequence of strings (a list), got {type(texts).__name__}")
    out = list(texts)
    for index, text in enumerate(out):
        if not isinstance(text, str):
            raise ValidationError(f"texts[{index}] must be a str, got {type(text).__name__}")
    return out


def l2_normalize(vectors: Any) -> np.ndarray:
    """Rows of ``vectors`` scaled to unit L2 norm, as float32 C-contiguous. All-zero rows stay zero."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    np.maximum(norms, np.float32(1e-12), out=norms)
    return np.ascontiguousarray(array / norms, dtype=np.float32)


class Embedder(abc.ABC):
    """Maps texts to unit vectors. One instance per model; safe to share across tasks.

    Contract (every implementation, checked by ``tests/embeddings``):

    * ``await embed(texts)`` takes a sequence of ``str`` (a list; a bare ``str``
      raises :class:`~memlab.ValidationError`) and returns a ``numpy.ndarray`` of
      dtype ``float32`` and shape ``(len(texts), dim)``, row ``i`` the vector of
      ``texts[i]``. An empty input returns shape ``(0, dim)`` without loading the
      model.
    * Every row has L2 norm 1 (within float32 rounding), so the dot product is
      the cosine similarity (faiss ``IndexFlatIP``). An empty string gets a
      valid unit vector too (the exception: :class:`HashingEmbedder` maps a
      text without tokens to its fixed "empty" vector, also of norm 1).
    * The same text always gets the same vector from the same embedder
      (deterministic; batch composition does not change a row beyond float
      rounding).
    * ``dim`` and ``name`` are known without loading the model. ``name`` is a
      stable identifier of the vector space (model and settings): vectors made
      under different names must not be mixed in one index.
    * Work is batched (``batch_size`` texts per model call) and runs off the
      event loop where it is CPU-bound; a model is loaded lazily, on the first
      non-empty ``embed`` call, also off the loop. With ``sort_by_length`` the
      texts are batched in order of length (each batch padded to its own
      longest text), and rows still come back in input order.
    * ``max_tokens`` is the model's input window in its own tokens (None: no
      short window). Text past it is truncated, so it does not reach the
      vector; the default chunk size of permanent memory is derived from it
      (:meth:`memlab.config.GraphConfig.chunking`).
    * Failures of a model or provider raise :class:`EmbeddingError` (the
      original error as ``__cause__``); bad arguments raise
      :class:`~memlab.ValidationError`.

    Subclasses implement :meth:`_embed_batch` (one batch, already validated and
    non-empty; returns raw or normalised vectors) and set ``dim`` and ``name``;
    :meth:`embed` does the validation, batching, normalisation and shape checks.
    """

    #: vector dimension
    dim: int
    #: stable identifier of the vector space
    name: str
    #: texts per :meth:`_embed_batch` call
    batch_size: int = DEFAULT_BATCH_SIZE
    #: the model's input window in its own tokens (longer texts are truncated); None: no short window
    max_tokens: int | None = None

    @classmethod
    def from_config(cls, config: Any) -> "Embedder":
        """This embedder as a :class:`~memlab.config.StackConfig` describes it (a plugin's ``EMBEDDING_MODEL=<name>``).

        The default takes no settings; a subclass that needs some (``embedding.api_key``) overrides this.
        """
        return cls()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: float32, shape ``(len(texts), dim)``, rows of unit L2 norm."""
        import numpy as np

        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        await self._ensure_loaded()
        order = sorted(range(len(items)), key=lambda index: len(items[index])) if self.sort_by_length else None
        ordered = [items[index] for index in order] if order is not None else items
        parts = []
        for start in range(0, len(ordered), self.batch_size):
            batch = ordered[start : start + self.batch_size]
            vectors = np.asarray(await self._embed_batch(batch), dtype=np.float32)
            if vectors.shape != (len(batch), self.dim):
                raise EmbeddingError(
                    f"{self.name} returned vectors of shape {vectors.shape} for {len(batch)} texts; expected ({len(batch)}, {self.dim})",
                    model=self.name,
                )
            parts.append(vectors)
        vectors = l2_normalize(parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0))
        self._record_usage(items)
        if order is None:
            return vectors
        restored = np.empty_like(vectors)
        restored[order] = vectors
        return restored

    def _record_usage(self, texts: list[str]) -> None:
        """Report the call to the active usage meter (:func:`memlab.llm.metering`): estimated tokens, litellm's price."""
        from memlab.llm import CallUsage, cost_usd, estimate_tokens, metering_active, record_usage

        if not metering_active():
            return
        tokens = sum(estimate_tokens(text) for text in texts)
        record_usage(CallUsage(self.name, "embedding", tokens, 0, "estimate", cost_usd(self.name, tokens, 0, kind="embedding")))

    async def embed_one(self, text: str) -> np.ndarray:
        """The vector of one text: float32, shape ``(dim,)``, unit L2 norm."""
        if not isinstance(text, str):
            raise ValidationError(f"text must be a str, got {type(text).__name__}")
        return (await self.embed([text]))[0]

    async def prepare(self) -> None:
        """Load the model now (off the event loop) if it is not loaded yet; a no-op once loaded.

        Lets a caller time the one-off model load apart from steady-state embedding.
        """
        await self._ensure_loaded()

    async def _ensure_loaded(self) -> None:
        """Load the model if it is not loaded yet (off the event loop). Default: nothing to load."""

    #: batch texts of similar length together (models that pad a batch to its longest text)
    sort_by_length: bool = False

    @abc.abstractmethod
    async def _embed_batch(self, texts: list[str]) -> Any:
        """Vectors of one non-empty batch, shape ``(len(texts), dim)`` (normalised or not)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"


def _check_batch_size(batch_size: int) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValidationError(f"batch_size must be a positive int, got {batch_size!r}")
    return batch_size
