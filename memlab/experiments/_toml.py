"""Experiments as files: ``experiments/NNN_slug/config.toml`` -> a :class:`~memlab.experiments.Grid`, its frame -> ``results/``.

A config file holds every knob of a grid run, so an experiment's ``run.py`` is a few
lines: :func:`load_experiment`, run its grid, print :func:`format_summary`,
:func:`write_results`. The document::

    seeds = [0, 1]                      # default [0]
    cache_dir = "results/cache"         # optional, relative to this file: re-runs reuse its cells

    [base.embedding]                    # [base]: StackConfig(**base); one table per section
    model = "memlab/hashing"

    [vary]                              # Grid(vary=...): key -> list of values
    "analysis.search_mode" = ["concurrent", "sequential", "off"]   # quote dotted keys, or:
    analysis.auto_feedback = [true, false]                         # dotted (nested) keys are joined again
    llm_latency_ms = [0, 100]
    cache = [{ backend = "memory" }, { backend = "redis", server_url = "${MEMLAB_TEST_REDIS_URL}" }]

    [workload]                          # a workload of memlab.experiments by class or short name
    name = "ModesConversation"          # ("modes"), or "package.module:Class"; the rest are its arguments
    turns = 20

    [report]
    metrics = ["wall_s", "latency_p50_ms"]   # the summary's columns, in order (default: every metric)

Strings may reference environment variables as ``${NAME}``. In ``[base]``,
``[workload]``, ``seeds`` or ``cache_dir`` an unset variable raises
:class:`~memlab.exceptions.ConfigError`. In a table value of ``[vary]`` (a ``cache``
entry, say) it makes that value *unavailable*: its entries naming the variable are
dropped, and every cell holding it is recorded as failed (``ConfigError: ... MEMLAB_TEST_REDIS_URL
is not set ...``) instead of running, so a missing server shows in the results rather
than vanishing, and a stack never silently runs without the cache the cell names.
(Cells are told apart by their config: an unavailable value must not build the same
config as an available one.) A grid whose ``[vary]`` references any variable runs its
workload through that gate whether or not the variables are set, so its disk-cache keys
do not depend on the environment.

``server_url`` in a ``cache`` table (``[base.cache]`` or a ``cache`` value of
``[vary]``) is not a :class:`~memlab.config.CacheConfig` field: it is a server URL
turned into the fields ``memlab bench cache`` derives from it
(:data:`memlab.bench.cache.SERVER_SETTINGS`: redis -> ``host`` / ``port`` /
``username`` / ``password`` / ``ssl``, postgres -> ``db_url``, tapes ->
``tapes_ingest_url``; unset ones left out; a password as a ``SecretStr``, so the frame
shows it masked; a password inside a ``db_url`` is not masked).

Keyword overrides of :func:`load_experiment` / :func:`grid_from_toml` replace a whole
top-level entry (``base``, ``vary``, ``workload``, ``seeds``, ``cache_dir``,
``report``) after the file is read, before anything is interpreted; ``cache_dir`` given
this way is taken as it is (``None``: no disk cache), not relative to the file.
"""

from __future__ import annotations

import importlib
import os
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from memlab.charts import comparison_summary, failed_cells, vary_columns
from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments._cells import config_identity
from memlab.experiments._grid import Grid
from memlab.experiments._workload import Workload, WorkloadResult

if TYPE_CHECKING:
    import pandas

    from memlab.config import StackConfig

__all__ = ["Experiment", "format_summary", "grid_from_toml", "load_experiment", "summary_table", "write_results"]

#: the top-level entries of an experiment document
SECTIONS = ("base", "vary", "workload", "seeds", "cache_dir", "report")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RUNS = "runs ok"


# -- environment variables ------------------------------------------------------------------------


def _variables(value: Any) -> list[str]:
    """Every variable ``value`` (nested) references as ``${NAME}``, in order."""
    if isinstance(value, str):
        return _VARIABLE.findall(value)
    if isinstance(value, Mapping):
        return [name for item in value.values() for name in _variables(item)]
    if isinstance(value, list):
        return [name for item in value for name in _variables(item)]
    return []


def _unset(value: Any, environ: Mapping[str, str]) -> list[str]:
    """Every variable ``value`` (nested) references that ``environ`` lacks, in order."""
    return [name for name in _variables(value) if name not in environ]


