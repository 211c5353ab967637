"""Permanent memory: documents, chunking, extraction, the knowledge graph, vectors, snapshots.

``import memlab.graph`` is light: every name below resolves on first access
(module ``__getattr__``), so networkx, numpy and faiss load only when a graph,
vector index or snapshot is actually used.
"""

from __future__ import annotations

from memlab._imports import lazy_getattr as _lazy_getattr

_LAZY: dict[str, str] = {
    # --- storage layer: graph + provenance, vector index, snapshots (owner: storage) ---
    "GraphRemoval": "memlab.graph._graph",
    "KnowledgeGraph": "memlab.graph._graph",
    "edge_id": "memlab.graph._graph",
    "node_id": "memlab.graph._graph",
    "stable_id": "memlab.graph._graph",
    "VectorIndex": "memlab.graph._vectors",
    "VectorStore": "memlab.graph._vectors",
    "delete_snapshot": "memlab.graph._snapshot",
    "load_snapshot": "memlab.graph._snapshot",
    "save_snapshot": "memlab.graph._snapshot",
    "FileSnapshots": "memlab.graph._snapshot_store",
    "PostgresSnapshots": "memlab.graph._snapshot_store",
    "SnapshotStore": "memlab.graph._snapshot_store",
    "vector_search_latency": "memlab.graph._vector_bench",
    # --- end storage layer ---
    "chunk_text": "memlab.graph._chunking",
    "Document": "memlab.graph._documents",
    "load_documents": "memlab.graph._documents",
    "PermanentMemory": "memlab.graph._memory",
    "data_id_for": "memlab.graph._memory",
    "draw_neighborhood": "memlab.graph._draw",
    "neighborhood": "memlab.graph._draw",
}

__all__ = sorted(_LAZY)

__getattr__ = _lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
