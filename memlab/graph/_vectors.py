"""``VectorIndex``: one faiss collection of unit vectors keyed by string ids; ``VectorStore``: named collections.

Scores are **distances, lower is better**: ``1 - cosine`` (vectors are unit
rows, so faiss inner product is the cosine), clamped to ``[0, 2]``; an
identical vector scores ~0 (within ~5e-4, see below).

One index type at every size: ``IndexIDMap2`` over an fp16
``IndexScalarQuantizer`` with inner product, i.e. brute force over every
stored vector held as half-precision codes. No training, no tuning knob, and
half the memory of float32. Each fp16 component keeps ~3 significant digits,
so a score is off by at most ~5e-4 and top-k can differ from exact search only
between near-ties: on 100,000 hashing-embedded corpus chunks, recall@15 vs
exact float32 search is 0.997, and every miss scored within 2e-4 of the k-th
exact neighbour. It scans half the bytes of ``IndexFlatIP``, so it is also
faster at every size measured (1,000 to 100,000 vectors, dim 256 and 384), which
is why there is no float32 mode below some size. IVF was dropped: on the same
vectors (no cluster structure) it found 0.36 of the true top-15 at nprobe 8
and 0.91 at nprobe 128.

Measured with ``memlab.bench.ingest.vector_rows`` (``memlab bench ingest``) on
the 2-core box: 100,000 hashing-embedded corpus chunks, top-15, 200 question
vectors one at a time; recall@15 against exact float32 search. The raw flat
rows are a plain ``IndexFlatIP`` over the same vectors and queries: on faiss's
default of both cores as ``vector_rows`` prints it, and on one OpenMP thread
(timed the same way by hand). Other jobs shared the box, so p95 is noisy:

===  =====================================  ======  ======  =========
dim  index                                  p50 ms  p95 ms  recall@15
===  =====================================  ======  ======  =========
256  memlab (fp16)                            2.59    4.51      0.997
256  raw faiss IndexFlatIP, 1 thread          4.57    8.59      1.0
256  raw faiss IndexFlatIP, 2 threads        17.78   33.82      1.0
384  memlab (fp16)                            3.71    5.76      0.997
384  raw faiss IndexFlatIP, 1 thread          7.65   16.01      1.0
384  raw faiss IndexFlatIP, 2 threads        39.97   44.03      1.0
===  =====================================  ======  ======  =========

Building the 100,000-vector collection in batches of 10,000 took 0.3 s.

A single query runs on one OpenMP thread in the calling thread (two threads
made one query several times slower, see above); a batch of
``_BATCH_QUERIES`` (20) or more queries uses every core.

Ids map to int64 labels through the index's own tables, so ``remove`` and
replace-on-``add`` delete the old codes. Not safe for concurrent writes;
concurrent searches are fine. Pure and synchronous: callers run it off the
event loop.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import faiss
import numpy as np

from memlab.exceptions import ConfigError, ValidationError

__all__ = ["VectorIndex", "VectorStore"]

#: version of the :meth:`VectorIndex.to_state` layout (1: the exact/IVF index of earlier, unreleased code)
VECTOR_FORMAT = 2
#: what :attr:`VectorIndex.mode` reports: every vector stored as fp16 codes, searched by brute force
MODE = "fp16"

_BATCH_QUERIES = 20  # from this many queries on, a search uses every core
_UNIT_TOLERANCE = 1e-3
_COLLECTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextmanager
def _omp_threads(count: int) -> Iterator[None]:
    """Run faiss on ``count`` OpenMP threads in this thread (the setting is per calling thread)."""
    previous = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(count)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(previous)


class VectorIndex:
    """One collection: string ids -> unit vectors of ``dim`` made in vector space ``space`` (an embedder's ``name``)."""

    def __init__(self, dim: int, *, space: str) -> None:
        self._dim = _positive_int("dim", dim)
        self._space = _check_space(space)
        self._label_of: dict[str, int] = {}
        self._id_of: dict[int, str] = {}
        self._next_label = 0
        self._index: Any = self._new_index()

    # --- properties ---------------------------------------------------------------

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def space(self) -> str:
        return self._space

    @property
    def mode(self) -> str:
        """How vectors are stored and searched: ``"fp16"`` (see the module docstring)."""
        return MODE

    def __len__(self) -> int:
        return len(self._label_of)

    def __contains__(self, item: object) -> bool:
        return item in self._label_of

    def ids(self) -> list[str]:
        """Stored ids, in first-insertion order."""
        return list(self._label_of)

    def __repr__(self) -> str:
        return f"VectorIndex(dim={self._dim}, space={self._space!r}, size={len(self)}, mode={self.mode!r})"

    # --- writes -------------------------------------------------------------------

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` under ``ids[i]``, replacing the vector of an id already stored.

        ``vectors``: float array of shape ``(len(ids), dim)``, finite, rows of
        unit norm. Ids must be distinct non-empty strings. On a bad argument
        nothing is written (:class:`~memlab.ValidationError`).
        """
        keys = _check_ids(ids)
        if len(set(keys)) != len(keys):
            duplicate = next(key for key in keys if keys.count(key) > 1)
            raise ValidationError(f"ids contains {duplicate!r} more than once")
        array = _check_vectors("vectors", vectors, self._dim)
        if array.shape[0] != len(keys):
            raise ValidationError(f"vectors has {array.shape[0]} rows for {len(keys)} ids")
        if not keys:
            return
        existing = [self._label_of[key] for key in keys if key in self._label_of]
        if existing:
            self._index.remove_ids(np.asarray(existing, dtype=np.int64))
        labels = np.empty(len(keys), dtype=np.int64)
        for position, key in enumerate(keys):
            label = self._label_of.get(key)
            if label is None:
                label = self._next_label
                self._next_label += 1
                self._label_of[key] = label
                self._id_of[label] = key
            labels[position] = label
        self._index.add_with_ids(array, labels)

    def remove(self, ids: Iterable[str]) -> int:
        """Delete the vectors of ``ids`` (any iterable of str, e.g. a set; unknown ids are ignored); return how many were deleted."""
        keys = _check_ids(ids, ordered=False)
        labels = [self._label_of.pop(key) for key in dict.fromkeys(keys) if key in self._label_of]
        if not labels:
            return 0
        for label in labels:
            del self._id_of[label]
        self._index.remove_ids(np.asarray(labels, dtype=np.int64))
        return len(labels)

    def clear(self) -> None:
        """Delete every vector."""
        self._label_of.clear()
        self._id_of.clear()
        self._index = self._new_index()

    # --- search -------------------------------------------------------------------

    def search(self, query: np.ndarray, top_k: int) -> list[tuple[str, float]]:
        """The ``top_k`` nearest ids to one query of shape ``(dim,)``: ``(id, 1 - cosine)``, nearest first."""
        if not isinstance(query, np.ndarray) or query.ndim != 1:
            shape = getattr(query, "shape", type(query).__name__)
            raise ValidationError(f"query must be a numpy array of shape ({self._dim},), got {shape}; use search_many for a batch")
        return self.search_many(query[None, :], top_k)[0]

    def search_many(self, queries: np.ndarray, top_k: int) -> list[list[tuple[str, float]]]:
        """:meth:`search` for each row of ``queries`` (shape ``(q, dim)``), one result list per row."""
        array = _check_vectors("queries", queries, self._dim)
        k = _positive_int("top_k", top_k)
        if not len(self) or not array.shape[0]:
            return [[] for _ in range(array.shape[0])]
        with _omp_threads(1 if array.shape[0] < _BATCH_QUERIES else _CORES):
            similarities, labels = self._index.search(array, min(k, len(self)))
        id_of = self._id_of
        return [
            [(id_of[int(label)], min(2.0, max(0.0, 1.0 - float(score)))) for score, label in zip(row_s, row_l) if label >= 0]
            for row_s, row_l in zip(similarities, labels)
        ]

    def search_among(self, query: np.ndarray, ids: Iterable[str], top_k: int) -> list[tuple[str, float]]:
        """:meth:`search` restricted to ``ids`` (unknown ids are skipped): scores only those vectors.

        For a filtered search over a small subset (a time window, a tag): its cost
        grows with ``len(ids)``, not with the collection.
        """
        if not isinstance(query, np.ndarray) or query.shape != (self._dim,):
            raise ValidationError(f"query must be a numpy array of shape ({self._dim},), got {getattr(query, 'shape', type(query).__name__)}")
        k = _positive_int("top_k", top_k)
        keys = [key for key in dict.fromkeys(ids) if key in self._label_of]
        if not keys:
            return []
        labels = np.asarray([self._label_of[key] for key in keys], dtype=np.int64)
        scores = self._index.reconstruct_batch(labels) @ np.asarray(query, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(keys[int(row)], min(2.0, max(0.0, 1.0 - float(scores[row])))) for row in order]

    # --- persistence --------------------------------------------------------------

    def to_state(self) -> tuple[np.ndarray, dict[str, Any]]:
        """``(faiss bytes as a uint8 array, JSON-safe dict)``: everything :meth:`from_state` needs.

        The dict's ``mode`` is for a human reading the snapshot; ``format`` alone decides what :meth:`from_state` accepts.
        """
        state = {
            "format": VECTOR_FORMAT,
            "mode": MODE,
            "dim": self._dim,
            "space": self._space,
            "next_label": self._next_label,
            "ids": list(self._label_of),
            "labels": list(self._label_of.values()),
        }
        return faiss.serialize_index(self._index), state

    @classmethod
    def from_state(cls, blob: np.ndarray | bytes, state: Mapping[str, Any], *, space: str | None = None) -> VectorIndex:
        """The index :meth:`to_state` described.

        ``space``, when given, must equal the stored space, and the state must
        be of this version's format (else :class:`~memlab.ConfigError`: vectors
        of another embedder must not be mixed in; an older index must be
        re-ingested). A malformed state or faiss blob raises
        :class:`~memlab.ValidationError`.
        """
        if not isinstance(state, Mapping) or not isinstance(state.get("format"), int):
            raise ValidationError("not a memlab vector index state (no integer 'format')")
        if state["format"] != VECTOR_FORMAT:
            raise ConfigError(
                f"vector index state has format {state['format']}, this memlab reads format {VECTOR_FORMAT} only: "
                "re-ingest the data (forget the dataset and remember it again)"
            )
        if space is not None and state.get("space") != space:
            raise ConfigError(f"vector index was built in space {state.get('space')!r}, not {space!r}: re-ingest the data with this embedder")
        try:
            index = cls(state["dim"], space=state["space"])
            ids, labels, next_label = list(state["ids"]), [int(label) for label in state["labels"]], int(state["next_label"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"malformed vector index state: {type(exc).__name__}: {exc}") from exc
        try:
            faiss_index = faiss.deserialize_index(np.frombuffer(blob, dtype=np.uint8))
        except RuntimeError as exc:
            raise ValidationError(f"unreadable faiss index: {str(exc).splitlines()[0]}") from exc
        inner = faiss.downcast_index(faiss_index.index) if isinstance(faiss_index, faiss.IndexIDMap2) else None
        if (
            not isinstance(inner, faiss.IndexScalarQuantizer)
            or inner.sq.qtype != faiss.ScalarQuantizer.QT_fp16
            or inner.metric_type != faiss.METRIC_INNER_PRODUCT
            or faiss_index.d != index.dim
            or faiss_index.ntotal != len(ids)
        ):
            raise ValidationError(
                f"faiss index ({type(faiss_index).__name__} over {type(inner).__name__}, d={faiss_index.d}, ntotal={faiss_index.ntotal}) "
                f"does not match its state (IndexIDMap2 over fp16 inner-product IndexScalarQuantizer, d={index.dim}, {len(ids)} ids)"
            )
        if len(labels) != len(ids) or len(set(ids)) != len(ids) or len(set(labels)) != len(labels) or any(not 0 <= label < next_label for label in labels):
            raise ValidationError("vector index state has inconsistent ids and labels")
        index._index = faiss_index
        index._label_of = dict(zip(ids, labels))
        index._id_of = dict(zip(labels, ids))
        index._next_label = next_label
        return index

    # --- internals ----------------------------------------------------------------

    def _new_index(self) -> Any:
        return faiss.IndexIDMap2(faiss.IndexScalarQuantizer(self._dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT))


class VectorStore:
    """Named :class:`VectorIndex` collections sharing one ``dim`` and ``space``, created on first use."""

    def __init__(self, dim: int, space: str) -> None:
        self._dim = _positive_int("dim", dim)
        self._space = _check_space(space)
        self._collections: dict[str, VectorIndex] = {}

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def space(self) -> str:
        return self._space

    def collection(self, name: str) -> VectorIndex:
        """The collection ``name`` (``[a-z][a-z0-9_]*``, e.g. ``"chunks"``), created empty on first use."""
        if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
            raise ValidationError(f"collection name must match [a-z][a-z0-9_]* (at most 64 chars), got {name!r}")
        index = self._collections.get(name)
        if index is None:
            index = VectorIndex(self._dim, space=self._space)
            self._collections[name] = index
        return index

    def names(self) -> list[str]:
        """Names of the collections created so far."""
        return list(self._collections)

    def remove(self, ids: Iterable[str]) -> int:
        """Delete ``ids`` (any iterable of str, e.g. a set) from every collection; return how many vectors were deleted."""
        keys = _check_ids(ids, ordered=False)
        return sum(index.remove(keys) for index in self._collections.values())

    def clear(self) -> None:
        """Delete every vector of every collection."""
        for index in self._collections.values():
            index.clear()

    def counts(self) -> dict[str, int]:
        """``{collection name: number of vectors}``."""
        return {name: len(index) for name, index in self._collections.items()}

    def _adopt(self, name: str, index: VectorIndex) -> None:
        """Install a loaded collection (used by snapshots); its dim and space must match the store's."""
        if index.dim != self.dim or index.space != self.space:
            raise ValidationError(f"collection {name!r} has dim {index.dim} / space {index.space!r}, the store {self.dim} / {self.space!r}")
        self.collection(name)  # validates the name
        self._collections[name] = index

    def __repr__(self) -> str:
        return f"VectorStore(dim={self.dim}, space={self.space!r}, counts={self.counts()})"


def _positive_int(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValidationError(f"{what} must be a positive int, got {value!r}")
    return int(value)


def _check_space(space: object) -> str:
    if not isinstance(space, str) or not space.strip():
        raise ValidationError(f"space must be a non-empty str (the embedder's name), got {space!r}")
    return space


def _check_ids(ids: Iterable[str], *, ordered: bool = True) -> list[str]:
    """``ids`` as a list of non-empty str; ``ordered`` demands a sequence (ids that pair with vector rows)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence if ordered else Iterable):
        raise ValidationError(f"ids must be a {'sequence' if ordered else 'collection'} of str (a list), got {type(ids).__name__}")
    keys = list(ids)
    for key in keys:
        if not isinstance(key, str) or not key:
            raise ValidationError(f"ids must be non-empty strings, got {key!r}")
    return keys


def _check_vectors(what: str, vectors: object, dim: int) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 ``(n, dim)`` array of finite unit rows, or ValidationError."""
    if not isinstance(vectors, np.ndarray):
        raise ValidationError(f"{what} must be a numpy array, got {type(vectors).__name__}")
    if not np.issubdtype(vectors.dtype, np.floating):
        raise ValidationError(f"{what} must have a float dtype, got {vectors.dtype}")
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise ValidationError(f"{what} must have shape (n, {dim}), got {vectors.shape}")
    array = np.ascontiguousarray(vectors, dtype=np.float32)
    if not np.isfinite(array).all():
        raise ValidationError(f"{what} contains NaN or infinite values")
    norms = np.linalg.norm(array, axis=1)
    bad = np.flatnonzero(np.abs(norms - 1.0) > _UNIT_TOLERANCE)
    if bad.size:
        raise ValidationError(f"{what} must be unit rows (embedder output); row {int(bad[0])} has norm {float(norms[bad[0]]):.4g}")
    return array
