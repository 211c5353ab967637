"""The experiment Grid: cells, validation, fresh stacks, failures, the disk cache, frames."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from pydantic import SecretStr

from memlab.config import CacheConfig, EmbeddingConfig, StackConfig
from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments import (
    TIMING_UNITS,
    CacheWorkload,
    Cell,
    Grid,
    Workload,
    WorkloadResult,
    cache_key,
)

BASE = StackConfig(embedding=EmbeddingConfig(model="memlab/hashing"), cache=CacheConfig(backend="memory", host="cache.example"))


class Probe(Workload):
    """A real, instant workload: echoes its config; raises for ``fail_seeds``; records each call."""

    name = "probe"
    turn_columns = {"turn": "Int64", "x": "Float64", "mode": "string"}

    def __init__(self, fail_seeds: tuple[int, ...] = (), turns: int = 2) -> None:
        self.fail_seeds = tuple(fail_seeds)
        self.turns = turns
        self.calls: list[tuple[StackConfig, int]] = []
        self.roots: list[tuple[Path, bool, bool]] = []  # (data_root, existed, empty) at call time

    def fingerprint(self) -> dict:
        return {"fail_seeds": list(self.fail_seeds), "turns": self.turns}

    async def run(self, config: StackConfig, seed: int) -> WorkloadResult:
        self.calls.append((config, seed))
        root = Path(config.data_root)
        self.roots.append((root, root.is_dir(), root.is_dir() and not any(root.iterdir())))
        (root / "scratch.txt").write_text("written by the probe")
        if seed in self.fail_seeds:
            raise RuntimeError(f"boom at seed {seed}")
        metrics = {"latency": float(config.llm.offline_latency_ms), "seed_echo": seed, "undefined": None}
        units = {"latency": "ms", "seed_echo": "seeds", "undefined": "ratio"}
        turns = [{"turn": i, "x": i * 1.5, "mode": config.analysis.search_mode} for i in range(self.turns)]
        return WorkloadResult(metrics, units, turns)


# -- cells -----------------------------------------------------------------------------------------


async def test_cells_are_the_cartesian_product_first_key_slowest_with_typed_columns():
    vary = {
        "analysis.search_mode": ["concurrent", "off"],
        "llm_latency_ms": [0, 200],
        "merge.rrf_k": [60, 10.5],
        "analysis.auto_feedback": [True, False],
        "cache": [{"backend": "memory"}],
    }
    probe = Probe()
    grid = Grid(base=BASE, vary=vary, workload=probe, seeds=[0, 1])
    assert len(grid.cells) == 16 and len(grid) == 32
    assert all(isinstance(cell, Cell) for cell in grid.cells)
    assert [cell.index for cell in grid.cells] == list(range(16))
    assert grid.cells[0].settings == {"analysis.search_mode": "concurrent", "llm_latency_ms": 0, "merge.rrf_k": 60,
                                      "analysis.auto_feedback": True, "cache": {"backend": "memory"}}
    assert grid.cells[1].settings["analysis.auto_feedback"] is False  # the last key varies fastest
    assert grid.cells[8].settings["analysis.search_mode"] == "off"  # the first key slowest
    last = grid.cells[-1].config
    assert (last.analysis.search_mode, last.llm.offline_latency_ms, last.merge.rrf_k, last.analysis.auto_feedback) == ("off", 200, 10.5, False)
    assert last.cache.host == "cache.example"  # a section dict merges onto the base section

    frame = await grid.run(progress=False)
    assert list(frame.columns) == ["cell", *vary, "seed", "workload", "metric", "value", "unit", "status", "error", "cached"]
    assert len(frame) == 32 * 3
    dtypes = {column: str(dtype) for column, dtype in frame.dtypes.items()}
    assert dtypes["cell"] == "Int64" and dtypes["seed"] == "Int64" and dtypes["value"] == "Float64"
    assert dtypes["llm_latency_ms"] == "Int64" and dtypes["merge.rrf_k"] == "Float64" and dtypes["analysis.auto_feedback"] == "boolean"
    for column in ("analysis.search_mode", "cache", "workload", "metric", "unit", "error"):
        assert isinstance(frame[column].dtype, pd.StringDtype), column
    assert isinstance(frame["status"].dtype, pd.CategoricalDtype) and list(frame["status"].cat.categories) == ["ok", "failed"]
    assert frame["cached"].dtype == bool
    assert not any(dtype == object for dtype in frame.dtypes)
    assert set(frame["cache"]) == {'{"backend":"memory"}'}
    assert (frame["workload"] == "probe").all() and (frame["status"] == "ok").all() and frame["error"].isna().all()
    # run order: cell by cell, seeds inside
    assert [(config.analysis.search_mode, seed) for config, seed in probe.calls][:3] == [("concurrent", 0), ("concurrent", 1), ("concurrent", 0)]
    latency = frame[(frame["metric"] == "latency") & (frame["cell"] == 15)]
    assert latency["value"].tolist() == [200.0, 200.0] and latency["unit"].tolist() == ["ms", "ms"]
    assert frame[frame["metric"] == "undefined"]["value"].isna().all()


def test_url_passwords_never_reach_the_frame_or_the_disk_cache(tmp_path):
    url = "postgresql+asyncpg://bench:hunter2@127.0.0.1:1/db"
    grid = Grid(BASE, {"db_url": [url], "cache": [{"backend": "memory", "db_url": url}]}, Probe(), cache_dir=tmp_path)
    frame = asyncio.run(grid.run(progress=False))
    assert "hunter2" not in frame.to_csv() and "bench:***@127.0.0.1" in frame["db_url"].iloc[0]
    assert not [path for path in tmp_path.rglob("*") if path.is_file() and "hunter2" in path.read_text()]


def test_alias_top_level_field_and_section_models():
    grid = Grid(BASE, {"llm_latency_ms": [5], "db_url": [None, "sqlite:///x.db"], "ttl": [{"policy": "none"}]}, Probe())
    assert [cell.config.llm.offline_latency_ms for cell in grid.cells] == [5, 5]
    assert [cell.config.db_url for cell in grid.cells] == [None, "sqlite:///x.db"]
    assert grid.cells[0].config.ttl.policy == "none"
    whole = Grid(BASE, {"cache": [CacheConfig(backend="fs")]}, Probe())
    assert whole.cells[0].config.cache.backend == "fs" and whole.cells[0].config.cache.host == "cache.example"
    assert len(Grid(BASE, {}, Probe()).cells) == 1  # no vary: the base alone


@pytest.mark.parametrize(
    ("vary", "named"),
    [
        ({"analysis.bogus": ["x"]}, "analysis.bogus"),
        ({"nosuch.field": [1]}, "nosuch.field"),
        ({"analysis.search_mode.deeper": ["x"]}, "analysis.search_mode.deeper"),
        ({"analysis.search_mode": ["concurrent", "bogus_mode"]}, "bogus_mode"),
        ({"cache.backend": ["memory", "nosuchbackend"]}, "nosuchbackend"),
        ({"merge.policy": ["no_such_policy"]}, "no_such_policy"),
        ({"llm_latency_ms": [0, -5]}, "-5"),
        ({"embedding.model": ["memlab/bogus"]}, "memlab/bogus"),
        ({"session.retriever": ["nope"]}, "nope"),
        ({"cache": [{"backend": "memory", "bogus_field": 1}]}, "bogus_field"),
        ({"cache": ["redis"]}, "cache"),
        ({"analysis.search_mode": []}, "analysis.search_mode"),
        ({"analysis.search_mode": "concurrent"}, "analysis.search_mode"),
        ({"data_root": ["/tmp/x"]}, "data_root"),
        ({"llm_latency_ms": [1], "llm.offline_latency_ms": [2]}, "llm.offline_latency_ms"),
        ({"llm_latency_ms": [50, 50.0]}, "values 50 and 50.0 give the same config"),
        ({"cache": [{"backend": "memory"}, {"backend": "memory", "ssl": False}]}, "give the same config"),
    ],
)
def test_a_bad_key_or_value_raises_config_error_naming_it_before_anything_runs(vary, named):
    probe = Probe()
    with pytest.raises(ConfigError) as raised:
        Grid(BASE, vary, probe, seeds=[0])
    assert named in str(raised.value)
    assert probe.calls == []


def test_combinations_are_checked_too_and_bad_arguments_are_validation_errors():
    with pytest.raises(ConfigError, match=r"grid cell 1 .*graph.chunk_overlap=64"):
        Grid(BASE, {"graph.chunk_size": [128, 32], "graph.chunk_overlap": [64]}, Probe())
    with pytest.raises(ConfigError, match="cache.enabled"):  # a workload's own check
        Grid(BASE, {"cache.enabled": [True, False]}, CacheWorkload(n=5))
    for seeds in ([], [0, 0], ["a"], 3):
        with pytest.raises(ValidationError):
            Grid(BASE, {}, Probe(), seeds=seeds)
    with pytest.raises(ValidationError):
        Grid(BASE, {}, object())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Grid(object(), {}, Probe())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Grid(BASE, [("analysis.search_mode", ["off"])], Probe())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("vary", "keys"),
    [
        ({"cache": [{"backend": "memory"}, {"backend": "sqlite"}], "cache.backend": ["fs"]}, ("'cache'", "'cache.backend'")),
        ({"cache.backend": ["fs"], "cache": [{"backend": "memory"}, {"backend": "sqlite"}]}, ("'cache'", "'cache.backend'")),
        ({"cache": [{"host": "a"}, CacheConfig(backend="fs")], "cache.backend": ["memory"]}, ("'cache'", "'cache.backend'")),
        ({"llm": [{"offline_latency_ms": 5}], "llm_latency_ms": [0]}, ("'llm'", "'llm_latency_ms'")),
        ({"llm_latency_ms": [0], "llm": [{"model": "memlab/offline"}, {"offline_latency_ms": 5}]}, ("'llm'", "'llm_latency_ms'")),
        ({"llm.api_key": ["sk-field-1234"], "llm": [{"api_key": "sk-section-5678"}]}, ("'llm'", "'llm.api_key'")),
    ],
)
def test_a_section_key_and_a_key_of_a_field_its_values_set_are_refused_in_either_order(vary, keys):
    probe = Probe()
    with pytest.raises(ConfigError, match="both set") as raised:
        Grid(BASE, vary, probe, cache_dir=None)
    assert all(key in str(raised.value) for key in keys)
    assert "sk-" not in str(raised.value)  # a secret value is named masked
    assert probe.calls == []


def test_a_section_key_and_a_field_its_values_leave_alone_make_cells_whose_labels_tell_the_truth():
    grid = Grid(BASE, {"cache": [{"host": "a"}, CacheConfig(host="b")], "cache.backend": ["fs", "memory"]}, Probe())
    assert [(cell.config.cache.host, cell.config.cache.backend) for cell in grid.cells] == [("a", "fs"), ("a", "memory"), ("b", "fs"),
                                                                                            ("b", "memory")]
    assert grid.cells[0].label() == "cache={\"host\":\"a\"}, cache.backend='fs'"


@pytest.mark.parametrize(
    ("vary", "cells"),
    [
        ({"cache.backend": ["fs"], "ttl.policy": ["auto", "sliding"]}, (0, 1)),  # fs's default is sliding
        ({"cache.backend": ["sqlite", "memory"], "ttl.policy": ["lazy_slack", "auto"]}, (0, 1)),  # sqlite's is lazy_slack
        ({"ttl.seconds": [0, 60], "ttl.policy": ["none", "sliding"]}, (0, 1)),  # no expiry is policy none
        ({"ttl.policy": ["sliding", "lazy_slack"], "ttl.slack": [0.05, 0.2]}, (0, 1)),  # slack only counts under lazy_slack
        ({"graph.chunk_size": [512, None]}, (0, 1)),  # the hashing embedder has no short window: 512 is the default
        ({"llm.api_key": ["sk-same-key-1"], "embedding.api_key": ["sk-same-key-1", None]}, (0, 1)),  # unset: the LLM's key
    ],
)
def test_cells_whose_configs_are_the_same_once_defaults_resolve_are_refused_across_keys(vary, cells):
    probe = Probe()
    with pytest.raises(ConfigError, match=rf"grid cells {cells[0]} .* and {cells[1]} .* give the same config") as raised:
        Grid(BASE, vary, probe)
    assert "sk-same" not in str(raised.value)
    assert probe.calls == []


def test_the_same_secret_twice_is_one_config_and_is_named_masked():
    with pytest.raises(ConfigError, match=r"values '\*{10}' and '\*{10}' give the same config .*values 0 and 2") as raised:
        Grid(BASE, {"llm.api_key": ["sk-one-account", "sk-other-account", SecretStr("sk-one-account")]}, Probe())
    assert "account" not in str(raised.value)

# -- running ------------------------------------------------------------------------------------------


async def test_every_run_gets_a_fresh_data_root_that_is_deleted_afterwards(tmp_path):
    base = BASE.model_copy(update={"data_root": tmp_path / "base-root"})
    probe = Probe()
    grid = Grid(base, {"analysis.search_mode": ["concurrent", "off"]}, probe, seeds=[0, 1, 2])
    await grid.run(progress=False)
    roots = [root for root, _, _ in probe.roots]
    assert len(set(roots)) == 6
    assert all(existed and empty for _, existed, empty in probe.roots)
    assert not any(root.exists() for root in roots)
    assert not (tmp_path / "base-root").exists()
    assert grid.cells[0].config.data_root == tmp_path / "base-root"  # the cell's own config is untouched


async def test_a_failing_run_is_recorded_and_the_grid_goes_on():
    probe = Probe(fail_seeds=(1,))
    grid = Grid(BASE, {"analysis.search_mode": ["concurrent", "off"]}, probe, seeds=[0, 1, 2])
    frame = await grid.run(progress=False)
    assert len(probe.calls) == 6
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == 2 and failed["seed"].tolist() == [1, 1]  # ONE row per failed cell x seed
    assert failed["error"].tolist() == ["RuntimeError: boom at seed 1"] * 2
    assert failed[["metric", "value", "unit"]].isna().all().all()
    assert (frame[frame["status"] == "ok"]["seed"] != 1).all()
    assert len(frame[frame["status"] == "ok"]) == 4 * 3
    assert [run.status for run in grid.runs] == ["ok", "failed", "ok"] * 2


async def test_a_cache_backend_that_cannot_connect_fails_its_cell_only():
    grid = Grid(BASE, {"cache": [{"backend": "redis", "host": "127.0.0.1", "port": 1}, {"backend": "memory"}]}, CacheWorkload(n=5))
    frame = await grid.run(progress=False)
    failed = frame[frame["status"] == "failed"]
    assert failed["cell"].tolist() == [0]
    assert failed["error"].iloc[0].startswith("CacheConnectionError: ")
    assert set(frame[frame["cell"] == 1]["metric"]) == {"ops_per_s", "p50_us", "p95_us", "n"}


async def test_a_stack_whose_session_cache_fails_open_fails_its_cell_instead_of_measuring_nothing():
    """The stack answers without an unreachable cache (fail-open); the workload notices nothing was stored."""
    from memlab.experiments import ModesConversation

    unreachable = {"backend": "redis", "host": "127.0.0.1", "port": 1}
    grid = Grid(BASE, {"cache": [unreachable, {"backend": "memory"}]}, ModesConversation(turns=3, documents=3))
    frame = await grid.run(progress=False)
    failed = frame[frame["status"] == "failed"]
    assert failed["cell"].tolist() == [0]
    assert "holds 0 of the 3 turns sent: the redis session cache failed open" in failed["error"].iloc[0]
    measured = frame[frame["cell"] == 1].set_index("metric")["value"]
    assert measured["turns"] == 3 and measured["answered"] == 3


async def test_turn_level_frame():
    probe = Probe(fail_seeds=(1,), turns=3)
    grid = Grid(BASE, {"analysis.search_mode": ["concurrent", "off"], "llm_latency_ms": [0, 1.5]}, probe, seeds=[0, 1])
    turns = await grid.run(progress=False, level="turn")
    assert list(turns.columns) == ["cell", "analysis.search_mode", "llm_latency_ms", "seed", "workload", "turn", "x", "mode"]
    assert len(turns) == 4 * 1 * 3  # failed seeds contribute no turns
    assert str(turns["turn"].dtype) == "Int64" and str(turns["x"].dtype) == "Float64" and str(turns["llm_latency_ms"].dtype) == "Float64"
    assert isinstance(turns["mode"].dtype, pd.StringDtype)
    assert (turns["mode"] == turns["analysis.search_mode"]).all()
    assert turns["turn"].tolist()[:3] == [0, 1, 2]
    metric = grid.frame("metric")  # the same run at the other level, nothing run again
    assert len(probe.calls) == 8 and set(metric["status"]) == {"ok", "failed"}
    with pytest.raises(ValidationError):
        grid.frame("cells")


async def test_progress_bar_and_silence(capsys):
    grid = Grid(BASE, {"analysis.search_mode": ["concurrent", "off"]}, Probe(), seeds=[0])
    await grid.run(progress=True)
    assert "probe" in capsys.readouterr().err
    await grid.run(progress=False)
    assert capsys.readouterr().err == ""


# -- the disk cache ----------------------------------------------------------------------------------


def _files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


async def test_the_disk_cache_computes_only_new_cells(tmp_path):
    cache = tmp_path / "results"
    probe = Probe(fail_seeds=(1,))
    first = Grid(BASE, {"analysis.search_mode": ["concurrent", "off"]}, probe, seeds=[0, 1], cache_dir=cache)
    frame = await first.run(progress=False)
    assert len(probe.calls) == 4 and not frame["cached"].any()
    assert len(_files(cache)) == 2  # failures are not stored
    assert all(len(name) == len("0" * 64 + ".json") and not name.startswith(".tmp") for name in _files(cache))

    probe.calls.clear()
    extended = Grid(BASE, {"analysis.search_mode": ["concurrent", "off", "sequential"]}, probe, seeds=[0, 1], cache_dir=cache)
    frame = await extended.run(progress=False)
    computed = [(config.analysis.search_mode, seed) for config, seed in probe.calls]
    assert computed == [("concurrent", 1), ("off", 1), ("sequential", 0), ("sequential", 1)]  # new cells and failed ones only
    ok = frame[frame["status"] == "ok"]
    cached = ok.groupby("analysis.search_mode")["cached"].all().to_dict()
    assert cached == {"concurrent": True, "off": True, "sequential": False}
    assert len(_files(cache)) == 3

    stored = json.loads((cache / f"{cache_key(extended.cells[0].config, probe, 0)}.json").read_text())
    assert stored["about"]["settings"] == {"analysis.search_mode": "concurrent"}
    assert stored["result"]["metrics"]["seed_echo"] == 0

    # another workload fingerprint or seed is another key; data_root is not part of it, a secret is (by its HMAC)
    assert cache_key(BASE, probe, 0) != cache_key(BASE, Probe(turns=5), 0) != cache_key(BASE, probe, 1)
    moved = BASE.model_copy(update={"data_root": tmp_path / "elsewhere"})
    assert cache_key(BASE, probe, 0) == cache_key(moved, probe, 0)
    assert cache_key(BASE, probe, 0, b"k" * 32) == cache_key(BASE, probe, 0)  # no secret in the config: no local secret needed
    secret = StackConfig(**{**BASE.model_dump(), "llm": {"api_key": "sk-not-in-the-key"}})
    with pytest.raises(ValidationError, match="holds secrets"):
        cache_key(secret, probe, 0)
    assert cache_key(BASE, probe, 0) != cache_key(secret, probe, 0, b"k" * 32) != cache_key(secret, probe, 0, b"j" * 32)
    assert not any("sk-not-in-the-key" in path.read_text() for path in cache.iterdir())


async def test_disk_cache_writes_are_atomic_and_unreadable_files_are_recomputed(tmp_path, monkeypatch):
    cache = tmp_path / "results"
    probe = Probe()
    grid = Grid(BASE, {"analysis.search_mode": ["off"]}, probe, seeds=[0], cache_dir=cache)
    key = cache_key(grid.cells[0].config, probe, 0)

    def killed(src, dst):  # the process dies between writing the temp file and moving it into place
        raise OSError("killed")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(OSError, match="killed"):
        await grid.run(progress=False)
    monkeypatch.undo()
    assert _files(cache) == []  # neither a half-written result nor the temp file

    await grid.run(progress=False)
    assert _files(cache) == [f"{key}.json"] and len(probe.calls) == 2
    (cache / f"{key}.json").write_text('{"schema": 1, "key": "' + key + '", "result": {"metr')  # truncated by hand
    frame = await grid.run(progress=False)
    assert len(probe.calls) == 3 and not frame["cached"].any()
    frame = await grid.run(progress=False)
    assert len(probe.calls) == 3 and frame["cached"].all()


class SecretEcho(Probe):
    """A probe whose error message repeats the cell's API key, as a provider's authentication error may."""

    async def run(self, config: StackConfig, seed: int) -> WorkloadResult:
        if seed == 1:
            self.calls.append((config, seed))
            raise RuntimeError(f"invalid api key {config.llm.api_key.get_secret_value()} for account")
        return await super().run(config, seed)


def _everything_written(directory: Path) -> str:
    return "\n".join(path.read_text() for path in directory.rglob("*") if path.is_file())


async def test_two_api_keys_are_two_cells_with_two_cache_keys_each_cached_and_never_written_in_clear(tmp_path):
    cache = tmp_path / "results"
    keys = ["sk-account-alpha-1111", SecretStr("sk-account-beta-2222")]
    vary = {"llm.api_key": keys, "cache": [{"backend": "memory", "password": "pw-in-a-section"}]}
    probe = SecretEcho()
    grid = Grid(BASE, vary, probe, seeds=[0, 1], cache_dir=cache)
    assert [cell.config.llm.api_key.get_secret_value() for cell in grid.cells] == ["sk-account-alpha-1111", "sk-account-beta-2222"]
    assert grid.keys[(0, 0)] != grid.keys[(1, 0)]
    secret_file = cache / "secret.key"
    assert secret_file.is_file() and (secret_file.stat().st_mode & 0o777) == 0o600

    frame = await grid.run(progress=False)
    assert len(probe.calls) == 4 and len(list(cache.glob("*.json"))) == 2  # each key's cell cached on its own
    failed = frame[frame["status"] == "failed"]
    assert failed["error"].tolist() == ["RuntimeError: invalid api key ********** for account"] * 2
    assert set(frame["llm.api_key"]) == {"**********"} and set(frame["cache"]) == {'{"backend":"memory","password":"**********"}'}
    assert grid.cells[0].label() == "llm.api_key='**********', cache={\"backend\":\"memory\",\"password\":\"**********\"}"
    written = _everything_written(tmp_path) + frame.to_csv() + grid.frame("turn").to_csv() + repr(grid.cells[0].label())
    for secret in ("sk-account-alpha-1111", "sk-account-beta-2222", "pw-in-a-section"):
        assert secret not in written

    again = Grid(BASE, vary, SecretEcho(), seeds=[0, 1], cache_dir=cache)  # the same secrets: the same keys, run after run
    assert again.keys == grid.keys
    frame = await again.run(progress=False)
    computed = [(config.llm.api_key, seed) for config, seed in again.workload.calls]
    assert computed == [(SecretStr("sk-account-alpha-1111"), 1), (SecretStr("sk-account-beta-2222"), 1)]  # the failures only
    assert frame[frame["status"] == "ok"]["cached"].all()
    elsewhere = Grid(BASE, vary, SecretEcho(), seeds=[0, 1], cache_dir=tmp_path / "other")  # another local secret
    assert set(elsewhere.keys.values()).isdisjoint(grid.keys.values())


def test_url_passwords_key_by_hmac_and_a_grid_without_cache_dir_or_secrets_writes_no_secret(tmp_path):
    urls = ["postgresql+asyncpg://bench:first-pw@127.0.0.1:1/db", "postgresql+asyncpg://bench:second-pw@127.0.0.1:1/db"]
    cache = tmp_path / "results"
    grid = Grid(BASE, {"db_url": urls}, Probe(), cache_dir=cache)
    assert grid.keys[(0, 0)] != grid.keys[(1, 0)] and Grid(BASE, {"db_url": urls}, Probe(), cache_dir=cache).keys == grid.keys
    assert "first-pw" not in _everything_written(cache)
    no_cache = Grid(BASE, {"llm.api_key": ["sk-a-1234", "sk-b-5678"]}, Probe())
    assert len(set(no_cache.keys.values())) == 2
    plain = Grid(BASE, {"analysis.search_mode": ["off"]}, Probe(), cache_dir=tmp_path / "plain")
    assert not (tmp_path / "plain").exists() and plain.keys[(0, 0)] == cache_key(plain.cells[0].config, plain.workload, 0)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "secret.key").write_text("not hex")
    with pytest.raises(ConfigError, match="secret.key is not a grid cache secret"):
        Grid(BASE, {"db_url": urls}, Probe(), cache_dir=tmp_path / "broken")

def test_timing_units_and_import_stays_light():
    assert {"ms", "s", "us", "ops/s"} <= TIMING_UNITS
    code = "import sys, memlab; import memlab.experiments; print(sorted(m for m in ('pandas', 'tqdm', 'litellm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = "import sys, memlab; print('memlab.experiments' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_all_lists_exactly_the_public_names():
    import types

    import memlab.experiments as experiments

    public = {name for name, value in vars(experiments).items() if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert public == set(experiments.__all__) and len(experiments.__all__) == len(public)
