"""``PermanentMemory``: each dataset's graph and vectors, kept as snapshots, changed by add / cognify / forget.

Snapshots live in a :class:`~memlab.graph.SnapshotStore`: local files under
``{root}/{dataset_id}/`` by default (replaced atomically, see
:mod:`memlab.graph._snapshot`), or PostgreSQL shared by every machine
(:class:`~memlab.graph.PostgresSnapshots`). Documents and pipeline runs live in
the relational store (``data``, ``pipeline_runs``).

Writes to one dataset are serialised: an asyncio lock per dataset inside the
process, and across processes the store's writer lock (files) or a save that
commits only on the version it started from (PostgreSQL: on a conflict the
change is applied again to the newer version). A loaded snapshot is reused while
the committed token is unchanged, and reloaded when another process replaced it.
Indexes derived from a loaded snapshot (:meth:`PermanentMemory.derived`) live with it.

A cognify run does every fallible step (LLM extraction, embedding) before it
changes anything; if writing fails, the in-memory state is dropped and the
previous snapshot stays the truth. Documents are recorded only after their
graph is saved, so a failed ``remember()`` leaves no document behind, only a
``pipeline_runs`` row with status ``errored``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from memlab.exceptions import BackendError, SnapshotConflict
from memlab.graph import _pipeline
from memlab.graph._documents import Document
from memlab.graph._graph import GraphRemoval, KnowledgeGraph
from memlab.graph._snapshot_store import FileSnapshots, SnapshotStore
from memlab.graph._vectors import VectorStore
from memlab.models import Dataset, RememberResult
from memlab.privacy import scrub_error_message
from memlab.provenance import ForgetEvent
from memlab.relational import ADD_PIPELINE, COGNIFY_PIPELINE, RelationalStore

logger = logging.getLogger("memlab.graph")

T = TypeVar("T")

_DATA_NAMESPACE = uuid.UUID("5b1f0c8e-2f7a-4d55-9a43-3c1e7f0d9a61")


def data_id_for(dataset_id: uuid.UUID, content_hash: str) -> uuid.UUID:
    """The deterministic ``data_id`` of a document's content within a dataset."""
    return uuid.uuid5(_DATA_NAMESPACE, f"{dataset_id}:{content_hash}")


@dataclass
class _Loaded:
    token: str | None
    graph: KnowledgeGraph
    vectors: VectorStore
    #: kind -> (snapshot token it was built at, index) of :meth:`PermanentMemory.derived`
    derived: dict[str, tuple[str | None, Any]] = field(default_factory=dict)


def _drop_document(loaded: _Loaded, data_id: str) -> GraphRemoval:
    removal = loaded.graph.remove_data(data_id)
    loaded.vectors.remove(removal.node_ids | removal.edge_ids)
    return removal


def _removed(dataset_id: uuid.UUID, data_ids: set[str], removal: GraphRemoval, *, whole: bool, dry_run: bool) -> ForgetEvent:
    return ForgetEvent(dataset_id, frozenset(data_ids), frozenset(removal.node_ids), frozenset(removal.edge_ids), whole, dry_run)


def _derive(loaded: _Loaded, kind: str, build: Callable[[KnowledgeGraph], T]) -> tuple[KnowledgeGraph, T]:
    """:meth:`PermanentMemory.derived` on a loaded state."""
    token = loaded.token
    cached = loaded.derived.get(kind)
    if cached is None or cached[0] != token:
        cached = loaded.derived[kind] = (token, build(loaded.graph))
    return loaded.graph, cached[1]


async def _search(loaded: _Loaded, embedder: Any, collection: str, query_text: str, top_k: int) -> list[tuple[str, float]]:
    """:meth:`PermanentMemory.search` on a loaded state."""
    if collection not in loaded.vectors.counts() or not len(loaded.vectors.collection(collection)):
        return []
    query = (await embedder.embed([query_text]))[0]
    return loaded.vectors.collection(collection).search(query, top_k)