def _expand(value: Any, environ: Mapping[str, str], where: str) -> Any:
    """``value`` with every ``${NAME}`` replaced; an unset one raises ConfigError naming ``where``."""
    missing = _unset(value, environ)
    if missing:
        raise ConfigError(f"{where}: environment variable {missing[0]} is not set")
    if isinstance(value, str):
        return _VARIABLE.sub(lambda match: environ[match.group(1)], value)
    if isinstance(value, Mapping):
        return {key: _expand(item, environ, where) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand(item, environ, where) for item in value]
    return value


def _server_fields(table: dict[str, Any], backend: str, where: str) -> dict[str, Any]:
    """``table`` with its ``server_url`` replaced by the CacheConfig fields it stands for."""
    if "server_url" not in table:
        return table
    from memlab.bench.cache import SERVER_SETTINGS
    from memlab.bench.errors import BackendSkipped

    table = dict(table)
    url = table.pop("server_url")
    if backend not in SERVER_SETTINGS:
        raise ConfigError(f"{where}: server_url is for a server backend ({', '.join(SERVER_SETTINGS)}), not {backend!r}")
    if not isinstance(url, str):
        raise ConfigError(f"{where}: server_url must be a string, got {url!r}")
    try:
        derived = SERVER_SETTINGS[backend](url)
    except BackendSkipped as exc:
        raise ConfigError(f"{where}: {exc}") from None
    fields = {key: value for key, value in derived.items() if value is not None and value is not False}
    if isinstance(fields.get("password"), str):  # shown masked in the frame and the cache's notes, like any secret
        fields["password"] = SecretStr(fields["password"])
    return {**fields, **table}


# -- the document -----------------------------------------------------------------------------------


def _flatten(vary: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``[vary]`` entries with TOML's nested dotted keys joined again (``analysis.search_mode``)."""
    for key, value in vary.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def _shipped_workloads() -> tuple[type[Workload], ...]:
    """The workload classes memlab ships (by class name or ``name`` in a ``[workload]`` table)."""
    from memlab.experiments._cache_ops import CacheWorkload
    from memlab.experiments._merge import MergeLanes
    from memlab.experiments._modes import ModesConversation
    from memlab.experiments._quality import ConversationalBenchmark

    return (ModesConversation, CacheWorkload, ConversationalBenchmark, MergeLanes)


def _workload_class(name: Any) -> type[Workload]:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"[workload] name must be a workload class name, got {name!r}")
    if ":" in name:
        module, _, attribute = name.partition(":")
        try:
            found = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"[workload] name {name!r}: {type(exc).__name__}: {exc}") from None
    else:
        known = {label: value for value in _shipped_workloads() for label in (value.__name__, value.name) if label}
        if name not in known:
            raise ConfigError(f"[workload] name {name!r} is not a workload of memlab.experiments (choose from {', '.join(sorted(known))})")
        found = known[name]
    if not (isinstance(found, type) and issubclass(found, Workload)):
        raise ConfigError(f"[workload] name {name!r} is not a memlab.experiments.Workload subclass")
    return found


def _workload(table: Any) -> Workload:
    if not isinstance(table, Mapping) or "name" not in table:
        raise ConfigError("[workload] must be a table with a name (the workload class) and its arguments")
    params = {key: value for key, value in table.items() if key != "name"}
    cls = _workload_class(table["name"])
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"[workload] {cls.__name__}: {exc}") from None


