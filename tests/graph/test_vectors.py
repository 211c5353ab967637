"""VectorIndex / VectorStore: distances, agreement with exact search, replace and remove, errors, state round trip."""

from __future__ import annotations

import threading

import faiss
import numpy as np
import pytest

from memlab import ConfigError, ValidationError
from memlab.bench.ingest import chunk_vectors
from memlab.graph import VectorIndex, VectorStore, vector_search_latency
from memlab.graph._vector_bench import clustered_unit_vectors
from memlab.graph._vectors import VECTOR_FORMAT

DIM = 32
SPACE = "memlab/hashing-32"
FP16 = 1e-3  # fp16 codes: a distance is within ~5e-4 of the float32 one


def _unit(rows: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _ids(count: int, prefix: str = "v") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def _recall(index: VectorIndex, data: np.ndarray, ids: list[str], queries: np.ndarray, k: int = 15) -> float:
    """memlab's top-k overlap with exact float32 search over ``data`` (whose rows are ``ids``)."""
    _, exact = faiss.knn(queries, data, k, metric=faiss.METRIC_INNER_PRODUCT)
    found = index.search_many(queries, k)
    return float(np.mean([len({ids[i] for i in truth} & {key for key, _ in got}) / k for truth, got in zip(exact, found)]))


@pytest.fixture(scope="module")
def corpus() -> tuple[np.ndarray, np.ndarray]:
    """5,000 hashing-embedded corpus chunks and 100 question vectors, as ``memlab bench ingest`` makes them."""
    return chunk_vectors(5000, 256, queries=100, seed=0)


def test_scores_are_one_minus_cosine_nearest_first() -> None:
    vectors = _unit(50)
    index = VectorIndex(DIM, space=SPACE)
    index.add(_ids(50), vectors)
    assert index.mode == "fp16"
    results = index.search(vectors[7], top_k=50)
    assert results[0] == ("v7", pytest.approx(0.0, abs=FP16))
    distances = [distance for _, distance in results]
    assert distances == sorted(distances) and all(0.0 <= d <= 2.0 for d in distances)  # clamped: never a tiny negative
    cosine = vectors @ vectors[7]
    assert all(distance == pytest.approx(1.0 - cosine[int(key[1:])], abs=FP16) for key, distance in results)
    assert index.search(-vectors[7], top_k=50)[-1] == ("v7", pytest.approx(2.0, abs=FP16))
    assert len(index) == 50 and "v7" in index and "nope" not in index and index.ids() == _ids(50)


def test_top_15_agrees_with_exact_search_on_corpus_vectors(corpus) -> None:
    vectors, questions = corpus
    ids = _ids(len(vectors), "c")
    index = VectorIndex(vectors.shape[1], space="memlab/hashing-256")
    for offset in range(0, len(ids), 1000):  # in batches, as ingestion adds them
        index.add(ids[offset : offset + 1000], vectors[offset : offset + 1000])
    assert _recall(index, vectors, ids, questions) >= 0.99
    assert _recall(index, vectors, ids, vectors[:100]) >= 0.99  # stored chunks as queries too
    assert [key for key, _ in index.search(vectors[42], 1)] == ["c42"]


def test_remove_and_replace_on_corpus_vectors(corpus) -> None:
    vectors, questions = corpus
    ids = _ids(len(vectors), "c")
    index = VectorIndex(vectors.shape[1], space="memlab/hashing-256")
    index.add(ids, vectors)
    gone = ids[:500]
    assert index.remove(set(gone)) == 500 and len(index) == len(ids) - 500
    assert not {key for row in index.search_many(vectors[:500], 15) for key, _ in row} & set(gone)
    assert _recall(index, vectors[500:], ids[500:], questions) >= 0.99

    index.add(["c600"], questions[:1])  # replace: the old vector of c600 is gone, the new one is found
    assert index.search(questions[0], 1) == [("c600", pytest.approx(0.0, abs=FP16))]
    assert "c600" not in {key for key, distance in index.search(vectors[600], 15) if distance < FP16}
    assert len(index) == len(ids) - 500 and index.ids()[100] == "c600"  # first-insertion order kept

    index.add(gone[:3], vectors[:3])  # removed ids come back under fresh labels
    assert index.search(vectors[1], 1)[0][0] == "c1" and len(index) == len(ids) - 497
    index.clear()
    assert len(index) == 0 and index.search(vectors[0], 5) == [] and index.ids() == []
    index.add(["again"], vectors[:1])
    assert index.search(vectors[0], 5) == [("again", pytest.approx(0.0, abs=FP16))]


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
    assert index.search(vectors[2], 1) == [("a", pytest.approx(0.0, abs=FP16))]
    assert all(key != "a" for key, distance in index.search(vectors[0], 2) if distance < FP16)


def test_remove() -> None:
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


@pytest.mark.parametrize(("kwargs", "match"), [({"dim": 0}, "dim"), ({"dim": True}, "dim"), ({"space": ""}, "space"), ({"space": None}, "space")])
def test_constructor_validates(kwargs, match) -> None:
    args = {"dim": DIM, "space": SPACE} | kwargs
    with pytest.raises(ValidationError, match=match):
        VectorIndex(args.pop("dim"), **args)


def test_searches_leave_the_callers_thread_setting_alone() -> None:
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


def test_state_round_trip_gives_identical_results() -> None:
    vectors = _unit(1000, seed=3)
    index = VectorIndex(DIM, space=SPACE)
    index.add(_ids(1000), vectors)
    index.remove(["v1", "v2"])
    blob, state = index.to_state()
    assert state["format"] == VECTOR_FORMAT and state["mode"] == "fp16" and state["ids"][:2] == ["v0", "v3"]
    again = VectorIndex.from_state(blob.tobytes(), state, space=SPACE)
    assert again.mode == index.mode and again.ids() == index.ids() and again.dim == DIM and again.space == SPACE
    queries = vectors[:20]
    assert again.search_many(queries, 15) == index.search_many(queries, 15)
    again.add(["new"], vectors[:1])  # labels continue after the stored ones
    assert again.search(vectors[0], 2)[0][1] == pytest.approx(0.0, abs=FP16) and len(again) == 999
    assert {key for key, _ in again.search(vectors[0], 2)} == {"v0", "new"}


def test_from_state_refuses_another_space_an_older_format_and_bad_input() -> None:
    index = VectorIndex(DIM, space=SPACE)
    index.add(["a"], _unit(1))
    blob, state = index.to_state()
    with pytest.raises(ConfigError, match="memlab/minilm"):
        VectorIndex.from_state(blob, state, space="memlab/minilm")
    with pytest.raises(ConfigError, match="format 1.*re-ingest"):
        VectorIndex.from_state(blob, state | {"format": 1}, space=SPACE)
    with pytest.raises(ValidationError, match="not a memlab vector index state"):
        VectorIndex.from_state(blob, {"ids": []})
    with pytest.raises(ValidationError, match="unreadable faiss index"):
        VectorIndex.from_state(blob[:20], state)
    with pytest.raises(ValidationError, match="does not match"):
        VectorIndex.from_state(blob, state | {"ids": ["a", "b"], "labels": [0, 1]})
    flat = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    flat.add_with_ids(_unit(1), np.zeros(1, dtype=np.int64))
    with pytest.raises(ValidationError, match="does not match"):
        VectorIndex.from_state(faiss.serialize_index(flat), state)
    with pytest.raises(ValidationError, match="malformed"):
        VectorIndex.from_state(blob, {k: v for k, v in state.items() if k != "ids"})
    with pytest.raises(ValidationError, match="inconsistent"):
        VectorIndex.from_state(blob, state | {"labels": [5]})


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
    result = vector_search_latency(n=3000, dim=DIM, queries=20, batch=1000)
    assert result["mode"] == "fp16" and result["n"] == 3000 and result["top_k"] == 15
    assert result["p50_ms"] > 0 and result["p95_ms"] >= result["p50_ms"] and result["build_s"] > 0
    assert result["recall_at_k"] >= 0.99
    with pytest.raises(ValidationError, match="spread"):
        vector_search_latency(n=10, spread=0)
    with pytest.raises(ValidationError, match="batch"):
        vector_search_latency(n=10, batch=0)


def test_search_among_scores_only_the_given_ids() -> None:
    vectors = clustered_unit_vectors(300, 32, clusters=5, seed=3)
    index = VectorIndex(32, space="t")
    ids = [f"v{i}" for i in range(300)]
    index.add(ids, vectors)
    subset = ids[::7]
    got = index.search_among(vectors[0], subset + ["missing"], 10)
    assert [key for key, _ in got] == [key for key, _ in index.search(vectors[0], 300) if key in set(subset)][:10]
    assert got[0] == ("v0", pytest.approx(0.0, abs=1e-3))
    assert index.search_among(vectors[0], ["missing"], 5) == []
    with pytest.raises(ValidationError):
        index.search_among(vectors[:2], subset, 5)
