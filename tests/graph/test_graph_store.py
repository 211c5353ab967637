"""KnowledgeGraph: elements, provenance, removal by document, serialisation."""

from __future__ import annotations

import json

import networkx as nx
import pytest

from memlab import ValidationError
from memlab.graph import GraphRemoval, KnowledgeGraph, edge_id, node_id, stable_id


def _people() -> KnowledgeGraph:
    graph = KnowledgeGraph()
    graph.add_node("alice", type="Person", name="Alice", text="Alice lives in Paris.", data_id="d1", age=31)
    graph.add_node("paris", type="City", name="Paris", data_id="d1")
    graph.add_edge("alice", "lives_in", "paris", data_id="d1", text="Alice lives in Paris.")
    return graph


def test_ids_are_stable_uuid5_strings_and_unambiguous() -> None:
    assert stable_id("a", "b") == stable_id("a", "b")
    assert stable_id("a", "bc") != stable_id("ab", "c")
    assert node_id("entity", "alice", "ds1") == node_id("entity", "alice", "ds1")
    assert node_id("entity", "alice", "ds1") != node_id("entity", "alice", "ds2")
    assert node_id("entity", "alice", "ds1") != node_id("chunk", "alice", "ds1")
    assert edge_id("a", "r", "b") != edge_id("b", "r", "a")
    assert len(edge_id("a", "r", "b")) == 36


@pytest.mark.parametrize("parts", [(), ("a", 1)])
def test_stable_id_refuses_bad_parts(parts) -> None:
    with pytest.raises(ValidationError):
        stable_id(*parts)


def test_add_node_and_edge() -> None:
    graph = _people()
    eid = edge_id("alice", "lives_in", "paris")
    assert graph.number_of_nodes() == 2 and graph.number_of_edges() == 1
    assert graph.node("alice") == {
        "id": "alice",
        "type": "Person",
        "name": "Alice",
        "text": "Alice lives in Paris.",
        "age": 31,
        "supporters": frozenset({"d1"}),
    }
    assert graph.edge(eid) == {
        "id": eid,
        "source": "alice",
        "target": "paris",
        "relation": "lives_in",
        "text": "Alice lives in Paris.",
        "supporters": frozenset({"d1"}),
    }
    assert graph.has_element("alice") and graph.has_element(eid) and not graph.has_element("bob")
    assert graph.node("bob") is None and graph.edge("nope") is None
    assert graph.supporters("bob") == frozenset()
    assert graph.neighbors("alice") == ["paris"] and graph.neighbors("paris") == ["alice"]
    assert [n["id"] for n in graph.nodes(type="City")] == ["paris"]
    assert [e["id"] for e in graph.edges()] == [eid]
    assert graph.data_ids() == frozenset({"d1"})


def test_same_node_again_adds_a_supporter_and_keeps_attributes() -> None:
    graph = _people()
    graph.add_node("alice", type="Robot", name="ALICE", text="other", data_id="d2", age=99, city="Paris")
    node = graph.node("alice")
    assert node["supporters"] == frozenset({"d1", "d2"})
    assert (node["type"], node["name"], node["text"], node["age"], node["city"]) == ("Person", "Alice", "Alice lives in Paris.", 31, "Paris")
    graph.add_node("paris", type="City", name="Paris", text="Capital of France.", data_id="d2")
    assert graph.node("paris")["text"] == "Capital of France."


def test_same_edge_again_is_one_edge_with_more_supporters_and_endpoints_follow() -> None:
    graph = _people()
    graph.add_node("bob", type="Person", name="Bob", data_id="d2")
    eid = graph.add_edge("alice", "lives_in", "paris", data_id="d2")
    assert eid == edge_id("alice", "lives_in", "paris")
    assert graph.number_of_edges() == 1
    assert graph.supporters(eid) == {"d1", "d2"}
    assert graph.supporters("alice") == {"d1", "d2"} and graph.supporters("paris") == {"d1", "d2"}
    graph.add_edge("alice", "knows", "paris", data_id="d3")  # parallel edge, another relation
    assert graph.number_of_edges() == 2


def test_edge_needs_both_endpoints() -> None:
    graph = _people()
    with pytest.raises(ValidationError, match="'berlin'"):
        graph.add_edge("alice", "visited", "berlin", data_id="d1")
    with pytest.raises(ValidationError, match="'carol'"):
        graph.add_edge("carol", "visited", "paris", data_id="d1")
    assert graph.number_of_edges() == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"node_id": ""}, "node_id"),
        ({"type": ""}, "type"),
        ({"name": 3}, "name"),
        ({"data_id": None}, "data_id"),
        ({"supporters": ["x"]}, "reserved"),
        ({"when": float("nan")}, "finite"),
        ({"tags": ("a", "b")}, "JSON value"),
        ({"meta": {1: "a"}}, "non-str key"),
    ],
)
def test_add_node_validates(kwargs, match) -> None:
    args = {"node_id": "n", "type": "T", "name": "N", "data_id": "d"} | kwargs
    graph = KnowledgeGraph()
    with pytest.raises(ValidationError, match=match):
        graph.add_node(args.pop("node_id"), **args)
    assert graph.number_of_nodes() == 0


