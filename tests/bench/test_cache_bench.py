"""memlab.bench.cache: helpers, skip rules, row shape, raw ceilings, storage accounting.

Tiny sizes and no timing assertions: speed goals live in the benchmark's own
PASS/MISS column. Redis and PostgreSQL run when MEMLAB_TEST_REDIS_URL /
MEMLAB_TEST_POSTGRES_URL are set (skipped otherwise, failed under CI=true).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from memlab import config
from memlab.bench import cache as bench
from memlab.bench._measure import Workload, blocks
from memlab.bench._stores import RAW_TTL_SECONDS, RawDiskcache, RawPostgres, RawPostgresEqualWork, RawRedis, RawSQLite
from memlab.bench._usage import FileProbe, PostgresProbe, RedisProbe, asyncpg_dsn
from memlab.bench.cache import (
    BackendSkipped,
    CacheBenchSpec,
    bench_cache,
    bench_config,
    default_backends,
    flatness,
    format_table,
    measure_subject,
    median,
    open_subject,
    skipped_backends,
    to_frame,
)
from memlab.testing.databases import postgres_database
from memlab.testing.suppliers import server_url

TINY = CacheBenchSpec(backends=("memory",), repeats=1, n=24, sessions=3, per_session=2)


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


def test_default_backends_are_every_registered_one_but_tapes_without_its_url():
    assert default_backends({}) == tuple(name for name in config.CACHE_BACKENDS if name != "tapes")
    assert {"memory", "sqlite", "postgres", "redis", "fs"} <= set(default_backends({}))
    assert default_backends({"TAPES_INGEST_URL": "http://127.0.0.1:9/ingest"})[-1] == "tapes"


def test_unregistered_backend_and_ceilings_are_skipped(tmp_path):
    with pytest.raises(BackendSkipped, match="not registered"):
        bench_config("no_such_backend", tmp_path, environ={})
    for ceiling in ("raw-redis", "raw-postgres", "raw-postgres-equal-work"):
        with pytest.raises(BackendSkipped, match="ceiling"):
            bench_config(ceiling, tmp_path, environ={})


def test_server_backend_without_url_is_skipped(tmp_path):
    with pytest.raises(BackendSkipped, match="MEMLAB_TEST_REDIS_URL"):
        bench_config("redis", tmp_path, environ={})
    with pytest.raises(BackendSkipped, match="MEMLAB_TEST_POSTGRES_URL or CACHE_DB_URL"):
        bench_config("postgres", tmp_path, environ={})
    with pytest.raises(BackendSkipped, match="TAPES_INGEST_URL"):
        bench_config("tapes", tmp_path, environ={})
    with pytest.raises(BackendSkipped, match="not a PostgreSQL URL"):
        bench_config("postgres", tmp_path, environ={"CACHE_DB_URL": "sqlite:///x.db"})
    with pytest.raises(BackendSkipped, match="MEMLAB_TEST_REDIS_URL"):
        open_subject("raw-redis", tmp_path, environ={})
    for ceiling in ("raw-postgres", "raw-postgres-equal-work"):
        with pytest.raises(BackendSkipped, match="MEMLAB_TEST_POSTGRES_URL or CACHE_DB_URL"):
            open_subject(ceiling, tmp_path, environ={})
    url = "postgresql+asyncpg://postgres@127.0.0.1:5433/memlab_test"
    assert isinstance(open_subject("raw-postgres-equal-work", tmp_path, {"MEMLAB_TEST_POSTGRES_URL": url}), RawPostgresEqualWork)

    redis = bench_config("redis", tmp_path, environ={"MEMLAB_TEST_REDIS_URL": "redis://u:p%40ss@127.0.0.1:6390/0"})
    assert (redis.cache.backend, redis.cache.host, redis.cache.port, redis.cache.username) == ("redis", "127.0.0.1", 6390, "u")
    assert redis.cache.password.get_secret_value() == "p@ss"
    url = "postgresql+asyncpg://postgres@127.0.0.1:5433/memlab_test"
    assert bench_config("postgres", tmp_path, environ={"MEMLAB_TEST_POSTGRES_URL": url}).cache.db_url == url
    assert asyncpg_dsn(url) == "postgresql://postgres@127.0.0.1:5433/memlab_test"
    tapes = bench_config("tapes", tmp_path, environ={"TAPES_INGEST_URL": "http://127.0.0.1:9/ingest"})
    assert tapes.cache.tapes_ingest_url == "http://127.0.0.1:9/ingest"


# -- aggregation -----------------------------------------------------------------------


def _fake_repeat(append: float, read: float, recall: float, early: float, late: float) -> dict:
    return {
        "append": (append, {"flatness": (early, late, late / early)}),
        "read_last_10": (read, {"flatness": (early, early, 1.0)}),
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
    assert rows["append"]["ops_per_s"] == 6_000 and rows["append"]["extra"]["status"] is None  # judged against its ceiling
    assert rows["append"]["extra"]["runs"] == [4_000, 6_000, 7_000]
    assert rows["append"]["extra"]["flatness_ratio"] == pytest.approx(1.0)
    assert rows["append"]["extra"]["flatness_status"] == "PASS"
    assert rows["read_last_10"]["ops_per_s"] == 20_000 and rows["read_last_10"]["extra"]["status"] is None
    assert rows["read_last_10"]["extra"]["flatness_status"] is None  # no read-flatness goal for sqlite
    assert rows["recall"]["ops_per_s"] == 1_500 and rows["recall"]["extra"]["status"] == "MISS"
    assert rows["multi_append"]["n"] == 2_000 and rows["multi_append"]["extra"]["status"] is None
    assert "storage" not in rows

    fs = {row["operation"]: row for row in bench._rows_for("fs", spec, repeats, [None] * 3)}
    assert fs["append"]["extra"]["target"] is None and fs["read_last_10"]["extra"]["flatness_status"] == "PASS"

    memory = {row["operation"]: row for row in bench._rows_for("memory", spec, repeats, [None] * 3)}
    assert memory["append"]["extra"]["status"] is None  # no goals for memory


def test_storage_row_reports_bytes_per_turn_and_growth():
    spec = CacheBenchSpec(repeats=2, n=100, sessions=10, per_session=5)  # 150 turns per repeat
    storages = [
        {"bytes": 30_000, "db_bytes": 40_960, "wal_bytes": 8_192, "early": 200.0, "late": 200.0, "method": "files"},
        {"bytes": 30_000, "db_bytes": 40_960, "wal_bytes": 8_192, "early": 200.0, "late": 400.0, "method": "files"},
    ]
    repeats = [_fake_repeat(1, 1, 1, 1e-4, 1e-4)] * 2
    row = next(r for r in bench._rows_for("sqlite", spec, repeats, storages) if r["operation"] == "storage")
    extra = row["extra"]
    assert row["n"] == 150 and extra["bytes_per_entry"] == 200.0 and extra["method"] == "files"
    assert (extra["db_bytes"], extra["wal_bytes"]) == (40_960, 8_192)
    assert extra["growth_ratio"] == 1.5 and extra["growth_status"] == "PASS"
    raw = next(r for r in bench._rows_for("raw-sqlite", spec, repeats, storages) if r["operation"] == "storage")
    assert raw["extra"]["growth_status"] is None  # ceilings carry no goals


def test_backends_are_judged_against_their_ceiling_repeat_by_repeat():
    spec = CacheBenchSpec(repeats=3)
    ours = [_fake_repeat(a, r, 1, 1e-4, 1e-4) for a, r in ((900, 600), (1800, 1200), (900, 600))]
    theirs = [_fake_repeat(a, r, 1, 1e-4, 1e-4) for a, r in ((1000, 1000), (2000, 2000), (1000, 1000))]
    for repeat in theirs:
        del repeat["recall"]  # the ceilings do no recall
    rows = bench._rows_for("redis", spec, ours, [None] * 3) + bench._rows_for("raw-redis", spec, theirs, [None] * 3)
    bench._judge_against_raw(rows)
    by = {(row["backend"], row["operation"]): row["extra"] for row in rows}
    assert by[("redis", "append")]["of_raw"] == pytest.approx(0.9)
    assert by[("redis", "append")]["status"] == "PASS" and by[("redis", "append")]["target_of_raw"] == 0.8
    assert by[("redis", "read_last_10")]["of_raw"] == pytest.approx(0.6)
    assert by[("redis", "read_last_10")]["status"] == "MISS" and by[("redis", "read_last_10")]["target_of_raw"] == 0.7
    assert by[("redis", "multi_append")]["status"] is None and by[("redis", "multi_append")]["of_raw"] == pytest.approx(0.9)
    assert "of_raw" not in by[("redis", "recall")]
    assert "of_raw" not in by[("raw-redis", "append")]


def test_postgres_ceilings_are_equal_work_judged_and_bare_unjudged():
    assert bench.ceilings_of("postgres") == ("raw-postgres-equal-work", "raw-postgres")
    assert bench.ceilings_of("redis") == ("raw-redis",)
    assert bench.RAW_OF["postgres"] == "raw-postgres-equal-work" and bench.CONTRACT_COST_OF == {"postgres": "raw-postgres"}
    assert bench.RAW_TARGETS[("postgres", "append")] == bench.RAW_TARGETS[("postgres", "read_last_10")] == 0.75

    spec = CacheBenchSpec(repeats=2)
    ours = [_fake_repeat(a, r, 1, 1e-4, 1e-4) for a, r in ((900, 700), (1800, 1400))]
    equal = [_fake_repeat(a, r, 1, 1e-4, 1e-4) for a, r in ((1000, 1000), (2000, 2000))]
    bare = [_fake_repeat(a, r, 1, 1e-4, 1e-4) for a, r in ((2000, 1600), (4000, 3200))]
    for repeat in equal + bare:
        del repeat["recall"]
    rows = (
        bench._rows_for("postgres", spec, ours, [None] * 2)
        + bench._rows_for("raw-postgres-equal-work", spec, equal, [None] * 2)
        + bench._rows_for("raw-postgres", spec, bare, [None] * 2)
    )
    bench._judge_against_raw(rows)
    by = {(row["backend"], row["operation"]): row["extra"] for row in rows}
    append, read = by[("postgres", "append")], by[("postgres", "read_last_10")]
    assert append["raw"] == "raw-postgres-equal-work" and append["of_raw"] == pytest.approx(0.9)
    assert append["target_of_raw"] == 0.75 and append["status"] == "PASS"
    assert read["of_raw"] == pytest.approx(0.7) and read["target_of_raw"] == 0.75 and read["status"] == "MISS"
    assert append["bare"] == "raw-postgres" and append["of_bare"] == pytest.approx(0.45)
    assert by[("raw-postgres-equal-work", "append")]["of_bare"] == pytest.approx(0.5)
    assert "status" not in by[("postgres", "multi_append")] or by[("postgres", "multi_append")]["status"] is None
    for op in ("append", "read_last_10", "multi_append"):
        for ceiling in ("raw-postgres-equal-work", "raw-postgres"):
            assert by[(ceiling, op)].get("target") is None and by[(ceiling, op)].get("status") is None
            assert "target_of_raw" not in by[(ceiling, op)] and "of_raw" not in by[(ceiling, op)]
        assert by[("raw-postgres", op)]["role"] == "contract cost"
        assert "role" not in by[("raw-postgres-equal-work", op)]

    table = format_table(rows, spec)
    throughput = table.split("\n\n")[1]  # the first table, before the flatness and storage ones
    lines = {
        f"{line.split()[0]} {op}": line
        for line in throughput.splitlines()
        for op, label in (("append", "append (1 session)"), ("read", "read last 10"))
        if label in line
    }
    assert "90%" in lines["postgres append"] and ">= 0.75× raw" in lines["postgres append"] and lines["postgres append"].endswith("PASS")
    assert lines["postgres read"].endswith("MISS")
    assert "none (contract cost)" in lines["raw-postgres append"]
    assert not lines["raw-postgres append"].endswith(("PASS", "MISS"))
    assert not lines["raw-postgres-equal-work append"].endswith(("PASS", "MISS"))
    assert "contract cost (raw-postgres, bare statements; no target): postgres at 45% / 44%, raw-postgres-equal-work at 50% / 62%" in table
    assert "postgres of raw-postgres-equal-work" in table
    frame = to_frame(rows)
    assert frame.loc[(frame.backend == "postgres") & (frame.operation == "append"), "target"].item() == ">= 0.75× raw"
    assert frame.loc[(frame.backend == "raw-postgres") & (frame.operation == "append"), "target"].item() == "none (contract cost)"


# -- whole runs ------------------------------------------------------------------------


async def test_bench_cache_rows():
    spec = CacheBenchSpec(backends=("memory", "sqlite", "fs", "no_such_backend"), repeats=2, n=30, sessions=3, per_session=2)
    lines = []
    rows = await bench_cache(spec, environ={}, progress=lines.append)
    assert lines[:2] == ["memory: repeat 1/2", "memory: repeat 2/2"]
    assert lines[2:4] == ["sqlite + raw-sqlite: repeat 1/2", "sqlite + raw-sqlite: repeat 2/2"]
    assert not any(line.startswith("no_such_backend") for line in lines)

    by_key = {(row["backend"], row["operation"]): row for row in rows}
    for backend in ("memory", "sqlite", "raw-sqlite", "fs", "raw-diskcache"):
        assert by_key[(backend, "append")]["ops_per_s"] > 0
        assert len(by_key[(backend, "append")]["extra"]["runs"]) == 2
        assert by_key[(backend, "multi_append")]["n"] == 6
        assert by_key[(backend, "read_last_10")]["extra"]["flatness_ratio"] > 0
    assert ("raw-sqlite", "recall") not in by_key
    assert by_key[("sqlite", "recall")]["extra"]["mean_hits"] > 0
    assert by_key[("sqlite", "append")]["extra"]["raw"] == "raw-sqlite"
    assert by_key[("fs", "read_last_10")]["extra"]["raw"] == "raw-diskcache"
    assert by_key[("fs", "append")]["extra"]["of_raw"] > 0
    for backend in ("sqlite", "raw-sqlite", "fs", "raw-diskcache"):
        storage = by_key[(backend, "storage")]["extra"]
        assert storage["bytes"] > 0 and storage["bytes_per_entry"] == storage["bytes"] / 36
        assert storage["db_bytes"] > 0 and storage["wal_bytes"] is not None and storage["method"] == "files"
    assert ("memory", "storage") not in by_key
    assert by_key[("no_such_backend", "append")]["extra"]["status"] == "skipped"
    order = [row["backend"] for row in rows]
    assert order.index("sqlite") < order.index("raw-sqlite") < order.index("fs") < order.index("raw-diskcache")

    frame = to_frame(rows)
    assert list(frame.columns) == ["backend", "operation", "n", "ops_per_s", "of_raw", "target", "result", "bytes_per_turn", "reason"]
    assert frame.loc[(frame.backend == "fs") & (frame.operation == "append"), "target"].item() == ">= 0.8× raw"
    assert skipped_backends(rows) == {"no_such_backend": "skipped: " + by_key[("no_such_backend", "append")]["extra"]["reason"]}

    table = format_table(rows, spec)
    assert "no_such_backend: skipped" in table
    for text in ("raw-sqlite", "raw-diskcache", "append flatness", "read flatness", "bytes/turn", "wal file", "2nd/1st"):
        assert text in table

    # where the time goes: each backend with a ceiling, both operations, parts that add up to the public call
    breakdown = {(row["backend"], row["extra"]["of"]): row["extra"] for row in rows if row["operation"] == "breakdown"}
    assert set(breakdown) == {(name, op) for name in ("sqlite", "fs") for op in ("append", "read_last_10")}
    for (name, op), extra in breakdown.items():
        assert extra["raw"] == bench.RAW_OF[name] and extra["target_of_raw"] == bench.RAW_TARGETS[(name, op)]
        assert min(extra["public_us"], extra["store_us"], extra["raw_us"]) > 0
        assert extra["own_us"] == pytest.approx(max(0.0, extra["public_us"] - extra["store_us"] - extra["decode_us"]))
        assert extra["allowed_us"] == pytest.approx(extra["raw_us"] / extra["target_of_raw"])
        assert (extra["decode_us"] > 0) == (op == "read_last_10")
    assert "where the time goes" in table and "memlab own" in table


async def test_server_backends_without_urls_are_listed_as_skipped():
    rows = await bench_cache(CacheBenchSpec(backends=("redis", "postgres"), repeats=1, n=5, sessions=1, per_session=1), environ={})
    assert skipped_backends(rows) == {
        "redis": "skipped: needs a server: set MEMLAB_TEST_REDIS_URL",
        "postgres": "skipped: needs a server: set MEMLAB_TEST_POSTGRES_URL or CACHE_DB_URL",
    }


async def test_unreachable_server_is_an_error_row_and_its_ceiling_is_not_run():
    spec = CacheBenchSpec(backends=("redis", "memory"), repeats=2, n=5, sessions=1, per_session=1)
    lines = []
    rows = await bench_cache(spec, environ={"MEMLAB_TEST_REDIS_URL": "redis://127.0.0.1:1/0"}, progress=lines.append)
    assert lines[0] == "redis + raw-redis: repeat 1/2" and not any("redis: repeat 2/2" in line for line in lines)
    reason = skipped_backends(rows)["redis"]
    assert reason.startswith("error: CacheConnectionError")
    assert "raw-redis" not in {row["backend"] for row in rows}
    assert any(row["backend"] == "memory" and row["ops_per_s"] for row in rows)


async def test_a_failing_ceiling_is_an_error_row_and_its_backend_still_runs(monkeypatch):
    async def broken(self):
        raise OSError("disk on fire")

    monkeypatch.setattr(RawSQLite, "open", broken)
    spec = CacheBenchSpec(backends=("sqlite",), repeats=2, n=5, sessions=1, per_session=1)
    lines = []
    rows = await bench_cache(spec, environ={}, progress=lines.append)
    assert lines == ["sqlite + raw-sqlite: repeat 1/2", "sqlite: repeat 1/2", "sqlite: repeat 2/2"]
    assert skipped_backends(rows) == {"raw-sqlite": "error: OSError: disk on fire"}
    append = next(row for row in rows if row["backend"] == "sqlite" and row["operation"] == "append")
    assert append["repeats"] == 2 and "of_raw" not in append["extra"]


def test_blocks_cover_the_range_and_split_at_cuts():
    assert blocks(120) == [(0, 50), (50, 100), (100, 120)]
    assert blocks(120, (10, 60)) == [(0, 10), (10, 50), (50, 60), (60, 100), (100, 120)]
    assert blocks(5, (10, 2)) == [(0, 2), (2, 5)]


# -- raw ceilings and storage accounting, store by store ------------------------------------


def _payloads(spec: CacheBenchSpec) -> list[str]:
    return Workload.make(spec).payloads


def _texts(rows) -> list[str]:
    return [row if isinstance(row, str) else row[0] for row in rows]


async def _check_raw(subject, spec: CacheBenchSpec = TINY) -> dict:
    """Appends read back in order, then one measured repeat with storage; returns that storage."""
    work = Workload.make(spec)
    await subject.open()
    try:
        for i, payload in enumerate(work.payloads[:12]):
            await subject.append("check", i, "q", "a", payload)
        assert _texts(await subject.read_last_10("check")) == work.payloads[2:12]
        assert await subject.read_last_10("nobody") == []
        await subject.cleanup(["check"])
        results, storage = await measure_subject(subject, spec, work)
    finally:
        await subject.close()
    assert set(results) == {"append", "read_last_10", "multi_append"}
    assert all(value > 0 for value, _ in results.values())
    assert storage is not None and storage["bytes"] > 0
    assert storage["early"] >= 0 and storage["late"] >= 0  # tiny runs may not fill a page per half
    return storage


async def test_raw_sqlite_ceiling(tmp_path):
    storage = await _check_raw(RawSQLite(tmp_path, "bench-u"))
    assert storage["db_bytes"] > 0 and storage["wal_bytes"] > 0  # WAL mode: appends land in the -wal file


async def test_raw_diskcache_ceiling(tmp_path):
    storage = await _check_raw(RawDiskcache(tmp_path, "bench-u"))
    assert storage["db_bytes"] > 0


@pytest.mark.server
async def test_raw_redis_ceiling_cleans_up():
    url = server_url("MEMLAB_TEST_REDIS_URL")
    subject = RawRedis(bench._redis_kwargs(url), f"bench-test-{uuid.uuid4().hex[:12]}")
    storage = await _check_raw(subject)
    assert storage["db_bytes"] is None
    probe = RedisProbe(bench._redis_kwargs(url), [f"bench_raw:{subject.user}:*"])
    try:
        assert await probe.keys() == []  # deleted after the run
    finally:
        await probe.close()


@pytest.mark.server
async def test_raw_postgres_ceiling_drops_its_table():
    import asyncpg

    url = server_url("MEMLAB_TEST_POSTGRES_URL")
    subject = RawPostgres(url, "bench-u")
    await _check_raw(subject)
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        assert await conn.fetchval("SELECT to_regclass($1)", subject.table) is None
    finally:
        await conn.close()


async def _columns_and_indexes(conn, schema: str, table: str) -> tuple[list, list]:
    columns = await conn.fetch(
        "SELECT column_name, data_type, character_maximum_length, is_nullable, column_default IS NOT NULL AS has_default "
        "FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
        schema,
        table,
    )
    indexes = await conn.fetch(
        "SELECT i.indisunique, i.indisprimary, array_agg(a.attname::text ORDER BY k.ord) AS cols "
        "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
        "WHERE n.nspname = $1 AND c.relname = $2 GROUP BY i.indexrelid, i.indisunique, i.indisprimary ORDER BY 3, 1, 2",
        schema,
        table,
    )
    return [tuple(row) for row in columns], [tuple(row) for row in indexes]


@pytest.mark.server
async def test_raw_postgres_equal_work_has_memlabs_tables_and_drops_its_schema(tmp_path):
    import asyncpg

    url = server_url("MEMLAB_TEST_POSTGRES_URL")
    memlab = open_subject("postgres", tmp_path, {"MEMLAB_TEST_POSTGRES_URL": url})
    await memlab.open()  # memlab's own tables, at the newest migration
    subject = RawPostgresEqualWork(url, "bench-u")
    await subject.open()
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        for table in ("cache_qa_entries", "cache_session_state"):
            ours = await _columns_and_indexes(conn, subject.schema, table)
            assert ours == await _columns_and_indexes(conn, "public", table), table
            assert ours[0] and ours[1]
        settings = {name: await subject._conn.fetchval(f"SHOW {name}") for name in ("enable_seqscan", "plan_cache_mode")}
        assert settings == {"enable_seqscan": "off", "plan_cache_mode": "force_generic_plan"}  # memlab's connections' settings
    finally:
        await subject.close()
        await memlab.close()
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", subject.schema) == 0
        await _check_raw(RawPostgresEqualWork(url, "bench-u"))
    finally:
        await conn.close()


@pytest.mark.server
async def test_raw_postgres_equal_work_does_the_contracts_work():
    import asyncio

    import asyncpg

    url = server_url("MEMLAB_TEST_POSTGRES_URL")
    work = Workload.make(TINY)
    subject = RawPostgresEqualWork(url, f"bench-test-{uuid.uuid4().hex[:12]}")
    await subject.open()
    other = await asyncpg.connect(asyncpg_dsn(url))
    qa, state = subject.tables
    ids = "user_id = $1 AND session_id = 's'"
    try:
        for i in range(3):
            await subject.append("s", i, "q", "a", work.payloads[i])
        before = time.time()
        row = await other.fetchrow(f"SELECT expires_at, epoch FROM {state} WHERE {ids} AND kind = 'qa'", subject.user)
        assert before + RAW_TTL_SECONDS - 60 < row["expires_at"] <= before + RAW_TTL_SECONDS  # a real expiry, 7 days out
        stored = await other.fetch(f"SELECT qa_id, payload FROM {qa} WHERE {ids} ORDER BY seq", subject.user)
        assert [r["payload"] for r in stored] == work.payloads[:3]  # the byte-identical payloads
        assert [r["qa_id"] for r in stored] == [json.loads(p)["qa_id"] for p in work.payloads[:3]]  # the payload's own UUID

        with pytest.raises(asyncpg.UniqueViolationError):  # the unique (user, session, qa_id) is enforced
            await subject.append("s", 9, "q", "a", work.payloads[0])

        # the ordering lock: an append waits for a transaction holding the state row (as memlab's general path does)
        async with other.transaction():
            await other.execute(f"SELECT 1 FROM {state} WHERE {ids} AND kind = 'qa' FOR UPDATE", subject.user)
            blocked = asyncio.ensure_future(subject.append("s", 3, "q", "a", work.payloads[3]))
            await asyncio.sleep(0.3)
            assert not blocked.done()
        await blocked
        assert _texts(await subject.read_last_10("s")) == work.payloads[:4]

        # the liveness check: once the expiry passes the session reads empty, and the next append starts it afresh
        await other.execute(f"UPDATE {state} SET expires_at = $2 WHERE {ids}", subject.user, time.time() - 1)
        assert await subject.read_last_10("s") == []
        await subject.append("s", 4, "q", "a", work.payloads[4])
        assert _texts(await subject.read_last_10("s")) == [work.payloads[4]]
        fresh = await other.fetchrow(f"SELECT expires_at, epoch FROM {state} WHERE {ids}", subject.user)
        assert fresh["expires_at"] > time.time() + RAW_TTL_SECONDS - 60 and fresh["epoch"] != row["epoch"]

        # a lagging expiry (older than the 5 % slack) is re-stamped by the next append
        await other.execute(f"UPDATE {state} SET expires_at = $2 WHERE {ids}", subject.user, time.time() + RAW_TTL_SECONDS * 0.9)
        await subject.append("s", 5, "q", "a", work.payloads[5])
        assert await other.fetchval(f"SELECT expires_at FROM {state} WHERE {ids}", subject.user) > time.time() + RAW_TTL_SECONDS * 0.99
        await subject.cleanup(["s"])
        assert await other.fetchval(f"SELECT count(*) FROM {qa}") == await other.fetchval(f"SELECT count(*) FROM {state}") == 0
    finally:
        await other.close()
        await subject.close()


@pytest.mark.server
async def test_postgres_runs_beside_its_equal_work_and_bare_ceilings():
    import asyncpg

    url = server_url("MEMLAB_TEST_POSTGRES_URL")
    spec = CacheBenchSpec(backends=("postgres",), repeats=2, n=30, sessions=3, per_session=2)
    lines = []
    rows = await bench_cache(spec, environ={"MEMLAB_TEST_POSTGRES_URL": url}, progress=lines.append)
    assert lines == [f"postgres + raw-postgres-equal-work + raw-postgres: repeat {r}/2" for r in (1, 2)] + ["postgres: where the time goes"]
    assert skipped_backends(rows) == {}
    by = {(row["backend"], row["operation"]): row for row in rows}
    for op in ("append", "read_last_10"):
        extra = by[("postgres", op)]["extra"]
        assert extra["raw"] == "raw-postgres-equal-work" and extra["of_raw"] > 0
        assert extra["target_of_raw"] == 0.75 and extra["status"] in ("PASS", "MISS")
        assert extra["bare"] == "raw-postgres" and extra["of_bare"] > 0
        assert by[("raw-postgres-equal-work", op)]["extra"]["of_bare"] > 0
    for ceiling in ("raw-postgres-equal-work", "raw-postgres"):
        for op in ("append", "read_last_10", "multi_append"):
            extra = by[(ceiling, op)]["extra"]
            assert by[(ceiling, op)]["ops_per_s"] > 0 and len(extra["runs"]) == 2
            assert extra.get("status") is None and "target_of_raw" not in extra
        assert (ceiling, "recall") not in by
        assert by[(ceiling, "storage")]["extra"]["bytes"] > 0
    assert by[("raw-postgres", "append")]["extra"]["role"] == "contract cost"
    table = format_table(rows, spec)
    for text in ("raw-postgres-equal-work", ">= 0.75× raw", "none (contract cost)", "contract cost (raw-postgres"):
        assert text in table
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        left = await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench\\_eq\\_%'")
    finally:
        await conn.close()
    assert left == 0  # every repeat's schema was dropped


async def test_file_probe_sees_wal_content_and_files(tmp_path):
    subject = RawSQLite(tmp_path, "u")
    await subject.open()
    try:
        before = await subject.probe.measure()
        for i, payload in enumerate(_payloads(CacheBenchSpec(n=100))):  # ~300 WAL frames: below the autocheckpoint
            await subject.append("s", i, "q", "a", payload)
        after = await subject.probe.measure()
    finally:
        await subject.close()
    assert after.wal_bytes > 0 and after.db_bytes == before.db_bytes  # not checkpointed yet: rows are in the WAL
    assert after.bytes - before.bytes >= 100 * 250  # ... and still counted
    assert (await FileProbe(tmp_path / "missing").measure()).bytes == 0


async def _backend_storage(name: str, tmp_path, environ) -> tuple[dict, object]:
    subject = open_subject(name, tmp_path, environ)
    await subject.open()
    try:
        results, storage = await measure_subject(subject, TINY)
    finally:
        await subject.close()
    assert results["recall"][1]["mean_hits"] > 0
    return storage, subject


@pytest.mark.parametrize("name", ["sqlite", "fs"])
async def test_file_backend_storage_is_counted(name, tmp_path):
    storage, subject = await _backend_storage(name, tmp_path, {})
    assert subject.method == "files"
    assert storage["bytes"] > TINY.entries_per_repeat * 200  # ~250-byte payloads plus keys and indexes
    assert storage["db_bytes"] > 0 and storage["wal_bytes"] is not None


@pytest.mark.server
async def test_redis_backend_storage_is_memory_usage_of_its_keys(tmp_path):
    url = server_url("MEMLAB_TEST_REDIS_URL")
    storage, subject = await _backend_storage("redis", tmp_path, {"MEMLAB_TEST_REDIS_URL": url})
    assert subject.method == "MEMORY USAGE" and storage["db_bytes"] is None
    assert storage["bytes"] > TINY.entries_per_repeat * 200
    probe = RedisProbe(bench._redis_kwargs(url), subject.probe.patterns)
    try:
        assert await probe.keys() == []  # the run deleted its sessions
    finally:
        await probe.close()


@pytest.mark.server
async def test_postgres_backend_storage_is_relation_size_delta(tmp_path):
    # A database of its own: other tests' rows in shared tables can shrink under autovacuum mid-run.
    async with postgres_database("memlab_bench_storage") as url:
        await _postgres_storage_counts_and_cleans_up(url, tmp_path)


async def _postgres_storage_counts_and_cleans_up(url: str, tmp_path) -> None:
    import asyncpg

    storage, subject = await _backend_storage("postgres", tmp_path, {"MEMLAB_TEST_POSTGRES_URL": url})
    assert subject.method == "pg_total_relation_size" and storage["bytes"] > 0
    assert isinstance(subject.probe, PostgresProbe) and "cache_qa_entries" in subject.probe.tables
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        left = await conn.fetchval("SELECT count(*) FROM cache_qa_entries WHERE user_id = $1", subject.user)
    finally:
        await conn.close()
    assert left == 0  # the run deleted its sessions
