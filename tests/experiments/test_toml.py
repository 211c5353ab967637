"""Experiment documents (config.toml) -> Grids, the summary table, and results on disk."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments import (
    CacheWorkload,
    Experiment,
    Grid,
    ModesConversation,
    format_summary,
    grid_from_toml,
    load_experiment,
    run_experiment,
    summary_table,
    write_results,
)

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = """
seeds = [0, 1]
cache_dir = "results/cache"

[base.embedding]
model = "memlab/hashing"

[base.cache]
backend = "memory"

[vary]
"analysis.search_mode" = ["concurrent", "off"]
llm.offline_latency_ms = [0, 50]
merge = { policy = ["rrf"] }

[workload]
name = "modes"
turns = 3
documents = 4

[report]
metrics = ["wall_s", "answered"]
"""

SERVERS = """
seeds = [0]

[base.embedding]
model = "memlab/hashing"

[vary]
cache = [
    { backend = "memory" },
    { backend = "redis", server_url = "${MEMLAB_TOML_TEST_REDIS}" },
    { backend = "postgres", server_url = "${MEMLAB_TOML_TEST_PG}" },
]

[workload]
name = "CacheWorkload"
operation = "append"
n = 5
"""


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_document_builds_its_grid_with_dotted_keys_joined_and_paths_beside_the_file(tmp_path):
    path = write(tmp_path, DOCUMENT)
    experiment = load_experiment(path, environ={})
    assert isinstance(experiment, Experiment)
    assert experiment.vary == {"analysis.search_mode": ["concurrent", "off"], "llm.offline_latency_ms": [0, 50], "merge.policy": ["rrf"]}
    assert isinstance(experiment.workload, ModesConversation) and experiment.workload.turns == 3
    assert experiment.seeds == (0, 1) and experiment.metrics == ("wall_s", "answered")
    assert experiment.cache_dir == tmp_path / "results" / "cache" and experiment.results_dir == tmp_path / "results"
    grid = experiment.grid()
    assert isinstance(grid, Grid) and len(grid) == 8
    last = grid.cells[-1].config
    assert (last.analysis.search_mode, last.llm.offline_latency_ms, last.merge.policy) == ("off", 50, "rrf")
    assert (last.cache.backend, last.embedding.model) == ("memory", "memlab/hashing")
    assert grid.workload is experiment.workload  # no environment variable in [vary]: no gate


def test_overrides_replace_whole_entries_and_cache_dir_none_turns_the_cache_off(tmp_path):
    path = write(tmp_path, DOCUMENT)
    grid = grid_from_toml(path, environ={}, vary={"llm_latency_ms": [0]}, seeds=[3], cache_dir=None,
                          workload={"name": "CacheWorkload", "n": 7})
    assert [cell.settings for cell in grid.cells] == [{"llm_latency_ms": 0}]
    assert grid.seeds == (3,) and grid.cache_dir is None
    assert isinstance(grid.workload, CacheWorkload) and grid.workload.n == 7
    assert grid.cells[0].config.cache.backend == "memory"  # [base] kept
    from_dict = load_experiment(None, base={"cache": {"backend": "memory"}}, workload={"name": "cache"}, cache_dir="relative")
    assert from_dict.cache_dir == Path("relative") and from_dict.results_dir == Path.cwd() / "results"


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        ("[bench]\nn = 1\n", {}, "unknown entry 'bench'"),
        ("[workload]\nname = 'Nope'\n", {}, "not a workload of memlab.experiments"),
        ("[workload]\nname = 'modes'\nturnz = 3\n", {}, "turnz"),
        ("[workload]\nname = 'modes'\n", {"seeds": [0, True]}, "seeds must be a non-empty list of ints"),
        ("[workload]\nname = 'modes'\n[vary]\nllm_latency_ms = 0\n", {}, "give a list of values"),
        ("[workload]\nname = 'modes'\n[base.cache]\nbackend = 'nope'\n", {}, "cache backend"),
        ("[workload]\nname = 'modes'\n[base.cache]\nbackend = 'redis'\nhost = '${NOT_SET_ANYWHERE}'\n", {}, "NOT_SET_ANYWHERE is not set"),
        ("[workload]\nname = 'modes'\n[vary]\n'cache.host' = ['${NOT_SET_ANYWHERE}']\n", {}, "NOT_SET_ANYWHERE is not set"),
        ("[workload]\nname = 'modes'\n[vary]\ncache = [{backend = 'memory', server_url = 'redis://x'}]\n", {}, "server_url is for a server"),
        ("[workload]\nname = 'modes'\n[report]\ncolumns = ['x']\n", {}, "unknown entries ['columns']"),
        ("seeds = [0\n", {}, "not valid TOML"),
    ],
)
def test_what_a_document_gets_wrong_is_a_config_error_naming_it(tmp_path, text, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        load_experiment(write(tmp_path, text), environ={}, **overrides)


def test_server_urls_become_cache_fields_the_way_bench_cache_reads_them(tmp_path):
    environ = {"MEMLAB_TOML_TEST_REDIS": "redis://user:pw@10.1.2.3:6391/0", "MEMLAB_TOML_TEST_PG": "postgresql+asyncpg://postgres@127.0.0.1:5439/x"}
    experiment = load_experiment(write(tmp_path, SERVERS), environ=environ)
    assert experiment.unavailable == () and experiment.gated
    redis_value = dict(experiment.vary["cache"][1])
    assert redis_value.pop("password").get_secret_value() == "pw"
    assert redis_value == {"backend": "redis", "host": "10.1.2.3", "port": 6391, "username": "user"}
    assert experiment.vary["cache"][2] == {"backend": "postgres", "db_url": environ["MEMLAB_TOML_TEST_PG"]}
    grid = experiment.grid()
    redis = grid.cells[1].config.cache
    assert (redis.host, redis.port, redis.password.get_secret_value()) == ("10.1.2.3", 6391, "pw")
    assert "pw" not in grid.cells[1].label() and "**********" in grid.cells[1].label()  # rendered masked, as in the frame


async def test_a_server_whose_variable_is_unset_fails_its_cells_with_the_reason_and_the_rest_run(tmp_path):
    experiment = load_experiment(write(tmp_path, SERVERS), environ={})
    assert [key for key, _, _ in experiment.unavailable] == ["cache", "cache"]
    assert experiment.vary["cache"][1:] == [{"backend": "redis"}, {"backend": "postgres"}]
    grid = experiment.grid()
    frame = await grid.run(progress=False)
    status = frame.drop_duplicates("cell").set_index("cell")
    assert status.loc[0, "status"] == "ok"
    assert list(status["status"].astype(str)[1:]) == ["failed", "failed"]
    assert "ConfigError" in status.loc[1, "error"] and "MEMLAB_TOML_TEST_REDIS" in status.loc[1, "error"]
    assert "MEMLAB_TOML_TEST_PG" in status.loc[2, "error"] and "scripts/with-servers.sh" in status.loc[2, "error"]
    text = format_summary(frame)
    assert "failed runs:" in text and "MEMLAB_TOML_TEST_REDIS" in text
    table = summary_table(frame, ["ops_per_s", "n"])
    assert list(table["runs ok"]) == ["1/1", "0/1", "0/1"]
    assert table.loc[0, "n"] == 5 and table["n"][1:].isna().all()


def test_the_gate_keeps_cache_keys_independent_of_the_environment(tmp_path):
    path = write(tmp_path, SERVERS)
    without = grid_from_toml(path, environ={})
    with_servers = grid_from_toml(path, environ={"MEMLAB_TOML_TEST_REDIS": "redis://127.0.0.1:6391/0",
                                                 "MEMLAB_TOML_TEST_PG": "postgresql+asyncpg://postgres@127.0.0.1:5439/x"})
    assert without.keys[(0, 0)] == with_servers.keys[(0, 0)]  # the memory cell's result is reused either way
    assert without.workload.name == "cache" and repr(without.workload) == repr(CacheWorkload("append", n=5))


async def test_summary_medians_over_seeds_and_results_written_to_disk(tmp_path):
    path = write(tmp_path, '[base.cache]\nbackend = "memory"\n[vary]\ncache = [{ backend = "memory" }]\n[workload]\nname = "cache"\nn = 5\n')
    experiment = load_experiment(path, environ={}, seeds=[0, 1, 2])
    frame = await experiment.grid().run(progress=False)
    table = summary_table(frame, ["n", "p50_us"])
    assert list(table.columns) == ["cell", "cache", "runs ok", "n", "p50_us"]
    p50 = frame[frame["metric"] == "p50_us"]["value"].astype(float)
    assert table.loc[0, "runs ok"] == "3/3" and table.loc[0, "p50_us"] == pytest.approx(p50.median())
    with pytest.raises(ValidationError, match="metric 'nope' is not in the results"):
        summary_table(frame, ["nope"])
    text = format_summary(frame, ["n"], title="my title")
    assert text.splitlines()[0] == "my title" and "3 cell x seed runs, 0 read from the cache" in text and "failed runs" not in text
    written = write_results(frame, tmp_path / "results", table=text, stamp="run")
    assert written == tmp_path / "results" / "run.parquet"
    assert (tmp_path / "results" / "run.txt").read_text() == text + "\n"
    again = pd.read_parquet(written)
    assert len(again) == len(frame) and list(again.columns) == list(frame.columns)
    assert len(pd.read_csv(tmp_path / "results" / "run.csv")) == len(frame)


def test_run_experiment_is_what_a_run_py_does_and_its_exit_code_says_whether_a_run_failed(tmp_path, capsys):
    ok = tmp_path / "ok"
    ok.mkdir()
    write(ok, '[vary]\ncache = [{ backend = "memory" }]\n[workload]\nname = "cache"\nn = 5\n')
    assert run_experiment(ok) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok ({ok / 'config.toml'})") and "1 cell x seed runs" in out
    assert len(list((ok / "results").glob("*.parquet"))) == 1 and (ok / "results" / "cache").is_dir() is False
    bad = tmp_path / "bad"
    bad.mkdir()
    write(bad, '[vary]\ncache = [{ backend = "redis", host = "127.0.0.1", port = 1 }]\n[workload]\nname = "cache"\nn = 5\n')
    assert run_experiment(bad, [str(bad / "config.toml")]) == 1
    assert "failed runs:" in capsys.readouterr().out


GRID_DOCUMENTS = sorted(path for path in REPO.glob("experiments/*/config.toml") if "[workload]" in path.read_text())  # 001 is a bench spec


@pytest.mark.parametrize("path", GRID_DOCUMENTS, ids=lambda path: path.parent.name)
def test_every_experiment_grid_document_in_the_repository_builds_its_grid(path):
    grid = grid_from_toml(path, environ={})
    assert len(grid) >= 1