def test_edge_attributes_cannot_shadow_fields() -> None:
    graph = _people()
    with pytest.raises(ValidationError, match="reserved"):
        graph.add_edge("alice", "r", "paris", data_id="d1", source="x")


def test_remove_data_deletes_exactly_the_unsupported_elements() -> None:
    graph = _people()
    graph.add_node("bob", type="Person", name="Bob", data_id="d2")
    shared = graph.add_edge("bob", "lives_in", "paris", data_id="d2")
    removal = graph.remove_data("d1")
    assert removal == GraphRemoval(node_ids=frozenset({"alice"}), edge_ids=frozenset({edge_id("alice", "lives_in", "paris")}))
    assert graph.supporters("paris") == {"d2"} and graph.has_element(shared)
    assert graph.data_ids() == frozenset({"d2"})
    assert not graph.remove_data("d1")  # unknown now: nothing to remove
    removal = graph.remove_data("d2")
    assert removal.node_ids == {"bob", "paris"} and removal.edge_ids == {shared}
    assert graph.number_of_nodes() == 0 and graph.number_of_edges() == 0 and graph.data_ids() == frozenset()


def test_an_edge_never_outlives_an_endpoint() -> None:
    graph = KnowledgeGraph()
    graph.add_node("a", type="T", name="A", data_id="d1")
    graph.add_node("b", type="T", name="B", data_id="d2")
    eid = graph.add_edge("a", "r", "b", data_id="d3")
    graph.remove_data("d1")
    graph.remove_data("d2")
    assert graph.has_element("a") and graph.has_element("b") and graph.has_element(eid)  # d3 holds them
    removal = graph.remove_data("d3")
    assert removal.node_ids == {"a", "b"} and removal.edge_ids == {eid}


def test_remove_all_reports_everything() -> None:
    graph = _people()
    removal = graph.remove_all()
    assert removal.node_ids == {"alice", "paris"} and removal.edge_ids == {edge_id("alice", "lives_in", "paris")}
    assert graph.number_of_nodes() == 0 and graph.data_ids() == frozenset()


def test_returned_dicts_are_copies() -> None:
    graph = KnowledgeGraph()
    graph.add_node("a", type="T", name="A", data_id="d1", tags=["x"])
    graph.node("a")["tags"].append("y")
    next(graph.nodes())["name"] = "Z"
    assert graph.node("a")["tags"] == ["x"] and graph.node("a")["name"] == "A"


def test_nx_view_is_read_only_and_subgraph_is_a_copy() -> None:
    graph = _people()
    view = graph.nx
    assert isinstance(view, nx.MultiDiGraph) and set(view.nodes) == {"alice", "paris"}
    with pytest.raises(nx.NetworkXError):
        view.add_node("x")
    sub = graph.subgraph(["alice", "paris", "ghost"])
    assert set(sub.nodes) == {"alice", "paris"} and sub.number_of_edges() == 1
    sub.add_node("x")
    assert not graph.has_element("x")
    with pytest.raises(ValidationError):
        graph.subgraph("alice")


def test_neighbors_of_unknown_node() -> None:
    with pytest.raises(ValidationError, match="'ghost'"):
        KnowledgeGraph().neighbors("ghost")


def test_to_dict_is_json_safe_and_round_trips_exactly() -> None:
    graph = _people()
    graph.add_node("bob", type="Person", name="Bob", data_id="d2", tags=["a", {"b": None}], score=0.5)
    graph.add_edge("bob", "knows", "alice", data_id="d2", weight=2)
    data = graph.to_dict()
    assert data["nodes"][0]["supporters"] == ["d1", "d2"]  # alice gained d2 through the edge
    again = KnowledgeGraph.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data
    assert list(again.nodes()) == list(graph.nodes()) and list(again.edges()) == list(graph.edges())
    assert again.remove_data("d2") == graph.remove_data("d2")


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.update(format=99),
        lambda d: d["nodes"][0].pop("type"),
        lambda d: d["nodes"][0].update(supporters=[]),
        lambda d: d["edges"][0].update(id="not-the-edge-id"),
        lambda d: d["edges"][0].update(supporters=["d1", "elsewhere"]),
        lambda d: d["edges"][0].update(target="ghost"),
    ],
)
def test_from_dict_refuses_malformed_input(mutate) -> None:
    data = _people().to_dict()
    mutate(data)
    with pytest.raises(ValidationError):
        KnowledgeGraph.from_dict(data)
