"""``memlab bench serve``: tiny runs on a real ``memlab serve`` process; every request answered, no server left behind.

Under ``scripts/with-servers.sh`` the API runs on a throw-away PostgreSQL database and a
Redis cache; the command test clears those variables and runs on the SQLite defaults.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memlab.bench.serve import (
    CEILING_TARGET,
    ENDPOINTS,
    PHASES,
    ServeBenchSpec,
    _ceiling_lines,
    _ceiling_rows,
    format_serve_table,
    process_gone,
    run_bench_serve,
    server_environment,
)
from memlab.cli import main
from memlab.exceptions import ValidationError

TINY: dict[str, Any] = {
    "clients": 4, "turn_clients": 1, "seconds": 2.0, "single_seconds": 1.0, "sessions": 14, "warmup_requests": 8, "rounds": 1, "ceiling_seconds": 0.5,
}
TINY_ARGV = [
    "--clients", "4", "--turn-clients", "1", "--seconds", "2", "--single-seconds", "1", "--sessions", "14", "--rounds", "1", "--ceiling-seconds", "0.5",
    "--quiet",
]


def _check(result: dict[str, Any], workers: int) -> None:
    rows = {(row["phase"], row["operation"]): row for row in result["rows"]}
    assert set(rows) == {(phase, op) for phase in ("concurrent", "single") for op in (*ENDPOINTS, "all", "turn")}
    for phase in ("concurrent", "single"):
        every = rows[(phase, "all")]
        assert every["count"] == sum(rows[(phase, op)]["count"] for op in ENDPOINTS) > 0
        assert every["per_s"] > 0 and 0 < every["p50_ms"] <= every["p95_ms"] <= every["p99_ms"]
    assert rows[("concurrent", "turn")]["count"] > 0 and rows[("concurrent", "turn")]["p95_ms"] > 0
    assert rows[("concurrent", "all")]["single_p95_ms"] == rows[("single", "all")]["p95_ms"]
    errors = result["errors"]
    assert errors["total"] == 0 and errors["passed"], errors
    assert all(row["errors"] == 0 for row in rows.values())
    server = result["server"]
    assert server["workers_up"] == workers and 0 < server["first_healthz_s"] <= server["all_workers_s"]
    assert len(server["pids"]) == (1 if workers == 1 else workers + 1)  # uvicorn's supervisor and its workers
    assert [pid for pid in server["pids"] if not process_gone(pid)] == []
    ceiling = result["ceiling"]
    assert ceiling["same_answers"]["checked"] == 4 * 8 + 2 and ceiling["same_answers"]["mismatched"] == 0
    assert ceiling["server"]["workers_up"] == workers and [pid for pid in ceiling["server"]["pids"] if not process_gone(pid)] == []
    runs = {(run["phase"], run["server"]) for run in ceiling["runs"]}
    assert runs == {(phase, name) for phase in PHASES for name in ("memlab", "ceiling")}
    assert all(run["count"] > 0 and run["errors"] == 0 for run in ceiling["runs"])
    for row in ceiling["rows"]:
        assert row["memlab_per_s_worker"] > 0 and row["ceiling_per_s_worker"] > 0
        assert row["ratio"] == pytest.approx(row["memlab_per_s_worker"] / row["ceiling_per_s_worker"])  # one round: the ratio of its medians
        judged = row["cpu_ratio"] if row["judged"] == "cpu" else row["ratio"]  # CPU per request when /proc tells it
        assert row["passed"] == (judged >= CEILING_TARGET)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
async def test_a_tiny_run_answers_every_request_and_leaves_no_server(workers):
    result = await run_bench_serve(ServeBenchSpec(workers=workers, **TINY))
    _check(result, workers)
    table = format_serve_table(result)
    assert "1-client p95 ms" in table and "GET /api/v1/sessions/{id}" in table and "target 0: PASS" in table
    for column in ("memlab req/s/worker", "ceiling req/s/worker", "ratio", "min..max", ">= 0.7x", "memlab CPU µs/req", "CPU ratio"):
        assert column in table
    assert "all HTTP requests (the mix)" in table and "equal status and JSON body: yes" in table


def test_the_ceiling_table_says_miss_below_the_target():
    result = {
        "spec": {"clients": 16, "turn_clients": 2, "workers": 2, "rounds": 3, "ceiling_seconds": 3.0},
        "ceiling": {"same_answers": {"checked": 34, "mismatched": 0}},
    }
    runs = [
        {"round": r, "phase": phase, "server": name, "per_s": per_s, "per_s_worker": per_s / 2, "p50_ms": 5.0, "p99_ms": 9.0, "cpu_us_per_request": 1e6 / per_s}
        for r in range(3)
        for phase in PHASES
        for name, per_s in (("memlab", 60.0 + r), ("ceiling", 100.0))
    ]
    result["ceiling"]["rows"] = _ceiling_rows(runs)
    assert [row["ratio"] for row in result["ceiling"]["rows"]] == pytest.approx([0.61] * len(PHASES))
    lines = "\n".join(_ceiling_lines(result))
    assert "0.61x" in lines and "0.60..0.62" in lines and "MISS" in lines and "PASS" not in lines


@pytest.mark.slow
def test_the_command_on_the_sqlite_defaults_writes_json(tmp_path, capsys, monkeypatch):
    for name in ("MEMLAB_TEST_POSTGRES_URL", "MEMLAB_TEST_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "serve.json"
    assert main(["bench", "serve", "--workers", "2", *TINY_ARGV, "--json", str(out)]) == 0
    assert "all HTTP requests" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["stores"] == {"metadata": "sqlite", "cache": "sqlite"}
    _check(document, 2)


def test_the_server_environment_replaces_the_stores_and_keeps_the_rest(tmp_path):
    base = {"CACHE_BACKEND": "fs", "MEMLAB_DB_URL": "sqlite:////elsewhere.db", "LLM_MODEL": "openai/gpt-4o", "SESSION_TTL_SECONDS": "60"}
    env = server_environment(tmp_path, db_url="postgresql+asyncpg://u@h:5433/d", redis_url="redis://:p%40ss@127.0.0.1:6390/0", base=base)
    assert env["MEMLAB_DATA_ROOT"] == str(tmp_path) and env["MEMLAB_DB_URL"] == "postgresql+asyncpg://u@h:5433/d"
    assert (env["CACHE_BACKEND"], env["CACHE_HOST"], env["CACHE_PORT"], env["CACHE_PASSWORD"]) == ("redis", "127.0.0.1", "6390", "p@ss")
    assert "LLM_MODEL" not in env and env["EMBEDDING_MODEL"] == "memlab/hashing" and env["SESSION_TTL_SECONDS"] == "60"
    assert "CACHE_BACKEND" not in server_environment(tmp_path, base=base) and "MEMLAB_DB_URL" not in server_environment(tmp_path, base=base)


def test_bad_sizes_are_refused_before_anything_starts():
    with pytest.raises(ValidationError, match="turn_clients"):
        ServeBenchSpec(clients=2, turn_clients=2)
    with pytest.raises(ValidationError, match="seconds"):
        ServeBenchSpec(seconds=float("nan"))
    with pytest.raises(ValidationError, match="rounds"):
        ServeBenchSpec(rounds=0)
    with pytest.raises(ValidationError, match="ceiling_seconds"):
        ServeBenchSpec(ceiling_seconds=0)
    assert main(["bench", "serve", "--seconds", "0", "--quiet"]) == 2
    assert main(["bench", "serve", "--clients", "3", "--turn-clients", "3", "--quiet"]) == 2
