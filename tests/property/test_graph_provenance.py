"""Provenance of KnowledgeGraph against a set model, under random document adds and removals.

Documents draw nodes and edges from a small shared pool, so they overlap. The
model is ``doc -> element ids the document supports`` (its nodes, its edges and
their endpoints). After every step: the graph holds exactly the elements some
surviving document supports, with exactly those supporters; a removal reports
exactly the elements that disappeared; ``to_dict``/``from_dict`` round-trips.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memlab.graph import GraphRemoval, KnowledgeGraph, edge_id

NODES = [f"n{i}" for i in range(6)]
RELATIONS = ["r0", "r1"]
DOCS = [f"d{i}" for i in range(5)]

_edge = st.tuples(st.sampled_from(NODES), st.sampled_from(RELATIONS), st.sampled_from(NODES))


class GraphProvenanceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.graph = KnowledgeGraph()
        self.model: dict[str, set[str]] = {}  # data id -> element ids it supports

    def _alive(self) -> set[str]:
        return set().union(*self.model.values())

    @rule(doc=st.sampled_from(DOCS), nodes=st.lists(st.sampled_from(NODES), min_size=1, max_size=4), edges=st.lists(_edge, max_size=5))
    def add_document(self, doc: str, nodes: list[str], edges: list[tuple[str, str, str]]) -> None:
        supported = self.model.setdefault(doc, set())
        for node in nodes:
            self.graph.add_node(node, type="Entity", name=node.upper(), data_id=doc)
            supported.add(node)
        for source, relation, target in edges:
            if self.graph.has_element(source) and self.graph.has_element(target):
                eid = self.graph.add_edge(source, relation, target, data_id=doc)
                assert eid == edge_id(source, relation, target)
                supported.update((eid, source, target))

    @rule(doc=st.sampled_from(DOCS))
    def remove_document(self, doc: str) -> None:
        before = self._alive()
        self.model.pop(doc, None)
        gone = before - self._alive()
        removal = self.graph.remove_data(doc)
        assert removal.node_ids | removal.edge_ids == gone
        assert removal.node_ids <= set(NODES) and not removal.edge_ids & set(NODES)

    @rule()
    def remove_everything(self) -> None:
        alive = self._alive()
        removal = self.graph.remove_all()
        self.model.clear()
        assert isinstance(removal, GraphRemoval) and removal.node_ids | removal.edge_ids == alive

    @invariant()
    def elements_match_surviving_documents(self) -> None:
        alive = self._alive()
        present = {n["id"] for n in self.graph.nodes()} | {e["id"] for e in self.graph.edges()}
        assert present == alive
        for element in alive:
            assert self.graph.supporters(element) == {doc for doc, elements in self.model.items() if element in elements}
        assert self.graph.data_ids() == set(self.model)
        for edge in self.graph.edges():  # an edge never outlives an endpoint
            assert edge["supporters"] <= self.graph.supporters(edge["source"])
            assert edge["supporters"] <= self.graph.supporters(edge["target"])

    @invariant()
    def round_trip_is_exact(self) -> None:
        data = self.graph.to_dict()
        assert KnowledgeGraph.from_dict(data).to_dict() == data


TestGraphProvenance = GraphProvenanceMachine.TestCase
