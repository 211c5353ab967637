"""``VectorIndex``: one faiss collection of unit vectors keyed by string ids; ``VectorStore``: named collections.

Scores are **distances, lower is better**: ``1 - cosine`` (vectors are unit
rows, so faiss inner product is the cosine), clamped to ``[0, 2]``; an
identical vector scores ~0.

Two modes, switched automatically by collection size:

* **exact** (below ``ivf_threshold``, default 20,000): ``IndexIDMap2`` over
  ``IndexFlatIP``. Recall 1. A single top-15 query at 100,000 x 256 takes
  ~4.5 ms on one core (2-core box), and twice that if OpenMP spreads it over
  both cores, so single queries run on one thread in the calling thread.
* **IVF** (from ``ivf_threshold`` on): ``IndexIVFFlat`` with inner product,
  ``nlist = NLIST_FACTOR * sqrt(n)`` (at most ``n / 39``, faiss's training
  minimum), trained on the collection itself and retrained when it has grown
  ``RETRAIN_GROWTH`` x since the last training; back to exact when removals
  take it below half the threshold. **Recall trade-off:** IVF scans only the
  ``nprobe`` clusters nearest the query, so it can miss true neighbours.
  ``nprobe`` is tuned at each training: the smallest power of two whose
  leave-one-out recall@15 against exact search, measured on up to 128
  vectors sampled from the collection, reaches ``target_recall`` (0.95). That
  holds for queries distributed like the stored vectors; queries far from all
  of them (or data without cluster structure, where tuning ends near
  ``nprobe = nlist``, i.e. exact cost) may see lower recall; the tuned value
  is doubled (``NPROBE_SAFETY``) for that headroom. Build cost: one k-means
  per training on at most 64 vectors per cluster; 100,000 vectors added in
  batches of 10,000 (trainings at 20k and 80k) took 3.8 s at dim 256 and
  6 s at 384, then ~0.1 ms per query (``memlab.graph._vector_bench``).

Ids map to int64 labels through the index's own tables, so ``remove`` and
replace-on-``add`` work in both modes. Not safe for concurrent writes;
concurrent searches are fine. Pure and synchronous: callers run it off the
event loop.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import faiss
import numpy as np

from memlab.exceptions import ConfigError, ValidationError

__all__ = [
    "DEFAULT_IVF_THRESHOLD",
    "NLIST_FACTOR",
    "RETRAIN_GROWTH",
    "STANDARD_COLLECTIONS",
    "VectorIndex",
    "VectorStore",
]

#: collections switch from exact to IVF search at this many vectors
DEFAULT_IVF_THRESHOLD = 20_000
#: ``nlist = NLIST_FACTOR * sqrt(n)`` at each training
NLIST_FACTOR = 2.0
#: nprobe is the tuned value times this (headroom for queries less like the data than the tuning sample)
NPROBE_SAFETY = 2
#: k-means trains on at most this many vectors per cluster (bounds the training cost)
TRAIN_POINTS_PER_CENTROID = 64
#: retrain the IVF index once the collection has grown this many times since the last training
RETRAIN_GROWTH = 4
#: default recall@15 the IVF ``nprobe`` is tuned to
DEFAULT_TARGET_RECALL = 0.95
#: the collections the pipeline uses (any name matching ``[a-z][a-z0-9_]*`` works)
STANDARD_COLLECTIONS = ("chunks", "entities", "triplets", "summaries")
#: version of the :meth:`VectorIndex.to_state` layout
VECTOR_FORMAT = 1

_TUNE_QUERIES = 128
_TUNE_K = 15
_MIN_POINTS_PER_CENTROID = 39  # below this faiss warns that k-means is under-trained
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

    def __init__(
        self,
        dim: int,
        *,
        space: str,
        ivf_threshold: int = DEFAULT_IVF_THRESHOLD,
        target_recall: float = DEFAULT_TARGET_RECALL,
    ) -> None:
        self._dim = _positive_int("dim", dim)
        self._space = _check_space(space)
        self._ivf_threshold = _positive_int("ivf_threshold", ivf_threshold)
        if isinstance(target_recall, bool) or not isinstance(target_recall, (int, float)) or not 0 < target_recall <= 1:
            raise ValidationError(f"target_recall must be in (0, 1], got {target_recall!r}")
        self._target_recall = float(target_recall)
        self._label_of: dict[str, int] = {}
        self._id_of: dict[int, str] = {}
        self._next_label = 0
        self._trained_on = 0  # collection size at the last IVF training; 0 in exact mode
        self._index: Any = self._flat_index()

    # --- properties ---------------------------------------------------------------

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def space(self) -> str:
        return self._space

    @property
    def ivf_threshold(self) -> int:
        """Size from which this collection searches with IVF."""
        return self._ivf_threshold

    @property
    def mode(self) -> str:
        """``"exact"`` or ``"ivf"``."""
        return "ivf" if self._trained_on else "exact"

    @property
    def nprobe(self) -> int | None:
        """Clusters scanned per IVF query (None in exact mode)."""
        return int(self._index.nprobe) if self._trained_on else None

    @property
    def nlist(self) -> int | None:
        """Number of IVF clusters (None in exact mode)."""
        return int(self._index.nlist) if self._trained_on else None

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
        self._rebalance()

    def remove(self, ids: Iterable[str]) -> int:
        """Delete the vectors of ``ids`` (any iterable of str, e.g. a set; unknown ids are ignored); return how many were deleted."""
        keys = _check_ids(ids, ordered=False)
        labels = [self._label_of.pop(key) for key in dict.fromkeys(keys) if key in self._label_of]
        if not labels:
            return 0
        for label in labels:
            del self._id_of[label]
        self._index.remove_ids(np.asarray(labels, dtype=np.int64))
        self._rebalance()
        return len(labels)

    def clear(self) -> None:
        """Delete every vector (back to exact mode)."""
        self._label_of.clear()
        self._id_of.clear()
        self._trained_on = 0
        self._index = self._flat_index()

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

    # --- persistence --------------------------------------------------------------

    def to_state(self) -> tuple[np.ndarray, dict[str, Any]]:
        """``(faiss bytes as a uint8 array, JSON-safe dict)``: everything :meth:`from_state` needs."""
        labels = list(self._label_of.values())
        state = {
            "format": VECTOR_FORMAT,
            "dim": self._dim,
            "space": self._space,
            "ivf_threshold": self._ivf_threshold,
            "target_recall": self._target_recall,
            "trained_on": self._trained_on,
            "nprobe": self.nprobe,
            "next_label": self._next_label,
            "ids": list(self._label_of),
            "labels": labels,
        }
        return faiss.serialize_index(self._index), state

    @classmethod
    def from_state(cls, blob: np.ndarray | bytes, state: Mapping[str, Any], *, space: str | None = None) -> VectorIndex:
        """The index :meth:`to_state` described.

        ``space``, when given, must equal the stored space (else
        :class:`~memlab.ConfigError`: vectors of another embedder must not be
        mixed in). A malformed state or faiss blob raises :class:`~memlab.ValidationError`.
        """
        if not isinstance(state, Mapping) or state.get("format") != VECTOR_FORMAT:
            raise ValidationError(f"not a memlab vector index state of format {VECTOR_FORMAT}")
        if space is not None and state.get("space") != space:
            raise ConfigError(f"vector index was built in space {state.get('space')!r}, not {space!r}: re-ingest the data with this embedder")
        try:
            index = cls(state["dim"], space=state["space"], ivf_threshold=state["ivf_threshold"], target_recall=state["target_recall"])
            ids, labels = list(state["ids"]), [int(label) for label in state["labels"]]
            trained_on, next_label, nprobe = int(state["trained_on"]), int(state["next_label"]), state["nprobe"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"malformed vector index state: {type(exc).__name__}: {exc}") from exc
        try:
            faiss_index = faiss.deserialize_index(np.frombuffer(blob, dtype=np.uint8))
        except RuntimeError as exc:
            raise ValidationError(f"unreadable faiss index: {str(exc).splitlines()[0]}") from exc
        expected = faiss.IndexIVFFlat if trained_on else faiss.IndexIDMap2
        if not isinstance(faiss_index, expected) or faiss_index.d != index.dim or faiss_index.ntotal != len(ids):
            raise ValidationError(
                f"faiss index ({type(faiss_index).__name__}, d={faiss_index.d}, ntotal={faiss_index.ntotal}) does not match its state "
                f"({expected.__name__}, d={index.dim}, {len(ids)} ids)"
            )
        if len(labels) != len(ids) or len(set(ids)) != len(ids) or len(set(labels)) != len(labels) or any(label >= next_label for label in labels):
            raise ValidationError("vector index state has inconsistent ids and labels")
        if trained_on:
            faiss_index.nprobe = int(nprobe)
        index._index = faiss_index
        index._label_of = dict(zip(ids, labels))
        index._id_of = dict(zip(labels, ids))
        index._next_label = next_label
        index._trained_on = trained_on
        return index

    # --- internals ----------------------------------------------------------------

    def _flat_index(self) -> Any:
        return faiss.IndexIDMap2(faiss.IndexFlatIP(self._dim))

    def _rebalance(self) -> None:
        """Switch mode or retrain when the size calls for it (see the module docstring)."""
        size = len(self)
        if self._trained_on and size < self._ivf_threshold // 2:
            self._rebuild(ivf=False)
        elif (not self._trained_on and size >= self._ivf_threshold) or (self._trained_on and size >= RETRAIN_GROWTH * self._trained_on):
            self._rebuild(ivf=True)

    def _rebuild(self, *, ivf: bool) -> None:
        labels = np.fromiter(self._label_of.values(), dtype=np.int64, count=len(self._label_of))
        vectors = self._index.reconstruct_batch(labels)
        if not ivf:
            index = self._flat_index()
            index.add_with_ids(vectors, labels)
            self._index, self._trained_on = index, 0
            return
        size = len(labels)
        nlist = max(1, min(int(NLIST_FACTOR * math.sqrt(size)), size // _MIN_POINTS_PER_CENTROID))
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(self._dim), self._dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.max_points_per_centroid = TRAIN_POINTS_PER_CENTROID
        with _omp_threads(_CORES):
            index.train(vectors)
            index.set_direct_map_type(faiss.DirectMap.Hashtable)  # reconstruct + remove by label
            index.add_with_ids(vectors, labels)
            index.nprobe = min(index.nlist, NPROBE_SAFETY * self._tune_nprobe(index, vectors, labels))
        self._index, self._trained_on = index, size

    def _tune_nprobe(self, index: Any, vectors: np.ndarray, labels: np.ndarray) -> int:
        """Smallest power-of-two nprobe whose leave-one-out recall@15 vs exact reaches the target."""
        rng = np.random.default_rng(len(labels))
        sample = rng.choice(len(labels), size=min(_TUNE_QUERIES, len(labels)), replace=False)
        queries, own = vectors[sample], labels[sample]
        k = min(_TUNE_K, len(labels) - 1)
        if k < 1:
            return index.nlist
        _, exact_rows = faiss.knn(queries, vectors, k + 1, metric=faiss.METRIC_INNER_PRODUCT)
        exact = [set(labels[row[row >= 0]].tolist()) - {label} for row, label in zip(exact_rows, own)]
        nprobe = 1
        while nprobe < index.nlist:
            index.nprobe = nprobe
            _, found_rows = index.search(queries, k + 1)
            hits = sum(len(truth & (set(row.tolist()) - {label})) for row, label, truth in zip(found_rows, own, exact))
            if hits >= self._target_recall * sum(min(k, len(truth)) for truth in exact):
                return nprobe
            nprobe *= 2
        return index.nlist


class VectorStore:
    """Named :class:`VectorIndex` collections sharing one ``dim`` and ``space``, created on first use."""

    def __init__(self, dim: int, space: str, *, ivf_threshold: int = DEFAULT_IVF_THRESHOLD) -> None:
        self._dim = _positive_int("dim", dim)
        self._space = _check_space(space)
        self._ivf_threshold = _positive_int("ivf_threshold", ivf_threshold)
        self._collections: dict[str, VectorIndex] = {}

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def space(self) -> str:
        return self._space

    @property
    def ivf_threshold(self) -> int:
        """Size from which each collection searches with IVF."""
        return self._ivf_threshold

    def collection(self, name: str) -> VectorIndex:
        """The collection ``name`` (``[a-z][a-z0-9_]*``, e.g. ``"chunks"``), created empty on first use."""
        if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
            raise ValidationError(f"collection name must match [a-z][a-z0-9_]* (at most 64 chars), got {name!r}")
        index = self._collections.get(name)
        if index is None:
            index = VectorIndex(self._dim, space=self._space, ivf_threshold=self._ivf_threshold)
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
