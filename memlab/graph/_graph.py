"""``KnowledgeGraph``: a networkx ``MultiDiGraph`` of entities and relations, with provenance.

Every node and edge (an *element*) carries a set of *supporters*: the ids of
the documents (``data_id``) it was extracted from. Provenance contract:

* ``add_node`` / ``add_edge`` add ``data_id`` to the element's supporters,
  creating the element on first sight. An edge's ``data_id`` is added to both
  endpoints too, so an edge's supporters are always a subset of each
  endpoint's: an edge never outlives an endpoint.
* ``remove_data(data_id)`` drops ``data_id`` everywhere; exactly the elements
  left without supporters are deleted and reported (the edges incident to a
  deleted node are among them, by the subset rule). An inverted index
  ``data_id -> element ids`` makes the cost proportional to what the document
  touched, not to the graph.
* Node ids are chosen by the caller (``node_id(kind, key, namespace)`` gives
  deterministic ones); an edge's id is ``edge_id(source, relation, target)``,
  so the same fact extracted from two documents is one edge with two supporters.

Pure and synchronous; not thread-safe (one writer at a time, the caller
serialises). Attribute values must be JSON values (str, int, float, bool,
None, lists and str-keyed dicts of them) so :meth:`KnowledgeGraph.to_dict`
round-trips exactly.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import networkx as nx

from memlab.exceptions import ValidationError

T = TypeVar("T")

__all__ = ["GraphRemoval", "KnowledgeGraph", "edge_id", "node_id", "stable_id"]

#: uuid5 namespace of every id memlab.graph derives
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://memlab/graph")
#: version of the :meth:`KnowledgeGraph.to_dict` layout
GRAPH_FORMAT = 1

_NODE_FIELDS = frozenset({"id", "type", "name", "text", "supporters"})
_EDGE_FIELDS = frozenset({"id", "source", "target", "relation", "text", "supporters"})


def stable_id(*parts: str) -> str:
    """A uuid5 string determined by ``parts`` (an unambiguous encoding: ``("a", "bc") != ("ab", "c")``)."""
    if not parts:
        raise ValidationError("stable_id needs at least one part")
    for index, part in enumerate(parts):
        if not isinstance(part, str):
            raise ValidationError(f"stable_id part {index} must be a str, got {part!r}")
    return str(uuid.uuid5(ID_NAMESPACE, json.dumps(parts, ensure_ascii=False)))


def node_id(kind: str, key: str, namespace: str) -> str:
    """Deterministic node id of ``key`` (already normalised by the caller) of ``kind`` within ``namespace``.

    Example: ``node_id("entity", "alice", dataset_id)``; the same three strings
    always give the same id.
    """
    return stable_id("node", _text("kind", kind), _text("key", key), _text("namespace", namespace))


def edge_id(source: str, relation: str, target: str) -> str:
    """The id of the edge ``source -[relation]-> target`` (what :meth:`KnowledgeGraph.add_edge` returns)."""
    return stable_id("edge", _text("source", source), _text("relation", relation), _text("target", target))


@dataclass(frozen=True)
class GraphRemoval:
    """What a removal deleted from the graph."""

    node_ids: frozenset[str]
    edge_ids: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.node_ids or self.edge_ids)


class KnowledgeGraph:
    """A directed multigraph of typed nodes and relation edges, each supported by documents."""

    def __init__(self) -> None:
        self._g = nx.MultiDiGraph()
        self._ends: dict[str, tuple[str, str]] = {}  # edge id -> (source, target), insertion ordered
        self._supporters: dict[str, set[str]] = {}  # element id -> data ids
        self._by_data: dict[str, set[str]] = {}  # data id -> element ids
        self._version = 0  # bumped by every change: what memo() keys on
        self._memos: dict[str, tuple[int, Any]] = {}

    # --- writes -------------------------------------------------------------------

    def add_node(self, node_id: str, *, type: str, name: str, text: str = "", data_id: str, **attrs: Any) -> None:
        """Create node ``node_id`` supported by ``data_id``, or add ``data_id`` to an existing node.

        On an existing node, attributes already set keep their value; attribute
        keys new to the node are added, and an empty ``text`` is filled by a
        non-empty one. ``attrs`` must not use the names ``id`` or ``supporters``.
        """
        _text("node_id", node_id)
        _text("type", type)
        _check_str("name", name)
        _check_str("text", text)
        _text("data_id", data_id)
        _check_attrs(attrs, _NODE_FIELDS)
        if node_id in self._ends:
            raise ValidationError(f"node id {node_id!r} is already an edge id")
        if node_id in self._g:
            data = self._g.nodes[node_id]
            if not data["text"] and text:
                data["text"] = text
            for key, value in attrs.items():
                data.setdefault(key, value)
        else:
            self._g.add_node(node_id, type=type, name=name, text=text, **attrs)
        self._support(node_id, data_id)

    def add_edge(self, source_id: str, relation: str, target_id: str, *, data_id: str, text: str = "", **attrs: Any) -> str:
        """Add the edge ``source_id -[relation]-> target_id`` supported by ``data_id``; return its id.

        Both endpoints must exist (else :class:`~memlab.ValidationError` naming
        the missing id); ``data_id`` is added to their supporters as well. The
        same edge again adds a supporter; its attributes merge as in
        :meth:`add_node`. ``attrs`` must not use ``id``, ``source``, ``target``,
        ``relation`` or ``supporters``.
        """
        _text("source_id", source_id)
        _text("relation", relation)
        _text("target_id", target_id)
        _text("data_id", data_id)
        _check_str("text", text)
        _check_attrs(attrs, _EDGE_FIELDS)
        for end in (source_id, target_id):
            if end not in self._g:
                raise ValidationError(f"edge endpoint {end!r} is not a node of the graph")
        eid = edge_id(source_id, relation, target_id)
        if eid in self._ends:
            data = self._g.edges[source_id, target_id, eid]
            if not data["text"] and text:
                data["text"] = text
            for key, value in attrs.items():
                data.setdefault(key, value)
        else:
            self._g.add_edge(source_id, target_id, key=eid, relation=relation, text=text, **attrs)
            self._ends[eid] = (source_id, target_id)
        self._support(eid, data_id)
        self._support(source_id, data_id)
        self._support(target_id, data_id)
        return eid

    def remove_data(self, data_id: str) -> GraphRemoval:
        """Withdraw ``data_id``'s support everywhere; delete and report the elements left unsupported.

        Cost is proportional to the number of elements ``data_id`` supports.
        An unknown ``data_id`` removes nothing.
        """
        _text("data_id", data_id)
        self._version += 1
        touched = self._by_data.pop(data_id, set())
        dead: set[str] = set()
        for element in touched:
            supporters = self._supporters[element]
            supporters.discard(data_id)
            if not supporters:
                dead.add(element)
        # An edge's supporters are a subset of each endpoint's, so every edge
        # incident to a dead node is dead too: edges go first, then nodes.
        dead_edges = {element for element in dead if element in self._ends}
        dead_nodes = dead - dead_edges
        for eid in dead_edges:
            source, target = self._ends.pop(eid)
            self._g.remove_edge(source, target, key=eid)
            self._unsupport(eid)
        for node in dead_nodes:
            self._g.remove_node(node)
            self._unsupport(node)
        return GraphRemoval(node_ids=frozenset(dead_nodes), edge_ids=frozenset(dead_edges))

    def removal_of(self, data_id: str) -> GraphRemoval:
        """What :meth:`remove_data` would delete for ``data_id``, without changing anything."""
        _text("data_id", data_id)
        dead = {element for element in self._by_data.get(data_id, ()) if self._supporters[element] == {data_id}}
        edges = {element for element in dead if element in self._ends}
        return GraphRemoval(node_ids=frozenset(dead - edges), edge_ids=frozenset(edges))

    def remove_all(self) -> GraphRemoval:
        """Delete every element; report them all."""
        removal = GraphRemoval(node_ids=frozenset(self._g.nodes), edge_ids=frozenset(self._ends))
        self._version += 1
        self._g.clear()
        self._ends.clear()
        self._supporters.clear()
        self._by_data.clear()
        return removal

    # --- reads --------------------------------------------------------------------

    def memo(self, kind: str, build: Callable[["KnowledgeGraph"], T]) -> T:
        """``build(self)``, kept under ``kind`` and reused until the graph next changes (any add or removal).

        For read-side indexes a reader fills as it goes (e.g. a dict built empty and
        filled per element): they are dropped at the first change, so never stale.
        """
        found = self._memos.get(kind)
        if found is None or found[0] != self._version:
            found = self._memos[kind] = (self._version, build(self))
        return found[1]

    def supporters(self, element_id: str) -> frozenset[str]:
        """The data ids supporting a node or edge; empty when there is no such element."""
        return frozenset(self._supporters.get(element_id, ()))

    def has_element(self, element_id: str) -> bool:
        """True when ``element_id`` is a node or an edge of the graph."""
        return element_id in self._supporters

    def node(self, node_id: str) -> dict[str, Any] | None:
        """A copy of the node's attributes plus ``id`` and ``supporters`` (a frozenset), or None."""
        if node_id not in self._g:
            return None
        return self._node_dict(node_id, self._g.nodes[node_id])

    def edge(self, edge_id: str) -> dict[str, Any] | None:
        """A copy of the edge's attributes plus ``id``, ``source``, ``target``, ``relation``, ``supporters``; or None."""
        ends = self._ends.get(edge_id)
        if ends is None:
            return None
        return self._edge_dict(edge_id, ends, self._g.edges[ends[0], ends[1], edge_id])

    def nodes(self, type: str | None = None) -> Iterator[dict[str, Any]]:
        """Node dicts (as :meth:`node`) in insertion order, only those of ``type`` when given."""
        for nid, data in self._g.nodes(data=True):
            if type is None or data["type"] == type:
                yield self._node_dict(nid, data)

    def edges(self) -> Iterator[dict[str, Any]]:
        """Edge dicts (as :meth:`edge`) in insertion order."""
        for eid, ends in self._ends.items():
            yield self._edge_dict(eid, ends, self._g.edges[ends[0], ends[1], eid])

    def neighbors(self, node_id: str) -> list[str]:
        """Ids of the nodes joined to ``node_id`` by an edge in either direction (no duplicates)."""
        if node_id not in self._g:
            raise ValidationError(f"node {node_id!r} is not in the graph")
        return list(dict.fromkeys([*self._g.successors(node_id), *self._g.predecessors(node_id)]))

    def number_of_nodes(self) -> int:
        return self._g.number_of_nodes()

    def number_of_edges(self) -> int:
        return len(self._ends)

    def data_ids(self) -> frozenset[str]:
        """Every data id that supports at least one element."""
        return frozenset(self._by_data)

    def subgraph(self, node_ids: Iterable[str]) -> nx.MultiDiGraph:
        """An independent copy of the subgraph induced by ``node_ids`` (ids not in the graph are ignored), for drawing."""
        if isinstance(node_ids, str):
            raise ValidationError("node_ids must be an iterable of ids, not a single str")
        return self._g.subgraph([n for n in node_ids if n in self._g]).copy()

    @property
    def nx(self) -> nx.MultiDiGraph:
        """The underlying graph as a read-only view (edge keys are edge ids; supporters not included)."""
        return self._g.copy(as_view=True)

    def __repr__(self) -> str:
        return f"KnowledgeGraph(nodes={self.number_of_nodes()}, edges={self.number_of_edges()}, data_ids={len(self._by_data)})"

    # --- serialisation ------------------------------------------------------------

    def to_dict(self, *, copy: bool = True) -> dict[str, Any]:
        """A JSON-safe dict of the whole graph (supporters as sorted lists); :meth:`from_dict` inverts it exactly.

        ``copy=False`` skips the deep copy of attribute values: the result then
        shares lists and dicts with the graph and must only be read (serialised)
        before the graph changes again; snapshots use it.
        """
        clone = _copy_json if copy else _same
        nodes = [
            {
                "id": nid,
                "type": data["type"],
                "name": data["name"],
                "text": data["text"],
                "attrs": clone({k: v for k, v in data.items() if k not in _NODE_FIELDS}),
                "supporters": sorted(self._supporters[nid]),
            }
            for nid, data in self._g.nodes(data=True)
        ]
        edges = [
            {
                "id": eid,
                "source": source,
                "relation": data["relation"],
                "target": target,
                "text": data["text"],
                "attrs": clone({k: v for k, v in data.items() if k not in _EDGE_FIELDS}),
                "supporters": sorted(self._supporters[eid]),
            }
            for eid, (source, target) in self._ends.items()
            for data in (self._g.edges[source, target, eid],)
        ]
        return {"format": GRAPH_FORMAT, "nodes": nodes, "edges": edges}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KnowledgeGraph:
        """The graph :meth:`to_dict` described; :class:`~memlab.ValidationError` on any malformed part."""
        if not isinstance(data, Mapping) or data.get("format") != GRAPH_FORMAT:
            raise ValidationError(f"not a memlab graph dict of format {GRAPH_FORMAT}")
        graph = cls()
        try:
            for item in data["nodes"]:
                first, *others = _supporter_list(item)
                graph.add_node(item["id"], type=item["type"], name=item["name"], text=item["text"], data_id=first, **item["attrs"])
                graph._support_also(others, item["id"])
            for item in data["edges"]:
                first, *others = _supporter_list(item)
                before = {end: graph.supporters(end) for end in (item["source"], item["target"])}
                eid = graph.add_edge(item["source"], item["relation"], item["target"], data_id=first, text=item["text"], **item["attrs"])
                graph._support_also(others, eid, item["source"], item["target"])
                if eid != item["id"]:
                    raise ValidationError(f"edge {item['id']!r} does not match its endpoints and relation")
                if any(graph.supporters(end) != support for end, support in before.items()):
                    raise ValidationError(f"edge {eid!r} has supporters its endpoints lack")
        except (KeyError, TypeError) as exc:
            raise ValidationError(f"malformed graph dict: {type(exc).__name__}: {exc}") from exc
        return graph

    # --- internals ----------------------------------------------------------------

    def _support(self, element: str, data_id: str) -> None:
        self._version += 1
        self._supporters.setdefault(element, set()).add(data_id)
        self._by_data.setdefault(data_id, set()).add(element)

    def _support_also(self, data_ids: Iterable[str], *elements: str) -> None:
        """Add more supporters to existing ``elements``, as repeated add_node / add_edge calls would."""
        for data_id in data_ids:
            _text("data_id", data_id)
            for element in elements:
                self._support(element, data_id)

    def _unsupport(self, element: str) -> None:
        for data_id in self._supporters.pop(element):
            elements = self._by_data[data_id]
            elements.discard(element)
            if not elements:
                del self._by_data[data_id]

    def _node_dict(self, nid: str, data: Mapping[str, Any]) -> dict[str, Any]:
        return {**_copy_json(dict(data)), "id": nid, "supporters": frozenset(self._supporters[nid])}

    def _edge_dict(self, eid: str, ends: tuple[str, str], data: Mapping[str, Any]) -> dict[str, Any]:
        out = _copy_json(dict(data))
        out.update(id=eid, source=ends[0], target=ends[1], supporters=frozenset(self._supporters[eid]))
        return out


def _check_str(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a str, got {value!r}")
    return value


def _text(what: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty str, got {value!r}")
    return value


def _check_attrs(attrs: Mapping[str, Any], reserved: frozenset[str]) -> None:
    for key, value in attrs.items():
        if key in reserved:
            raise ValidationError(f"attribute name {key!r} is reserved")
        _check_json(key, value)


def _check_json(path: str, value: object) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"attribute {path!r} must be finite, got {value!r}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(f"{path}[{index}]", item)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"attribute {path!r} has a non-str key {key!r}")
            _check_json(f"{path}.{key}", item)
        return
    raise ValidationError(f"attribute {path!r} must be a JSON value (str, number, bool, None, list, dict), got {type(value).__name__}")


def _same(value: Any) -> Any:
    return value


def _copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (callers must not reach the graph's own lists and dicts)."""
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    return value


def _supporter_list(item: Mapping[str, Any]) -> list[str]:
    supporters = item["supporters"]
    if not isinstance(supporters, list) or not supporters:
        raise ValidationError(f"element {item.get('id')!r} must have a non-empty supporters list")
    return supporters