def _seeds(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or any(isinstance(seed, bool) or not isinstance(seed, int) for seed in value):
        raise ConfigError(f"seeds must be a non-empty list of ints, got {value!r}")
    return tuple(value)


def _metrics(report: Any) -> tuple[str, ...] | None:
    if not isinstance(report, Mapping):
        raise ConfigError(f"[report] must be a table, got {report!r}")
    unknown = sorted(set(report) - {"metrics"})
    if unknown:
        raise ConfigError(f"[report] has unknown entries {unknown} (known: metrics)")
    metrics = report.get("metrics")
    if metrics is None:
        return None
    if not isinstance(metrics, list) or not metrics or not all(isinstance(name, str) for name in metrics):
        raise ConfigError(f"[report] metrics must be a non-empty list of metric names, got {metrics!r}")
    return tuple(metrics)


def _base(table: Any, environ: Mapping[str, str]) -> "StackConfig":
    from memlab.config import StackConfig

    if not isinstance(table, Mapping):
        raise ConfigError(f"[base] must be a table of StackConfig sections, got {table!r}")
    data = _expand(dict(table), environ, "[base]")
    if isinstance(data.get("cache"), Mapping):
        data["cache"] = _server_fields(dict(data["cache"]), str(data["cache"].get("backend", "sqlite")), "[base.cache]")
    if "data_root" in data:
        raise ConfigError("[base] data_root: the grid gives every run a fresh data root; leave it out")
    try:
        return StackConfig(**data)
    except ConfigError as exc:
        raise ConfigError(f"[base]: {exc}") from None


def _vary(table: Any, base: "StackConfig", environ: Mapping[str, str]) -> tuple[dict[str, list[Any]], list[tuple[str, Any, str]]]:
    """The vary mapping and its unavailable values: ``(key, value object, reason)``."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"[vary] must be a table of key -> list of values, got {table!r}")
    vary: dict[str, list[Any]] = {}
    unavailable: list[tuple[str, Any, str]] = []
    for key, values in _flatten(table):
        if not isinstance(values, list):
            raise ConfigError(f"[vary] {key}: give a list of values, got {values!r}")
        expanded: list[Any] = []
        for index, value in enumerate(values):
            where = f"[vary] {key}[{index}]"
            missing = _unset(value, environ)
            reason = None
            if missing and isinstance(value, Mapping):
                reason = (f"{where} needs environment variable {', '.join(dict.fromkeys(missing))}, which is not set "
                          "(for the test servers: scripts/with-servers.sh CMD)")
                value = {name: item for name, item in value.items() if not _unset(item, environ)}
            value = _expand(value, environ, where)  # raises for a missing variable outside a table value
            if key == "cache" and isinstance(value, Mapping):
                value = _server_fields(dict(value), str(value.get("backend", base.cache.backend)), where)
            expanded.append(value)
            if reason is not None:
                unavailable.append((key, value, reason))
        vary[key] = expanded
    return vary, unavailable


# -- the environment gate ---------------------------------------------------------------------------


class _EnvGate(Workload):
    """``inner`` on every cell but those built from an unavailable vary value: those raise its reason."""

    def __init__(self, inner: Workload) -> None:
        self.inner = inner
        self.name = inner.name
        self.turn_columns = inner.turn_columns
        self.reasons: dict[str, str] = {}

    def fingerprint(self) -> dict[str, Any]:
        cls = type(self.inner)
        return {"workload": f"{cls.__module__}.{cls.__qualname__}", **self.inner.fingerprint()}

    def check(self, config: "StackConfig") -> None:
        self.inner.check(config)

    async def run(self, config: "StackConfig", seed: int, objects: Mapping[str, Any] | None = None) -> WorkloadResult:
        reason = self.reasons.get(config_identity(config, resolved=False))
        if reason is not None:
            raise ConfigError(reason)
        if objects:
            return await self.inner.run(config, seed, objects=objects)  # type: ignore[call-arg]
        return await self.inner.run(config, seed)

    def __repr__(self) -> str:
        return repr(self.inner)


# -- the experiment ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Experiment:
    """An experiment document, interpreted: what :meth:`grid` builds and what the summary shows.

    ``unavailable``: the vary values whose environment variables are unset, as
    ``(key, value, reason)``; ``metrics``: ``[report] metrics`` (None: every metric);
    ``results_dir``: ``results/`` beside the file (the current directory's without one).
    """

    path: Path | None
    base: "StackConfig"
    vary: dict[str, list[Any]]
    workload: Workload
    seeds: tuple[int, ...]
    cache_dir: Path | None
    metrics: tuple[str, ...] | None = None
    unavailable: tuple[tuple[str, Any, str], ...] = ()
    gated: bool = False
    document: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def results_dir(self) -> Path:
        return (self.path.parent if self.path is not None else Path.cwd()) / "results"

    def grid(self) -> Grid:
        """A fresh :class:`~memlab.experiments.Grid` of the experiment (cells validated now)."""
        workload: Workload = _EnvGate(self.workload) if self.gated else self.workload
        grid = Grid(base=self.base, vary=self.vary, workload=workload, seeds=self.seeds, cache_dir=self.cache_dir)
        if isinstance(workload, _EnvGate):
            for cell in grid.cells:
                for key, value, reason in self.unavailable:
                    if cell.settings.get(key) is value:
                        workload.reasons[config_identity(cell.config, resolved=False)] = reason
                        break
        return grid


def load_experiment(path: str | os.PathLike[str] | None, *, environ: Mapping[str, str] | None = None, **overrides: Any) -> Experiment:
    """Read the experiment document at ``path`` (module docstring), with ``overrides`` replacing top-level entries.

    ``path`` None: the document is ``overrides`` alone. ``environ``: where ``${NAME}``
    is looked up (default ``os.environ``). Raises :class:`~memlab.exceptions.ConfigError`
    naming the entry for anything it cannot interpret; the grid's own checks run in
    :meth:`Experiment.grid`.
    """
    env = os.environ if environ is None else environ
    source = Path(path) if path is not None else None
    document: dict[str, Any] = {}
    if source is not None:
        try:
            with source.open("rb") as handle:
                document = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    for name in (*document, *overrides):
        if name not in SECTIONS:
            raise ConfigError(f"{source or 'experiment'}: unknown entry {name!r} (known: {', '.join(SECTIONS)})")
    document.update(overrides)
    base = _base(document.get("base", {}), env)
    vary, unavailable = _vary(document.get("vary", {}), base, env)
    workload = _expand(document.get("workload"), env, "[workload]")
    seeds = _seeds(_expand(document.get("seeds", [0]), env, "seeds"))
    cache_dir: Path | None = None
    if "cache_dir" in overrides:
        cache_dir = None if overrides["cache_dir"] is None else Path(overrides["cache_dir"])
    elif document.get("cache_dir") is not None:
        text = _expand(document["cache_dir"], env, "cache_dir")
        if not isinstance(text, str) or not text:
            raise ConfigError(f"cache_dir must be a path string, got {text!r}")
        cache_dir = Path(text) if source is None or Path(text).is_absolute() else source.parent / text
    return Experiment(
        path=source, base=base, vary=vary, workload=_workload(workload), seeds=seeds, cache_dir=cache_dir,
        metrics=_metrics(document.get("report", {})), unavailable=tuple(unavailable), gated=bool(_variables(document.get("vary", {}))),
        document=document,
    )


def grid_from_toml(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None, **overrides: Any) -> Grid:
    """The :class:`~memlab.experiments.Grid` of the experiment document at ``path`` (see :func:`load_experiment`)."""
    return load_experiment(path, environ=environ, **overrides).grid()


# -- results ----------------------------------------------------------------------------------------


def summary_table(frame: "pandas.DataFrame", metrics: Sequence[str] | None = None) -> "pandas.DataFrame":
    """One row per cell of a metric frame: its vary values, ``runs ok`` (``"2/2"``), the median of each metric over its ok seeds.

    ``metrics``: the metric columns, in order (default: every metric of the frame);
    one the frame's ok runs never reported raises
    :class:`~memlab.exceptions.ValidationError`. A cell whose runs all failed has NA
    metrics (its errors: :func:`memlab.charts.failed_cells`).
    """
    import pandas as pd

    vary = vary_columns(frame)
    reported = list(dict.fromkeys(frame.loc[frame["status"].astype("string") == "ok", "metric"].dropna().astype(str)))
    wanted = list(metrics) if metrics is not None else reported
    unknown = [name for name in wanted if reported and name not in reported]
    if unknown:
        raise ValidationError(f"metric {unknown[0]!r} is not in the results (metrics: {', '.join(reported)})")
    cells = frame.drop_duplicates("cell")[["cell", *vary]].reset_index(drop=True)
    runs = frame.drop_duplicates(["cell", "seed"])
    ok = runs["status"].astype("string") == "ok"
    counts = pd.DataFrame({"cell": runs["cell"], "ok": ok}).groupby("cell", sort=False)["ok"].agg(["sum", "size"])
    cells[_RUNS] = [f"{int(counts.loc[cell, 'sum'])}/{int(counts.loc[cell, 'size'])}" for cell in cells["cell"]]
    medians = comparison_summary(frame, by=["cell"]) if ok.any() else pd.DataFrame({"cell": pd.Series([], dtype="Int64")})
    for name in wanted:
        if name not in medians.columns:
            medians[name] = pd.NA
    medians = medians[["cell", *wanted]].astype({"cell": "Int64", **{name: "Float64" for name in wanted}})
    table = cells.astype({"cell": "Int64"}).merge(medians, on="cell", how="left")
    return table.astype({name: "Float64" for name in wanted})


def _number(value: Any) -> str:
    import pandas as pd

    if value is None or pd.isna(value):
        return "-"
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return f"{int(number):,}" if abs(number) >= 10_000 else str(int(number))
    if abs(number) >= 100:
        return f"{number:,.1f}"
    if abs(number) >= 1:
        return f"{number:.2f}"
    return f"{number:.3f}"


def format_summary(frame: "pandas.DataFrame", metrics: Sequence[str] | None = None, *, title: str | None = None) -> str:
    """:func:`summary_table` as text: a header (``title``, workload, seeds, machine), the table, then every failed run's error."""
    from memlab.bench.cache import environment

    table = summary_table(frame, metrics)
    numeric = [column for column in table.columns if column not in ("cell", *vary_columns(frame), _RUNS)]
    shown = table.astype(object)
    for column in numeric:
        shown[column] = [_number(value) for value in table[column]]
    env = environment()
    load = env.get("load_avg")
    workload = ", ".join(dict.fromkeys(frame["workload"].dropna().astype(str))) or "-"
    seeds = ", ".join(str(seed) for seed in dict.fromkeys(frame["seed"].dropna().astype(int)))
    runs = frame.drop_duplicates(["cell", "seed"])
    cached = int(runs["cached"].sum())
    header = [
        *([title] if title else []),
        f"workload {workload}; seeds {seeds}; {len(table)} cells; medians over each cell's ok seeds; "
        f"{len(runs)} cell x seed runs, {cached} read from the cache",
        f"{env['time']}  python {env['python']}  {env['platform']}  {env['cpus']} cpus"
        + (f"  load {' '.join(f'{value:.2f}' for value in load)}" if load else ""),
        "",
    ]
    lines = header + [shown.to_string(index=False)]
    failures = failed_cells(frame)
    if len(failures):
        lines += ["", "failed runs:"]
        lines += [f"  cell {row['cell']} seed {row['seed']}: {row['error']}" for _, row in failures.iterrows()]
    return "\n".join(lines)


def write_results(frame: "pandas.DataFrame", directory: str | os.PathLike[str], *, table: str | None = None, stamp: str | None = None) -> Path:
    """Write ``frame`` to ``directory/<UTC time>.parquet`` and ``.csv`` (and ``table`` to ``.txt``); return the parquet path.

    ``stamp``: the file stem (default: the UTC time as ``20261201T101500Z``). The
    directory is created when missing; an experiment's is ``results/`` beside its
    config, which git ignores.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    stem = stamp or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    parquet = out / f"{stem}.parquet"
    frame.to_parquet(parquet, index=False)
    frame.to_csv(out / f"{stem}.csv", index=False)
    if table is not None:
        (out / f"{stem}.txt").write_text(table + "\n", encoding="utf-8")
    return parquet


def run_experiment(directory: str | os.PathLike[str], argv: Sequence[str] = ()) -> int:
    """What an experiment's ``run.py`` does: load ``argv[0]`` (default ``directory/config.toml``), run, print, write.

    Prints the :func:`format_summary` table (medians over each cell's seeds; failed runs
    listed) and writes the results with :func:`write_results` to the experiment's
    ``results/``. Returns 0, or 1 when a run failed (so a script's exit code says so).
    """
    import asyncio

    here = Path(directory).resolve()
    config = Path(argv[0]) if argv else here / "config.toml"
    experiment = load_experiment(config)
    frame = asyncio.run(experiment.grid().run(progress=True))
    table = format_summary(frame, experiment.metrics, title=f"{here.name} ({config})")
    print(table)
    print(f"\nwrote {write_results(frame, experiment.results_dir, table=table)} and .csv, .txt")
    return 1 if (frame["status"] == "failed").any() else 0
