"""The `memlab` command: `bench cache`, `demo`, and `./.env` / `--env-file` (no timing assertions here)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memlab.cli import main

SMALL = ["bench", "cache", "--n", "50", "--sessions", "5", "--per-session", "4", "--repeats", "1", "--quiet"]

_STACK_ENV = ("CACHING", "CACHE_BACKEND", "CACHE_DB_URL", "MEMLAB_DB_URL", "SESSION_TTL_SECONDS", "MEMLAB_TTL_POLICY", "SESSION_SEARCH_MODE")


@pytest.fixture(autouse=True)
def _no_dot_env_of_the_checkout(tmp_path, monkeypatch):
    """Run each command in a fresh folder: a developer's ./.env is not read."""
    monkeypatch.chdir(tmp_path)


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
    assert ">= 0.6× raw" in sqlite_append and ("PASS" in sqlite_append or "MISS" in sqlite_append)
    assert "%" in sqlite_append  # share of the raw ceiling
    assert "where the time goes" in out and "memlab own" in out

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
    assert text.count("Plotly.newPlot") == 2 and "<img" not in text  # plotly installed: the comparison and the per-turn chart, interactive
    assert "id='machine'" in text and "memlab/minilm" in text and "CPUs" in text
    assert all(mode in text for mode in ("concurrent", "sequential", "off")) and "latency_p50_ms" in text


def test_demo_rejects_bad_options(demo_env, capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["demo", "--latency-ms", "-5"])
    assert excinfo.value.code == 2 and "must be a finite number >= 0, got -5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "walkthrough"])
    assert "invalid choice: 'walkthrough'" in capsys.readouterr().err


# -- ./.env and --env-file ------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The working directory of the command (a fresh folder), with no stack settings in the environment."""
    for name in (*_STACK_ENV, "MEMLAB_DATA_ROOT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    return tmp_path


def _cache_backend(capsys) -> str:
    line = next(line for line in capsys.readouterr().out.splitlines() if "cache backend: " in line and "(" in line)
    return line.split(":", 1)[1].split()[0]


def test_dot_env_in_the_working_directory_configures_the_stack(workdir, capsys):
    (workdir / ".env").write_text(f"CACHE_BACKEND=memory\nMEMLAB_DATA_ROOT={workdir / 'from-dotenv'}\n")
    assert main(["demo", "session"]) == 0
    out = capsys.readouterr().out
    assert "cache backend:  memory (MemoryCache)" in out
    assert f"data root:      {(workdir / 'from-dotenv').resolve()}" in out
    assert "CACHE_BACKEND" not in os.environ and "MEMLAB_DATA_ROOT" not in os.environ  # for the run only


@pytest.mark.parametrize("value", ["sqlite", ""], ids=["set", "empty"])
def test_the_environment_wins_over_dot_env_and_an_empty_variable_counts_as_unset(workdir, monkeypatch, capsys, value):
    (workdir / ".env").write_text("CACHE_BACKEND=memory\n")
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(workdir / "data"))
    monkeypatch.setenv("CACHE_BACKEND", value)
    assert main(["demo", "session"]) == 0
    assert _cache_backend(capsys) == (value or "memory")  # pydantic-settings' rule: empty values are ignored
    assert os.environ["CACHE_BACKEND"] == value


def test_env_file_names_another_file_and_dot_env_is_not_read(workdir, monkeypatch, capsys):
    (workdir / ".env").write_text("CACHE_BACKEND=no_such_backend\n")
    (workdir / "lab.env").write_text(f"CACHE_BACKEND=memory\nMEMLAB_DATA_ROOT={workdir / 'data'}\n")
    assert main(["--env-file", "lab.env", "demo", "session"]) == 0
    assert _cache_backend(capsys) == "memory"


def test_a_missing_env_file_is_a_one_line_usage_error(workdir, capsys):
    assert main(["--env-file", "nope.env", "demo", "session"]) == 2
    assert capsys.readouterr().err == "memlab: error: --env-file nope.env: no such file\n"
    assert main(["--env-file", ".", "demo"]) == 2
    assert "not a file" in capsys.readouterr().err


def test_a_bad_value_in_dot_env_is_a_config_error(workdir, capsys):
    (workdir / ".env").write_text("CACHE_BACKEND=no_such_backend\n")
    assert main(["demo", "session"]) == 2
    assert "unknown cache backend 'no_such_backend'" in capsys.readouterr().err


def test_serve_has_the_file_applied_before_uvicorn_starts_its_workers(workdir, monkeypatch):
    """The workers (processes uvicorn spawns) inherit ``os.environ``: the file's values are in it at serve()."""
    (workdir / ".env").write_text(f"CACHE_BACKEND=memory\nMEMLAB_DATA_ROOT={workdir / 'data'}\nMEMLAB_OFFLINE_LATENCY_MS=7\n")
    api = pytest.importorskip("memlab.api")
    seen = []
    monkeypatch.setattr(api, "serve", lambda **options: seen.append({k: os.environ.get(k) for k in ("CACHE_BACKEND", "MEMLAB_OFFLINE_LATENCY_MS")}))
    assert main(["serve", "--workers", "2"]) == 0
    assert seen == [{"CACHE_BACKEND": "memory", "MEMLAB_OFFLINE_LATENCY_MS": "7"}]
    assert (workdir / "data" / "memlab.db").is_file()  # the pre-start check opened the stack of the file's data root


def test_help_says_where_settings_come_from(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--env-file PATH" in text and ".env in the working directory" in text
    assert "a variable set in the environment wins over the file" in text




def test_the_mode_table_of_a_run_where_every_mode_failed_is_the_headings_alone():
    import pandas

    from memlab.demo import format_mode_table

    lines = format_mode_table(pandas.DataFrame({"analysis.search_mode": []})).splitlines()
    assert len(lines) == 2 and lines[0].startswith("mode") and set(lines[1]) <= {"-", " "}


def test_demo_without_matplotlib_writes_the_report_without_charts(demo_env, capsys, monkeypatch):
    """The core install has no matplotlib (it comes with memlab[widgets]): the demo still runs and says what it left out."""
    import importlib.util

    from memlab.demo._modes import NO_CHARTS

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name in ("matplotlib", "plotly") else real(name, *args))
    assert main(["demo", "--turns", "4", "--documents", "3", "--latency-ms", "0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert NO_CHARTS in out
    report = Path(next(line for line in out.splitlines() if line.startswith("report: ")).removeprefix("report: "))
    text = report.read_text()
    assert "<img" not in text and "Plotly" not in text and "memlab[widgets]" in text and "latency_p50_ms" in text


def test_demo_without_plotly_draws_png_charts(demo_env, capsys, monkeypatch):
    """matplotlib but no plotly: the same two charts, as static PNGs."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "plotly" else real(name, *args))
    assert main(["demo", "--turns", "4", "--documents", "3", "--latency-ms", "0", "--quiet"]) == 0
    out = capsys.readouterr().out
    report = Path(next(line for line in out.splitlines() if line.startswith("report: ")).removeprefix("report: "))
    text = report.read_text()
    assert text.count("<img src='data:image/png;base64,") == 2 and "Plotly" not in text
