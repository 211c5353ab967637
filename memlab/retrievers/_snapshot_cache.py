"""Indexes derived from one dataset snapshot (the lexical index, the date index), built once per snapshot.

An index is cached on the dataset's loaded graph object (weakly: it goes with
the graph) under the snapshot token (:meth:`PermanentMemory.snapshot_token`)
it was built at. A remember / forget in this process changes the token; a
write by another process, or a dataset forgotten and rebuilt, makes
``memory.graph()`` hand out a new graph object; either way the index is
rebuilt on the next call. The token is read *before* the graph, so a cached
index is never older than the token it is filed under.

Building runs on the event loop (the graph is mutated there, so reading it
from a thread would race) and is linear in the graph's size.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["snapshot_index"]

T = TypeVar("T")

_CACHE: weakref.WeakKeyDictionary[Any, dict[str, tuple[str | None, Any]]] = weakref.WeakKeyDictionary()


async def snapshot_index(memory: Any, dataset_id: uuid.UUID, kind: str, build: Callable[[Any], T]) -> tuple[Any, T]:
    """``(graph, index)``: the dataset's current graph and ``build(graph)``, reused while the snapshot is unchanged."""
    token = memory.snapshot_token(dataset_id)
    graph = await memory.graph(dataset_id)
    per_graph = _CACHE.setdefault(graph, {})
    cached = per_graph.get(kind)
    if cached is None or cached[0] != token:
        cached = (token, build(graph))
        per_graph[kind] = cached
    return graph, cached[1]
