"""Graph elements named by id (in a turn's lanes or ``used_graph_element_ids``) resolved to text and documents."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from memlab.exceptions import MemlabError


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
        for graph in self._graphs:
            found = graph.node(element_id)
            if found is not None:
                text = found.get("text") or found.get("name") or ""
                return Element(element_id, str(found.get("type") or "node"), str(text), self._documents(graph, element_id))
            found = graph.edge(element_id)
            if found is not None:
                kind = f"edge: {found.get('relation')}" if found.get("relation") else "edge"
                return Element(element_id, kind, str(found.get("text") or ""), self._documents(graph, element_id))
        return Element(element_id, "unknown", "(not in the graph any more)")

    def _documents(self, graph: Any, element_id: str) -> list[str]:
        return [self._names.get(data_id, data_id) for data_id in sorted(graph.supporters(element_id))]