class PinnedMemory:
    """The reads of a :class:`PermanentMemory` (``graph``, ``vectors``, ``derived``, ``search``) with each dataset's
    committed snapshot checked once, at the view's first read of that dataset, instead of at every read.

    One search call (its lanes, its retrievers) reads through one view, so it sees one snapshot of each
    dataset however many reads it makes: what another process commits meanwhile is seen by the next call.
    Changes made in this process are seen as before (they change the loaded state in place). Anything
    else is the memory's own attribute.
    """

    def __init__(self, memory: "PermanentMemory") -> None:
        self.memory = memory
        self.embedder = memory.embedder
        self._states: dict[uuid.UUID, _Loaded] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)

    async def _current(self, dataset_id: uuid.UUID) -> _Loaded:
        loaded = self._states.get(dataset_id)
        if loaded is None:
            loaded = self._states.setdefault(dataset_id, await self.memory._current(dataset_id))
        return loaded

    async def graph(self, dataset_id: uuid.UUID) -> KnowledgeGraph:
        """As :meth:`PermanentMemory.graph`."""
        return (await self._current(dataset_id)).graph

    async def vectors(self, dataset_id: uuid.UUID) -> VectorStore:
        """As :meth:`PermanentMemory.vectors`."""
        return (await self._current(dataset_id)).vectors

    async def derived(self, dataset_id: uuid.UUID, kind: str, build: Callable[[KnowledgeGraph], T]) -> tuple[KnowledgeGraph, T]:
        """As :meth:`PermanentMemory.derived`."""
        return _derive(await self._current(dataset_id), kind, build)

    async def search(self, dataset_id: uuid.UUID, collection: str, query_text: str, top_k: int) -> list[tuple[str, float]]:
        """As :meth:`PermanentMemory.search`."""
        return await _search(await self._current(dataset_id), self.embedder, collection, query_text, top_k)


#: attempts of one write when other writers of a shared store keep committing first
WRITE_ATTEMPTS = 8

