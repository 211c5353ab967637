"""Snapshots: round trip, atomic commit under simulated crashes, damage is a BackendError naming the path."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from memlab import BackendError, ConfigError, ValidationError
from memlab.graph import KnowledgeGraph, VectorStore, delete_snapshot, load_snapshot, save_snapshot
from memlab.graph import _snapshot
from memlab.graph._vector_bench import clustered_unit_vectors

DIM = 16
SPACE = "memlab/hashing-16"


def _graph(tag: str = "a") -> KnowledgeGraph:
    graph = KnowledgeGraph()
    graph.add_node("alice", type="Person", name="Alice", text=f"Alice {tag}", data_id="d1", tags=["x"])
    graph.add_node("paris", type="City", name="Paris", data_id="d2")
    graph.add_edge("alice", "lives_in", "paris", data_id="d1")
    return graph


def _store(n: int = 600, seed: int = 0) -> tuple[VectorStore, np.ndarray]:
    vectors = clustered_unit_vectors(n, DIM, clusters=8, seed=seed)
    store = VectorStore(DIM, SPACE)
    store.collection("chunks").add([f"c{i}" for i in range(n)], vectors)
    store.collection("entities").add(["alice", "paris"], vectors[:2])
    return store, vectors


def _versions(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("v"))


def test_nothing_saved_loads_none(tmp_path) -> None:
    assert load_snapshot(tmp_path / "missing") is None
    assert load_snapshot(tmp_path) is None


def test_round_trip_gives_identical_graph_search_results_and_meta(tmp_path) -> None:
    graph, (store, vectors) = _graph(), _store()
    meta = {"dataset_id": "ds1", "documents": {"d1": {"name": "a.txt"}}}
    save_snapshot(tmp_path, graph, store, meta)
    loaded = load_snapshot(tmp_path, space=SPACE)
    assert loaded is not None
    graph2, store2, meta2 = loaded
    assert graph2.to_dict() == graph.to_dict() and meta2 == meta
    assert store2.counts() == store.counts() and store2.space == SPACE and store2.dim == DIM
    assert store2.collection("chunks").mode == "fp16" and store2.collection("entities").ids() == ["alice", "paris"]
    for name in ("chunks", "entities"):
        assert store2.collection(name).search_many(vectors[:25], 15) == store.collection(name).search_many(vectors[:25], 15)
    assert (tmp_path / "CURRENT").read_text() == "v000001\n"


def test_each_save_commits_a_new_version_and_drops_the_old(tmp_path) -> None:
    store, _ = _store()
    save_snapshot(tmp_path, _graph("a"), store, {"n": 1})
    save_snapshot(tmp_path, _graph("b"), store, {"n": 2})
    assert _versions(tmp_path) == ["v000002"] and sorted(p.name for p in tmp_path.iterdir()) == ["CURRENT", "v000002"]
    graph, _, meta = load_snapshot(tmp_path)
    assert meta == {"n": 2} and graph.node("alice")["text"] == "Alice b"


def test_crash_before_the_pointer_switch_keeps_the_previous_snapshot(tmp_path, monkeypatch) -> None:
    store, _ = _store()
    save_snapshot(tmp_path, _graph("old"), store, {"n": 1})

    def crash(*args, **kwargs):
        raise OSError("simulated crash at os.replace")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(BackendError, match="simulated crash"):
        save_snapshot(tmp_path, _graph("new"), store, {"n": 2})
    monkeypatch.undo()
    assert _versions(tmp_path) == ["v000001", "v000002"]  # the uncommitted version is left behind
    graph, _, meta = load_snapshot(tmp_path)
    assert meta == {"n": 1} and graph.node("alice")["text"] == "Alice old"

    save_snapshot(tmp_path, _graph("next"), store, {"n": 3})  # cleans the stray version
    assert _versions(tmp_path) == ["v000003"]
    assert load_snapshot(tmp_path)[2] == {"n": 3}


def test_crash_while_writing_files_keeps_the_previous_snapshot(tmp_path, monkeypatch) -> None:
    store, _ = _store()
    save_snapshot(tmp_path, _graph("old"), store, {"n": 1})
    real_write = _snapshot._write_durably

    def write_then_die(path, data):
        if path.name.endswith(".faiss"):
            path.write_bytes(bytes(data)[:10])  # half-written
            raise OSError("simulated crash mid-write")
        real_write(path, data)

    monkeypatch.setattr(_snapshot, "_write_durably", write_then_die)
    with pytest.raises(BackendError, match=str(tmp_path)):
        save_snapshot(tmp_path, _graph("new"), store, {"n": 2})
    monkeypatch.undo()
    assert load_snapshot(tmp_path)[2] == {"n": 1}


def test_stray_version_directories_are_ignored_then_cleaned(tmp_path) -> None:
    store, _ = _store()
    save_snapshot(tmp_path, _graph(), store, {"n": 1})
    stray = tmp_path / "v000099"
    stray.mkdir()
    (stray / "graph.json").write_text("{not json")
    (tmp_path / "CURRENT.tmp").write_text("v000099\n")
    assert load_snapshot(tmp_path)[2] == {"n": 1}
    save_snapshot(tmp_path, _graph(), store, {"n": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CURRENT", "v000100"]


def test_half_written_first_save_is_no_snapshot(tmp_path) -> None:
    (tmp_path / "v000001").mkdir()
    (tmp_path / "v000001" / "graph.json").write_text("{")
    assert load_snapshot(tmp_path) is None


def _corrupt(path, how: str) -> None:
    if how == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    else:
        path.unlink()


@pytest.mark.parametrize("how", ["truncate", "flip", "delete"])
@pytest.mark.parametrize("name", ["graph.json", "chunks.faiss", "chunks.ids.json", "entities.faiss", "meta.json"])
def test_damaged_file_raises_backend_error_naming_it(tmp_path, name, how) -> None:
    store, _ = _store()
    save_snapshot(tmp_path, _graph(), store, {"n": 1})
    path = tmp_path / "v000001" / name
    _corrupt(path, how)
    with pytest.raises(BackendError) as info:
        load_snapshot(tmp_path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(("content", "match"), [("garbage\n", "corrupt"), ("v000007\n", "does not exist"), ("", "corrupt")])
def test_damaged_pointer_raises_backend_error(tmp_path, content, match) -> None:
    store, _ = _store(n=10)
    save_snapshot(tmp_path, _graph(), store, {})
    (tmp_path / "CURRENT").write_text(content)
    with pytest.raises(BackendError, match=match) as info:
        load_snapshot(tmp_path)
    assert str(tmp_path / "CURRENT") in str(info.value)


def test_metadata_that_lies_about_the_graph_is_a_backend_error(tmp_path) -> None:
    store, _ = _store(n=10)
    save_snapshot(tmp_path, _graph(), store, {})
    graph_path = tmp_path / "v000001" / "graph.json"
    data = json.loads(graph_path.read_text())
    data["edges"][0]["target"] = "ghost"
    graph_path.write_text(json.dumps(data))
    meta_path = tmp_path / "v000001" / "meta.json"
    record = json.loads(meta_path.read_text())
    record["files"]["graph.json"] = {"sha256": hashlib.sha256(graph_path.read_bytes()).hexdigest(), "bytes": graph_path.stat().st_size}
    meta_path.write_text(json.dumps(record))
    with pytest.raises(BackendError, match="graph.json is malformed"):
        load_snapshot(tmp_path)


def test_another_embedding_space_is_refused(tmp_path) -> None:
    store, _ = _store(n=10)
    save_snapshot(tmp_path, _graph(), store, {})
    with pytest.raises(ConfigError, match="memlab/minilm"):
        load_snapshot(tmp_path, space="memlab/minilm")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("graph", "store", {}), "KnowledgeGraph"),
        (("GRAPH", {}, {}), "VectorStore"),
        (("GRAPH", "STORE", {"x": float("nan")}), "JSON-safe"),
        (("GRAPH", "STORE", {"x": object()}), "JSON-safe"),
        (("GRAPH", "STORE", []), "mapping"),
    ],
)
def test_bad_arguments_write_nothing(tmp_path, args, match) -> None:
    store, _ = _store(n=10)
    actual = [_graph() if a == "GRAPH" else store if a == "STORE" else a for a in args]
    with pytest.raises(ValidationError, match=match):
        save_snapshot(tmp_path / "ds", *actual)
    assert not (tmp_path / "ds").exists()


def test_delete_snapshot(tmp_path) -> None:
    directory = tmp_path / "graph" / "ds1"
    store, _ = _store(n=10)
    save_snapshot(directory, _graph(), store, {})
    assert delete_snapshot(directory) is True
    assert not directory.exists() and load_snapshot(directory) is None
    assert delete_snapshot(directory) is False


def test_a_collection_of_an_older_vector_format_is_refused_with_the_fix(tmp_path) -> None:
    store, _ = _store(n=10)
    save_snapshot(tmp_path, _graph(), store, {})
    ids_path = tmp_path / "v000001" / "chunks.ids.json"
    state = json.loads(ids_path.read_text())
    ids_path.write_text(json.dumps(state | {"format": 1}))  # the exact/IVF layout of earlier, unreleased code
    meta_path = tmp_path / "v000001" / "meta.json"
    record = json.loads(meta_path.read_text())
    record["files"]["chunks.ids.json"] = {"sha256": hashlib.sha256(ids_path.read_bytes()).hexdigest(), "bytes": ids_path.stat().st_size}
    meta_path.write_text(json.dumps(record))
    with pytest.raises(BackendError, match=r"'chunks'.*format 1.*re-ingest") as info:
        load_snapshot(tmp_path)
    assert str(ids_path) in str(info.value)
