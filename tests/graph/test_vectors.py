"""VectorIndex / VectorStore: distances, replace and remove in both modes, IVF recall, errors, state round trip."""

from __future__ import annotations

import threading

import faiss
import numpy as np
import pytest

from memlab import ConfigError, ValidationError
from memlab.graph import VectorIndex, VectorStore, vector_search_latency
from memlab.graph._vector_bench import clustered_unit_vectors
from memlab.graph._vectors import RETRAIN_GROWTH

DIM = 32
SPACE = "memlab/hashing-32"


def _unit(rows: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _ids(count: int, prefix: str = "v") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def _recall(index: VectorIndex, data: np.ndarray, ids: list[str], queries: np.ndarray, k: int = 15) -> float:
    _, exact = faiss.knn(queries, data, k, metric=faiss.METRIC_INNER_PRODUCT)
    found = index.search_many(queries, k)
    return float(np.mean([len({ids[i] for i in truth} & {key for key, _ in got}) / k for truth, got in zip(exact, found)]))


def test_identical_vector_is_at_distance_zero_and_results_are_nearest_first() -> None:
    vectors = _unit(50)
    index = VectorIndex(DIM, space=SPACE)
    index.add(_ids(50), vectors)
    results = index.search(vectors[7], top_k=5)
    assert results[0][0] == "v7" and results[0][1] == pytest.approx(0.0, abs=1e-5)
    distances = [distance for _, distance in results]
    assert distances == sorted(distances) and all(0.0 <= d <= 2.0 for d in distances)
    assert index.search(-vectors[7], top_k=50)[-1] == ("v7", pytest.approx(2.0, abs=1e-5))
    assert len(index) == 50 and "v7" in index and "nope" not in index and index.ids() == _ids(50)
    assert index.mode == "exact" and index.nprobe is None


def test_search_edges() -> None:
    index = VectorIndex(DIM, space=SPACE)
    assert index.search(_unit(1)[0], 3) == []
    assert index.search_many(_unit(2), 3) == [[], []]
    index.add(["a", "b"], _unit(2))
    assert len(index.search(_unit(1, seed=5)[0], 15)) == 2  # top_k above the size
    index.add([], np.zeros((0, DIM), dtype=np.float32))
    assert len(index) == 2


def test_add_replaces_an_existing_id() -> None:
    vectors = _unit(3)
    index = VectorIndex(DIM, space=SPACE)
    index.add(["a", "b"], vectors[:2])
    index.add(["a"], vectors[2:3])
    assert len(index) == 2 and index.ids() == ["a", "b"]
    assert index.search(vectors[2], 1) == [("a", pytest.approx(0.0, abs=1e-5))]
    assert all(key != "a" for key, distance in index.search(vectors[0], 2) if distance < 1e-5)


def test_remove_in_exact_mode() -> None:
    vectors = _unit(20)
    index = VectorIndex(DIM, space=SPACE)
    index.add(_ids(20), vectors)
    assert index.remove(["v3", "v4", "v4", "ghost"]) == 2
    assert len(index) == 18 and "v3" not in index
    assert "v3" not in {key for key, _ in index.search(vectors[3], 18)}
    assert index.remove(["v3"]) == 0
    with pytest.raises(ValidationError, match="collection of str"):
        index.remove("v5")


def test_float64_queries_are_accepted() -> None:
    vectors = _unit(5)
    index = VectorIndex(DIM, space=SPACE)
    index.add(_ids(5), vectors.astype(np.float64))
    assert index.search(vectors[1].astype(np.float64), 1)[0][0] == "v1"


def test_ivf_agrees_with_exact_on_clustered_data_and_supports_remove_and_replace() -> None:
    n = 6000
    data = clustered_unit_vectors(n + 100, DIM, clusters=60, seed=1)
    vectors, queries = data[:n], data[n:]
    ids = _ids(n)
    index = VectorIndex(DIM, space=SPACE, ivf_threshold=2000)
    for offset in range(0, n, 1000):
        index.add(ids[offset : offset + 1000], vectors[offset : offset + 1000])
    assert index.mode == "ivf" and index.nlist > 1 and 1 <= index.nprobe <= index.nlist
    assert _recall(index, vectors, ids, queries) >= 0.95

    assert index.remove(ids[:10]) == 10
    assert not {key for key, _ in index.search(vectors[0], 15)} & set(ids[:10])
    assert _recall(index, vectors[10:], ids[10:], queries) >= 0.95

    replacement = queries[0]
    index.add(["v500"], replacement[None, :])
    assert index.search(replacement, 1) == [("v500", pytest.approx(0.0, abs=1e-5))]
    assert len(index) == n - 10


def test_mode_follows_the_size() -> None:
    n = 1200
    vectors = clustered_unit_vectors(n * RETRAIN_GROWTH, DIM, clusters=20, seed=2)
    ids = _ids(len(vectors))
    index = VectorIndex(DIM, space=SPACE, ivf_threshold=n)
    index.add(ids[: n - 1], vectors[: n - 1])
    assert index.mode == "exact"
    index.add(ids[n - 1 : n], vectors[n - 1 : n])
    assert index.mode == "ivf"
    first_nlist = index.nlist
    index.add(ids[n:], vectors[n:])  # grew RETRAIN_GROWTH x: retrained with more clusters
    assert index.mode == "ivf" and index.nlist > first_nlist
    index.remove(ids[n // 2 :])
    assert index.mode == "ivf"  # half the threshold: still IVF
    index.remove([ids[n // 2 - 1]])
    assert index.mode == "exact" and len(index) == n // 2 - 1
    assert index.search(vectors[3], 1) == [("v3", pytest.approx(0.0, abs=1e-5))]
    index.clear()
    assert len(index) == 0 and index.mode == "exact"


@pytest.mark.parametrize(
    ("ids", "vectors", "match"),
    [
        ("ab", _unit(2), "sequence of str"),
        (["a", ""], _unit(2), "non-empty"),
        (["a", "a"], _unit(2), "'a' more than once"),
        (["a"], _unit(2), "2 rows for 1 ids"),
        (["a"], _unit(1, dim=DIM + 1), r"shape \(n, 32\)"),
        (["a"], _unit(1)[0], r"shape \(n, 32\)"),
        (["a"], np.ones((1, DIM), dtype=np.int64), "float dtype"),
        (["a"], np.full((1, DIM), np.nan, dtype=np.float32), "NaN"),
        (["a"], np.ones((1, DIM), dtype=np.float32), "unit rows"),
        (["a"], [[1.0] * DIM], "numpy array"),
    ],
)
def test_add_validates_and_writes_nothing(ids, vectors, match) -> None:
    index = VectorIndex(DIM, space=SPACE)
    with pytest.raises(ValidationError, match=match):
        index.add(ids, vectors)
    assert len(index) == 0


def test_search_validates() -> None:
    index = VectorIndex(DIM, space=SPACE)
    index.add(["a"], _unit(1))
    with pytest.raises(ValidationError, match="search_many"):
        index.search(_unit(2), 1)
    with pytest.raises(ValidationError, match="top_k"):
        index.search(_unit(1)[0], 0)
    with pytest.raises(ValidationError, match="top_k"):
        index.search(_unit(1)[0], True)
    with pytest.raises(ValidationError, match="unit rows"):
        index.search(np.zeros(DIM, dtype=np.float32), 1)
    with pytest.raises(ValidationError, match="shape"):
        index.search_many(_unit(1, dim=8), 1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"dim": 0}, "dim"), ({"space": ""}, "space"), ({"ivf_threshold": -1}, "ivf_threshold"), ({"target_recall": 1.5}, "target_recall")],
)
def test_constructor_validates(kwargs, match) -> None:
    args = {"dim": DIM, "space": SPACE} | kwargs
    with pytest.raises(ValidationError, match=match):
        VectorIndex(args.pop("dim"), **args)


def test_single_queries_leave_the_callers_thread_setting_alone() -> None:
    index = VectorIndex(DIM, space=SPACE)
    index.add(_ids(10), _unit(10))
    seen = []

    def worker() -> None:
        before = faiss.omp_get_max_threads()
        index.search(_unit(1)[0], 3)
        index.search_many(_unit(30), 3)
        seen.append((before, faiss.omp_get_max_threads()))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen[0][0] == seen[0][1]


@pytest.mark.parametrize("threshold", [10_000, 500])
def test_state_round_trip_gives_identical_results(threshold) -> None:
    vectors = clustered_unit_vectors(1000, DIM, clusters=10, seed=3)
    index = VectorIndex(DIM, space=SPACE, ivf_threshold=threshold)
    index.add(_ids(1000), vectors)
    index.remove(["v1", "v2"])
    blob, state = index.to_state()
    again = VectorIndex.from_state(blob.tobytes(), state, space=SPACE)
    assert again.mode == index.mode and again.nprobe == index.nprobe and again.ids() == index.ids()
    queries = vectors[:20]
    assert again.search_many(queries, 15) == index.search_many(queries, 15)
    again.add(["new"], vectors[:1])  # labels continue after the stored ones
    assert again.search(vectors[0], 2)[0][1] == pytest.approx(0.0, abs=1e-5) and len(again) == 999


def test_from_state_refuses_another_space_and_bad_input() -> None:
    index = VectorIndex(DIM, space=SPACE)
    index.add(["a"], _unit(1))
    blob, state = index.to_state()
    with pytest.raises(ConfigError, match="memlab/minilm"):
        VectorIndex.from_state(blob, state, space="memlab/minilm")
    with pytest.raises(ValidationError, match="unreadable faiss index"):
        VectorIndex.from_state(blob[:20], state)
    with pytest.raises(ValidationError, match="does not match"):
        VectorIndex.from_state(blob, state | {"ids": ["a", "b"], "labels": [0, 1]})
    with pytest.raises(ValidationError, match="malformed"):
        VectorIndex.from_state(blob, {k: v for k, v in state.items() if k != "ids"})


def test_vector_store_collections() -> None:
    store = VectorStore(DIM, SPACE)
    assert store.counts() == {} and store.dim == DIM and store.space == SPACE
    chunks = store.collection("chunks")
    assert store.collection("chunks") is chunks and chunks.space == SPACE
    chunks.add(["x", "y"], _unit(2))
    store.collection("entities").add(["x", "z"], _unit(2, seed=1))
    assert store.counts() == {"chunks": 2, "entities": 2} and store.names() == ["chunks", "entities"]
    assert store.remove(frozenset({"x", "ghost"})) == 2  # any collection of ids, e.g. a GraphRemoval's sets
    assert store.counts() == {"chunks": 1, "entities": 1}
    store.clear()
    assert store.counts() == {"chunks": 0, "entities": 0}
    for bad in ("", "Chunks", "../x", 3):
        with pytest.raises(ValidationError, match="collection name"):
            store.collection(bad)


def test_benchmark_runs_at_small_n() -> None:
    result = vector_search_latency(n=3000, dim=DIM, queries=20, mode="ivf", batch=1000)
    assert result["mode"] == "ivf" and result["n"] == 3000
    assert result["p50_ms"] > 0 and result["p95_ms"] >= result["p50_ms"] and result["build_s"] > 0
    assert result["recall_at_k"] >= 0.9
    exact = vector_search_latency(n=500, dim=DIM, queries=5, mode="exact")
    assert exact["mode"] == "exact" and exact["recall_at_k"] == 1.0 and exact["nprobe"] is None
    with pytest.raises(ValidationError, match="mode"):
        vector_search_latency(n=10, mode="hnsw")
