"""``memlab bench serve``: tiny runs on a real ``memlab serve`` process; every request answered, no server left behind.

Under ``scripts/with-servers.sh`` the API runs on a throw-away PostgreSQL database and a
Redis cache; the command test clears those variables and runs on the SQLite defaults.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memlab.bench.serve import ENDPOINTS, ServeBenchSpec, format_serve_table, process_gone, run_bench_serve, server_environment
from memlab.cli import main
from memlab.exceptions import ValidationError

TINY: dict[str, Any] = {"clients": 4, "turn_clients": 1, "seconds": 2.0, "single_seconds": 1.0, "sessions": 14, "warmup_requests": 8}
TINY_ARGV = ["--clients", "4", "--turn-clients", "1", "--seconds", "2", "--single-seconds", "1", "--sessions", "14", "--quiet"]


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


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
async def test_a_tiny_run_answers_every_request_and_leaves_no_server(workers):
    result = await run_bench_serve(ServeBenchSpec(workers=workers, **TINY))
    _check(result, workers)
    table = format_serve_table(result)
    assert "1-client p95 ms" in table and "GET /api/v1/sessions/{id}" in table and "target 0: PASS" in table


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
    assert main(["bench", "serve", "--seconds", "0", "--quiet"]) == 2
    assert main(["bench", "serve", "--clients", "3", "--turn-clients", "3", "--quiet"]) == 2
