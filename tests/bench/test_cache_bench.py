"""memlab.bench.cache: helpers, skip rules, row shape (speed goals live in the benchmark only)."""

from __future__ import annotations

import pytest

from memlab import config
from memlab.bench import cache as bench
from memlab.bench.cache import BackendSkipped, CacheBenchSpec, bench_cache, bench_config, flatness, format_table, median


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 2.0, 3.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_flatness_compares_first_and_last_window():
    times = [1.0] * 20 + [5.0] * 60 + [2.0] * 20
    assert flatness(times) == (1.0, 2.0, 2.0)
    assert flatness(times, window=10) == (1.0, 2.0, 2.0)


def test_flatness_window_shrinks_so_ends_never_overlap():
    assert flatness([1.0, 3.0]) == (1.0, 3.0, 3.0)
    assert flatness([1.0, 1.0, 9.0, 4.0, 4.0]) == (1.0, 4.0, 4.0)  # window 2 of 5
    with pytest.raises(ValueError):
        flatness([1.0])


def test_spec_validates_sizes():
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        CacheBenchSpec(n=0)
    with pytest.raises(ValueError, match="backends"):
        CacheBenchSpec(backends=())
    assert CacheBenchSpec(backends=["memory"]).backends == ("memory",)


def test_unregistered_backend_is_skipped(tmp_path):
    with pytest.raises(BackendSkipped, match="not registered"):
        bench_config("no_such_backend", tmp_path, environ={})


def test_server_backend_without_url_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setitem(config.CACHE_BACKENDS, "redis", "memlab.cache._memory:MemoryCache")
    monkeypatch.setitem(config.CACHE_BACKENDS, "postgres", "memlab.cache._sql:SQLCache")
    with pytest.raises(BackendSkipped, match="MEMLAB_TEST_REDIS_URL"):
        bench_config("redis", tmp_path, environ={})
    with pytest.raises(BackendSkipped, match="MEMLAB_TEST_POSTGRES_URL or CACHE_DB_URL"):
        bench_config("postgres", tmp_path, environ={})
    with pytest.raises(BackendSkipped, match="not a PostgreSQL URL"):
        bench_config("postgres", tmp_path, environ={"CACHE_DB_URL": "sqlite:///x.db"})

    redis = bench_config("redis", tmp_path, environ={"MEMLAB_TEST_REDIS_URL": "redis://u:p%40ss@127.0.0.1:6390/0"})
    assert (redis.cache.backend, redis.cache.host, redis.cache.port, redis.cache.username) == ("redis", "127.0.0.1", 6390, "u")
    assert redis.cache.password.get_secret_value() == "p@ss"
    url = "postgresql+asyncpg://postgres@127.0.0.1:5433/memlab_test"
    assert bench_config("postgres", tmp_path, environ={"MEMLAB_TEST_POSTGRES_URL": url}).cache.db_url == url


def _fake_repeat(append: float, read: float, recall: float, early: float, late: float) -> dict:
    return {
        "append": (append, {"flatness": (early, late, late / early)}),
        "read_last_10": (read, {}),
        "recall": (recall, {"first_query_ms": 1.0, "mean_hits": 3.0}),
        "multi_append": (append, {}),
    }


def test_rows_take_medians_and_judge_targets():
    spec = CacheBenchSpec(repeats=3)
    repeats = [
        _fake_repeat(4_000, 20_000, 1_000, 1e-4, 3e-4),
        _fake_repeat(6_000, 30_000, 1_500, 1e-4, 1e-4),
        _fake_repeat(7_000, 9_000, 2_500, 1e-4, 1e-4),
    ]
    rows = {row["operation"]: row for row in bench._rows_for("sqlite", spec, repeats, [None] * 3)}
    assert rows["append"]["ops_per_s"] == 6_000 and rows["append"]["extra"]["status"] == "PASS"
    assert rows["append"]["extra"]["runs"] == [4_000, 6_000, 7_000]
    assert rows["append"]["extra"]["flatness_ratio"] == pytest.approx(1.0)
    assert rows["append"]["extra"]["flatness_status"] == "PASS"
    assert rows["read_last_10"]["ops_per_s"] == 20_000 and rows["read_last_10"]["extra"]["status"] == "PASS"
    assert rows["recall"]["ops_per_s"] == 1_500 and rows["recall"]["extra"]["status"] == "MISS"
    assert rows["multi_append"]["n"] == 2_000 and rows["multi_append"]["extra"]["status"] is None
    assert "storage" not in rows

    memory = {row["operation"]: row for row in bench._rows_for("memory", spec, repeats, [None] * 3)}
    assert memory["append"]["extra"]["status"] is None  # targets are sqlite's


async def test_bench_cache_rows(monkeypatch):
    spec = CacheBenchSpec(backends=("memory", "sqlite", "no_such_backend"), repeats=2, n=30, sessions=3, per_session=2)
    lines = []
    rows = await bench_cache(spec, environ={}, progress=lines.append)
    assert lines[:2] == ["memory: repeat 1/2", "memory: repeat 2/2"]
    assert not any(line.startswith("no_such_backend") for line in lines)

    by_key = {(row["backend"], row["operation"]): row for row in rows}
    for backend in ("memory", "sqlite", "raw-sqlite"):
        assert by_key[(backend, "append")]["ops_per_s"] > 0
        assert len(by_key[(backend, "append")]["extra"]["runs"]) == 2
        assert by_key[(backend, "multi_append")]["n"] == 6
    assert (("raw-sqlite", "recall")) not in by_key
    assert by_key[("sqlite", "recall")]["extra"]["mean_hits"] > 0
    storage = by_key[("sqlite", "storage")]["extra"]
    assert storage["db_bytes"] > 0 and storage["bytes_per_entry"] == storage["db_bytes"] / 36
    assert ("memory", "storage") not in by_key
    assert by_key[("no_such_backend", "append")]["extra"]["status"] == "skipped"
    assert [row["backend"] for row in rows].index("raw-sqlite") > [row["backend"] for row in rows].index("sqlite")

    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(rows)
    assert list(frame.columns) == ["backend", "operation", "ops_per_s", "n", "repeats", "extra"]

    table = format_table(rows, spec)
    assert "no_such_backend: skipped" in table
    assert "raw-sqlite" in table