class PermanentMemory:
    """The graph + vector memory of every dataset under ``root``."""

    def __init__(
        self,
        root: Path,
        store: RelationalStore,
        *,
        llm: Any,
        embedder: Any,
        chunk_size: int,
        chunk_overlap: int,
        extraction_concurrency: int,
        snapshots: SnapshotStore | None = None,
    ) -> None:
        self.root = Path(root)
        #: where the snapshots are kept (files under ``root`` unless another store is given)
        self.snapshots: SnapshotStore = snapshots if snapshots is not None else FileSnapshots(self.root)
        self._store = store
        self.llm = llm
        self.embedder = embedder
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.extraction_concurrency = extraction_concurrency
        self._loaded: dict[uuid.UUID, _Loaded] = {}
        self._locks: dict[uuid.UUID, asyncio.Lock] = {}

    # -- reading ---------------------------------------------------------------------
    async def graph(self, dataset_id: uuid.UUID) -> KnowledgeGraph:
        """The dataset's current graph (empty when nothing was cognified). Do not mutate it."""
        return (await self._current(dataset_id)).graph

    async def vectors(self, dataset_id: uuid.UUID) -> VectorStore:
        """The dataset's current vector store. Do not mutate it."""
        return (await self._current(dataset_id)).vectors

    async def snapshot_token(self, dataset_id: uuid.UUID) -> str | None:
        """An id of the dataset's committed snapshot (None before the first cognify or after the dataset was forgotten).

        It changes whenever remember / forget replace the snapshot (also when a
        forgotten dataset is rebuilt), so derived indexes key on it.
        """
        return await self.snapshots.token(dataset_id)

    async def derived(self, dataset_id: uuid.UUID, kind: str, build: Callable[[KnowledgeGraph], T]) -> tuple[KnowledgeGraph, T]:
        """``(graph, index)``: the dataset's current graph and ``build(graph)``, reused while the snapshot is unchanged.

        The index is kept with the loaded graph under ``kind`` and the snapshot
        token it was built at. A remember / forget in this process changes the
        token; a write by another process, or a dataset forgotten and rebuilt,
        hands out a new graph object (with no indexes); either way the index is
        rebuilt on the next call. The index is filed under the token the graph
        was checked against (``loaded.token``, read by :meth:`_current`), so an
        index is never older than its token and one read of the token serves
        both. ``build`` runs on the event loop (the graph is mutated there, so
        reading it from a thread would race).
        """
        return _derive(await self._current(dataset_id), kind, build)

    async def search(self, dataset_id: uuid.UUID, collection: str, query_text: str, top_k: int) -> list[tuple[str, float]]:
        """The ``top_k`` ids of ``collection`` nearest ``query_text`` as ``(id, distance)``, nearest first."""
        return await _search(await self._current(dataset_id), self.embedder, collection, query_text, top_k)

    def pinned(self) -> "PinnedMemory":
        """A read view that checks each dataset's committed snapshot once (:class:`PinnedMemory`): one per search call."""
        return PinnedMemory(self)

    # -- writing ---------------------------------------------------------------------
    async def remember(self, dataset: Dataset, documents: Sequence[Document], *, tags: Sequence[str] = (), progress: bool | None = None) -> RememberResult:
        """Add the documents new to ``dataset`` and cognify them; known content is not redone."""
        known = await self._store.data.known_hashes(dataset.id, [document.content_hash for document in documents])
        data_ids: list[str] = []
        new_docs: dict[str, Document] = {}
        for document in documents:
            data_id = known.get(document.content_hash) or str(data_id_for(dataset.id, document.content_hash))
            data_ids.append(data_id)
            if document.content_hash not in known:
                new_docs.setdefault(data_id, document)
        add_run = await self._store.runs.start(dataset.id, ADD_PIPELINE, len(documents))
        await self._store.runs.finish(add_run.id, "completed")
        run = await self._store.runs.start(dataset.id, COGNIFY_PIPELINE, len(new_docs))
        stats: dict[str, Any] = {"usage": {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0}, "timings_s": {}}
        try:
            chunks, node_ids, edge_ids = await self._cognify(dataset, list(new_docs.items()), tags, progress, stats)
        except BaseException as exc:
            await self._store.runs.finish(run.id, "errored", error_class=type(exc).__name__, error_message=scrub_error_message(str(exc)))
            raise
        await self._store.runs.finish(run.id, "completed")
        return RememberResult(
            status="completed",
            dataset_id=dataset.id,
            data_ids=data_ids,
            new_data_ids=list(new_docs),
            chunk_count=chunks,
            node_count=len(node_ids),
            edge_count=len(edge_ids),
            pipeline_run_id=run.id,
            usage=stats["usage"],
            timings_s=stats["timings_s"],
        )

    async def _cognify(self, dataset: Dataset, docs: list[tuple[str, Document]], tags: Sequence[str], progress: bool | None, stats: dict):
        if not docs:
            return 0, set(), set()
        clock = time.perf_counter
        started = clock()
        await asyncio.gather(self.llm.prepare(), self.embedder.prepare())  # one-off imports and model load, timed apart
        prepared = clock()
        stats["timings_s"]["startup"] = prepared - started
        started = prepared
        extracted, stats["usage"] = await _pipeline.extract(
            docs,
            self.llm,
            chunk_size=self.chunk_size,
            overlap=self.chunk_overlap,
            concurrency=self.extraction_concurrency,
            tags=tags,
            progress=progress,
        )
        delta = _pipeline.build_delta(str(dataset.id), extracted)
        stats["timings_s"]["extract"] = (embedding := clock()) - started
        embedded = await _pipeline.embed_delta(delta, self.embedder)
        stats["timings_s"]["embed"] = (writing := clock()) - embedding
        rows = [
            (uuid.UUID(data_id), document.name, document.source, document.extension, document.content_hash, document.size_bytes, document.text)
            for data_id, document in docs
        ]

        def change(loaded: _Loaded):
            return _pipeline.apply_delta(loaded.graph, loaded.vectors, delta, embedded)

        node_ids, edge_ids = await self._write(dataset.id, change)
        try:
            await self._store.data.add(dataset.id, rows, tags)
        except BaseException:  # the graph names documents that were not recorded: take them out again
            await self._write(dataset.id, lambda loaded: [_drop_document(loaded, data_id) for data_id, _ in docs])
            raise
        stats["timings_s"]["write"] = clock() - writing
        return delta.chunk_count, node_ids, edge_ids

    async def forget_data(self, dataset: Dataset, data_id: Any, *, dry_run: bool = False) -> ForgetEvent:
        """Remove one document: its record, and the graph elements no other document supports; returns what went.

        Only permanent memory changes here (graph, vectors, the ``data`` row); the
        sessions are cleaned by the caller (:class:`~memlab.flows.forget.ForgetFlow`).
        ``dry_run``: change nothing; the event says what would go.
        """
        try:
            key = uuid.UUID(str(data_id))
        except ValueError:
            from memlab.exceptions import ValidationError

            raise ValidationError(f"data_id must be a UUID, got {data_id!r}") from None
        if await self._store.data.get(dataset.id, key) is None:
            from memlab.exceptions import NotFoundError

            raise NotFoundError(f"dataset {dataset.id} has no document {key}", what="document")
        if dry_run:
            removal = (await self._current(dataset.id)).graph.removal_of(str(key))
        else:
            removal = await self._write(dataset.id, lambda loaded: _drop_document(loaded, str(key)))
            await self._store.data.delete(dataset.id, [key])
        return _removed(dataset.id, {str(key)}, removal, whole=False, dry_run=dry_run)

    async def forget_dataset(self, dataset: Dataset, *, keep_dataset: bool, keep_data: bool, dry_run: bool = False) -> ForgetEvent:
        """Remove the dataset's whole graph; its documents unless ``keep_data``; the dataset unless ``keep_dataset``; returns what went.

        Only permanent memory changes here; the sessions are cleaned by the caller
        (:class:`~memlab.flows.forget.ForgetFlow`). ``dry_run``: change nothing; the
        event says what would go.
        """
        records = await self._store.data.of_dataset(dataset.id)
        if dry_run:
            view = (await self._current(dataset.id)).graph.nx
            removal = GraphRemoval(node_ids=frozenset(view.nodes), edge_ids=frozenset(key for _, _, key in view.edges(keys=True)))
        else:
            async with self._exclusive(dataset.id):
                loaded = await self._load(dataset.id)
                view = loaded.graph.nx
                removal = GraphRemoval(node_ids=frozenset(view.nodes), edge_ids=frozenset(key for _, _, key in view.edges(keys=True)))
                self._loaded.pop(dataset.id, None)
                await self.snapshots.delete(dataset.id)
        data_ids = set() if keep_data else {str(record.id) for record in records}
        if not dry_run and not keep_dataset:
            await self._store.datasets.delete(dataset.id)
        elif not dry_run and data_ids:
            await self._store.data.delete(dataset.id, [record.id for record in records])
        return _removed(dataset.id, data_ids, removal, whole=True, dry_run=dry_run)

    # -- state -----------------------------------------------------------------------
    async def _current(self, dataset_id: uuid.UUID) -> _Loaded:
        loaded = self._loaded.get(dataset_id)
        if loaded is not None and loaded.token == await self.snapshots.token(dataset_id):
            return loaded
        async with self._lock(dataset_id):
            return await self._load(dataset_id)

    async def _load(self, dataset_id: uuid.UUID) -> _Loaded:
        loaded = self._loaded.get(dataset_id)
        if loaded is not None and loaded.token == await self.snapshots.token(dataset_id):
            return loaded
        found = await self.snapshots.load(dataset_id)
        if found is None:
            loaded = _Loaded(None, KnowledgeGraph(), VectorStore(self.embedder.dim, space=self.embedder.name))
        else:
            token, (graph, vectors, _meta) = found
            loaded = _Loaded(token, graph, vectors)
        self._loaded[dataset_id] = loaded
        return loaded

    def _lock(self, dataset_id: uuid.UUID) -> asyncio.Lock:
        return self._locks.setdefault(dataset_id, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def _exclusive(self, dataset_id: uuid.UUID):
        """This process's lock, then the store's cross-process writer lock, on one dataset."""
        async with self._lock(dataset_id), self.snapshots.writer(dataset_id):
            yield

    async def _write(self, dataset_id: uuid.UUID, change: Callable[[_Loaded], Any]) -> Any:
        """Apply ``change`` to the freshest state and save it; on failure the old snapshot stays.

        When another process committed in between (a shared store), the change is
        applied again to the newer snapshot, at most :data:`WRITE_ATTEMPTS` times.
        """
        async with self._exclusive(dataset_id):
            for _ in range(WRITE_ATTEMPTS):
                loaded = await self._load(dataset_id)
                try:
                    result = change(loaded)
                    token = await self.snapshots.save(
                        dataset_id, loaded.graph, loaded.vectors, {"embedder": self.embedder.name}, expected=loaded.token
                    )
                except SnapshotConflict:
                    self._loaded.pop(dataset_id, None)  # reload the other writer's version and apply the change to it
                    continue
                except BaseException:
                    self._loaded.pop(dataset_id, None)  # half-applied: reload from the store next time
                    raise
                loaded.token = token
                return result
        raise BackendError(f"dataset {dataset_id}: {WRITE_ATTEMPTS} writes in a row lost to other writers of {self.snapshots.where}")
