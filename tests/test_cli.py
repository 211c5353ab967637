"""The `memlab` command: `bench cache` and `demo` (no timing assertions here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.cli import main

SMALL = ["bench", "cache", "--n", "50", "--sessions", "5", "--per-session", "4", "--repeats", "1", "--quiet"]

_STACK_ENV = ("CACHING", "CACHE_BACKEND", "CACHE_DB_URL", "SESSION_TTL_SECONDS", "MEMLAB_TTL_POLICY", "SESSION_SEARCH_MODE")


def test_bench_cache_prints_backends_and_raw_ceiling(capsys, tmp_path):
    out_json = tmp_path / "out" / "rows.json"
    assert main([*SMALL, "--backends", "memory,sqlite", "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for backend in ("memory", "sqlite", "raw-sqlite"):
        assert any(line.startswith(f"{backend} ") and "append (1 session)" in line for line in lines), backend
    for label in ("read last 10", "keyword recall", "append (5×4)", "append flatness", "bytes/turn"):
        assert label in out
    sqlite_append = next(line for line in lines if line.startswith("sqlite ") and "append (1 session)" in line)
    assert ">= 5,000/s" in sqlite_append and ("PASS" in sqlite_append or "MISS" in sqlite_append)
    assert "%" in sqlite_append  # share of the raw ceiling

    document = json.loads(out_json.read_text())
    assert document["spec"]["n"] == 50
    assert {row["backend"] for row in document["rows"]} == {"memory", "sqlite", "raw-sqlite"}


def test_bench_cache_unknown_backend_is_a_usage_error_naming_the_valid_ones(capsys):
    assert main([*SMALL, "--backends", "memory,nosuch", "--no-raw"]) == 2
    err = capsys.readouterr().err
    assert "'nosuch'" in err and "memory, postgres, redis, sqlite" in err.replace("fs, ", "")


def test_version(capsys):
    import memlab

    with pytest.raises(SystemExit) as excinfo:
        main(["--version"])
    assert excinfo.value.code == 0
    assert capsys.readouterr().out.strip() == f"memlab {memlab.__version__}"


def test_json_dash_writes_json_to_stdout_and_the_table_to_stderr(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*SMALL, "--backends", "memory", "--no-raw", "--json", "-"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)  # nothing but the JSON on stdout
    assert {row["backend"] for row in document["rows"]} == {"memory"}
    assert "append (1 session)" in captured.err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "modes", "--modes", "nosuch"],
        ["bench", "recall", "--types", "NO_SUCH_TYPE"],
        ["bench", "ingest", "--dims", "a,b"],
    ],
    ids=["modes", "recall-types", "ingest-dims"],
)
def test_bad_values_exit_2(argv, capsys):
    assert main([*argv, "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("memlab: error:")


@pytest.mark.parametrize("argv", [[], ["bench"]])
def test_missing_command_prints_help(argv, capsys):
    assert main(argv) == 2
    assert "usage: memlab" in capsys.readouterr().err


def test_bench_rejects_bad_sizes(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["bench", "cache", "--n", "0"])
    assert excinfo.value.code == 2
    assert "must be >= 1" in capsys.readouterr().err


@pytest.fixture
def demo_env(monkeypatch, tmp_path):
    for name in _STACK_ENV:
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "data"
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(root))
    return root


def test_demo_walks_through_session_memory(demo_env, capsys):
    assert main(["demo", "session"]) == 0
    out = capsys.readouterr().out
    assert out.count("session_stored") == 4
    assert "recall('Alice flight') -> 2 hits" in out
    assert "matched 2 tokens: \"Alice's flight to Lisbon" in out
    assert "get_session: 4 turns, oldest first" in out
    assert "score=5) -> True" in out
    assert "stack.frames.entries(): a pandas DataFrame, 4 rows" in out
    assert "Correct: book the window seat." in out
    assert "cache backend:  sqlite (SQLCache)" in out
    assert "TTL policy:     lazy_slack, slack 0.05: 604800 s" in out
    assert f"data root:      {demo_env.resolve()}" in out
    assert (demo_env / "cache.db").is_file()


def test_demo_starts_clean_on_a_second_run(demo_env, capsys):
    assert main(["demo", "session"]) == 0
    capsys.readouterr()
    assert main(["demo", "session"]) == 0
    out = capsys.readouterr().out
    assert "cleared turns left in 'demo_session'" in out
    assert "get_session: 4 turns" in out


def test_demo_reports_config_errors(demo_env, monkeypatch, capsys):
    monkeypatch.setenv("CACHE_BACKEND", "no_such_backend")
    assert main(["demo"]) == 2  # a bad setting is a usage error
    assert "unknown cache backend 'no_such_backend'" in capsys.readouterr().err
    assert main(["demo", "session"]) == 2
    assert "unknown cache backend 'no_such_backend'" in capsys.readouterr().err


def test_demo_compares_the_modes_and_writes_a_report(demo_env, capsys):
    """``memlab demo`` (what ``make demo`` runs) on the embedded default: the table, the sentences, the report file."""
    assert main(["demo", "--turns", "6", "--documents", "4", "--latency-ms", "30", "--quiet"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("mode "))
    for column in ("answered", "p50 ms", "p95 ms", "tokens/turn", "LLM calls", "guidance written", "hit rate"):
        assert column in header
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 2 :][:3]}
    assert set(rows) == {"concurrent", "sequential", "off"}
    assert rows["concurrent"][1] == rows["off"][1] == "6"  # turns
    assert "sqlite session cache, embedder memlab/minilm, LLM memlab/offline" in out
    assert "concurrent answers in" in out and "off skips the analysis" in out
    report = Path(next(line for line in lines if line.startswith("report: ")).removeprefix("report: "))
    assert report.parent == (demo_env / "reports").resolve() and report.suffix == ".html"
    text = report.read_text()
    assert "<img src='data:image/png;base64," in text
    assert all(mode in text for mode in ("concurrent", "sequential", "off")) and "latency_p50_ms" in text


def test_demo_rejects_bad_options(demo_env, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["demo", "--latency-ms", "-5"])
    assert excinfo.value.code == 2 and "must be a finite number >= 0, got -5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "walkthrough"])
    assert "invalid choice: 'walkthrough'" in capsys.readouterr().err
