"""Graph elements named by id (in a turn's lanes or ``used_graph_element_ids``) resolved to text and documents."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memlab.exceptions import MemlabError
from memlab.widgets import _html as h


@dataclass(frozen=True)
class Element:
    """One graph node or edge as the explorers show it; ``kind`` "unknown" when no graph holds the id any more."""

    id: str
    kind: str
    text: str
    documents: list[str] = field(default_factory=list)


class ElementLookup:
    """Resolves element ids through the graphs of a dataset (or of every dataset ``user`` may read).

    Built by :meth:`load`; ``documents`` are document names (ids when a name is unknown).
    """

    def __init__(self, graphs: list[Any], names: dict[str, str]) -> None:
        self._graphs = graphs
        self._names = names
        self._resolved: dict[str, Element] = {}  # each id read from the graphs once (lanes and re-renders repeat ids)

    @classmethod
    async def load(cls, stack: Any, user: Any, dataset_id: uuid.UUID | None) -> "ElementLookup":
        if dataset_id is not None:
            dataset_ids = [dataset_id]
        else:
            dataset_ids = [dataset.id for dataset in await stack.datasets.list(user, "read")]
        graphs, names = [], {}
        for target in dataset_ids:
            try:
                graphs.append(await stack.memory.graph(target))
                names.update({str(record.id): record.name for record in await stack.datasets.list_data(target, user)})
            except MemlabError:  # a dataset gone or not readable by this user: its elements read as unknown
                continue
        return cls(graphs, names)

    def __call__(self, element_id: str) -> Element:
        found = self._resolved.get(element_id)
        if found is None:
            found = self._resolved[element_id] = self._resolve(element_id)
        return found

    def _resolve(self, element_id: str) -> Element:
        for graph in self._graphs:
            node = graph.node(element_id)
            if node is not None:
                text = node.get("text") or node.get("name") or ""
                return Element(element_id, str(node.get("type") or "node"), str(text), self._documents(node))
            edge = graph.edge(element_id)
            if edge is not None:
                kind = f"edge: {edge.get('relation')}" if edge.get("relation") else "edge"
                return Element(element_id, kind, str(edge.get("text") or ""), self._documents(edge))
        return Element(element_id, "unknown", "(not in the graph any more)")

    def _documents(self, found: Mapping[str, Any]) -> list[str]:
        """The names of the documents supporting a node or edge dict (it carries its ``supporters``)."""
        return [self._names.get(data_id, data_id) for data_id in sorted(found["supporters"])]


def element_cells(lookup: ElementLookup | None, element_id: str, limit: int) -> list[str]:
    """The rendered ``kind``, ``text`` (cut to ``limit``) and ``documents`` cells of an element (dashes without a lookup)."""
    element = lookup(element_id) if lookup is not None else None
    if element is None:
        return [h.MISSING] * 3
    return [h.esc(element.kind), h.snippet(element.text, limit), h.esc(", ".join(element.documents) if element.documents else None)]
