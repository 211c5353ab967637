"""The experiment grid: StackConfig variations x a workload x seeds -> one tidy DataFrame."""

from __future__ import annotations

import inspect
import json
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments._cells import Cell, column_dtype, expand
from memlab.experiments._store import ResultStore, cache_key, local_secret, secret_values
from memlab.experiments._workload import Workload, WorkloadResult
from memlab.privacy import mask_url_passwords

if TYPE_CHECKING:
    import pandas

    from memlab.config import StackConfig

__all__ = ["METRIC_COLUMNS", "TURN_COLUMNS", "Grid", "Run"]

#: the metric frame's columns after the vary columns
METRIC_COLUMNS = ("seed", "workload", "metric", "value", "unit", "status", "error", "cached")
#: the turn frame's columns after the vary columns (then the workload's own)
TURN_COLUMNS = ("seed", "workload", "turn")
_LEVELS = ("metric", "turn")


@dataclass(frozen=True)
class Run:
    """One cell x seed of a grid run: ``status`` ``"ok"`` (``result`` set) or ``"failed"`` (``error`` set)."""

    cell: Cell
    seed: int
    status: str
    result: WorkloadResult | None
    error: str | None
    cached: bool
    #: the disk-cache key; None for a cell with a strategy object without a fingerprint (never cached)
    key: str | None


def _takes_objects(workload: Workload) -> bool:
    """True when ``workload.run`` accepts ``objects=`` (by name or ``**kwargs``)."""
    try:
        parameters = inspect.signature(workload.run).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "objects" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _key(cell: Cell, workload: Workload, seed: int, secret: bytes | None) -> str | None:
    """The cell x seed's disk-cache key; None when one of its objects declares no fingerprint."""
    identities = {key: chosen.identity for key, chosen in cell.strategies.items()}
    if any(identity is None for identity in identities.values()):
        return None
    return cache_key(cell.config, workload, seed, secret, identities)


def _seeds(seeds: Any) -> tuple[int, ...]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise ValidationError(f"Grid seeds must be a non-empty list of ints, got {seeds!r}")
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValidationError(f"Grid seeds must be ints, got {seed!r}")
    if len(set(seeds)) != len(seeds):
        raise ValidationError(f"Grid seeds repeat a seed: {list(seeds)!r}")
    return tuple(seeds)


class Grid:
    """Run ``workload`` on every cell of ``vary`` over ``base``, once per seed, each run on a fresh stack.

    ``vary``: config key -> list of values (see :mod:`memlab.experiments`); cells are the
    cartesian product, first key slowest, built and validated here (a bad key or value
    raises :class:`~memlab.exceptions.ConfigError` naming it, before anything runs).
    ``cache_dir``: None (no disk cache) or a directory holding each successful cell x
    seed's result (:mod:`memlab.experiments._store`; a config holding a secret keys it
    by an HMAC under the directory's local secret, created now if missing); a re-run
    computes only what is missing. ``cells``: the :class:`Cell` s in run order; ``runs``: the
    :class:`Run` s of the last :meth:`run`.

    Strategy objects (``vary={"session_retriever": [KeywordSessionRetriever(), MyRetriever]}``,
    see :mod:`memlab.experiments._strategies`): each run gets fresh ones, passed to
    ``workload.run(config, seed, objects={keyword: object})`` (a workload whose ``run``
    takes no ``objects`` is refused with ``ConfigError``); a cell holding one without a
    ``fingerprint()`` is never stored in ``cache_dir`` (``UserWarning`` when the grid runs).
    """

    def __init__(
        self,
        base: "StackConfig",
        vary: Mapping[str, Sequence[Any]] | None = None,
        workload: Workload | None = None,
        seeds: Sequence[int] = (0,),
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(workload, Workload):
            raise ValidationError(f"Grid workload must be a memlab.experiments.Workload, got {type(workload).__name__}")
        self.seeds = _seeds(seeds)
        self.cells: list[Cell] = expand(base, vary)  # checks base and vary
        self.base = base
        self.vary: dict[str, list[Any]] = {key: list(values) for key, values in (vary or {}).items()}
        self.workload = workload
        if any(cell.strategies for cell in self.cells) and not _takes_objects(workload):
            raise ConfigError(f"{type(workload).__name__}.run() takes no objects=: it cannot pass the cells' strategy objects "
                              "into the stacks it builds (accept objects: Mapping[str, Any] and pass them to MemoryStack)")
        for cell in self.cells:
            try:
                workload.check(cell.config)
            except ConfigError as exc:
                raise ConfigError(f"grid cell {cell.index} ({cell.label()}): {workload.name or type(workload).__name__}: {exc}") from None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        secret = self._key_secret()
        self.keys: dict[tuple[int, int], str | None] = {
            (cell.index, seed): _key(cell, workload, seed, secret) for cell in self.cells for seed in self.seeds
        }
        self.runs: list[Run] = []

    def _key_secret(self) -> bytes | None:
        """What keys the HMACs of the cells' secrets (:mod:`memlab.experiments._store`); None when no cell has one."""
        if not any(secret_values(cell.config) for cell in self.cells):
            return None
        return local_secret(self.cache_dir) if self.cache_dir is not None else os.urandom(32)

    def __len__(self) -> int:
        """Cell x seed runs."""
        return len(self.cells) * len(self.seeds)

    def __repr__(self) -> str:
        return f"Grid({len(self.cells)} cells x {len(self.seeds)} seeds, workload={self.workload!r})"

    async def run(self, *, progress: bool = True, level: str = "metric") -> "pandas.DataFrame":
        """Run every cell x seed (cached ones read from ``cache_dir``) and return :meth:`frame` of ``level``.

        Each run gets the cell's config with a fresh temporary ``data_root`` (deleted
        afterwards) and its seed. An exception inside a run is recorded (status
        ``failed``, error ``"Type: message"``) and the grid goes on; failures are not
        cached. ``progress``: a tqdm bar over the runs (a widget in notebooks).
        """
        _check_level(level)
        from tqdm.auto import tqdm

        store = ResultStore(self.cache_dir) if self.cache_dir is not None else None
        if store is not None:
            self._warn_uncached()
        runs: list[Run] = []
        bar = tqdm(total=len(self), desc=self.workload.name or type(self.workload).__name__, unit="run", disable=not progress)
        try:
            for cell in self.cells:
                for seed in self.seeds:
                    bar.set_postfix_str(f"cell {cell.index}, seed {seed}", refresh=False)
                    runs.append(await self._run_one(cell, seed, store))
                    bar.update(1)
        finally:
            bar.close()
        self.runs = runs
        return self.frame(level)

    def _warn_uncached(self) -> None:
        """One UserWarning per strategy value without a fingerprint, saying why its cells run uncached."""
        reasons = {chosen.why_uncached: None for cell in self.cells for chosen in cell.strategies.values() if chosen.identity is None}
        for reason in reasons:
            warnings.warn(reason, UserWarning, stacklevel=3)

    async def _run_one(self, cell: Cell, seed: int, store: ResultStore | None) -> Run:
        key = self.keys[(cell.index, seed)]
        if key is None:
            store = None
        if store is not None and key is not None and (hit := store.load(key)) is not None:
            return Run(cell, seed, "ok", hit, None, True, key)
        with tempfile.TemporaryDirectory(prefix="memlab-grid-", ignore_cleanup_errors=True) as root:
            config = cell.config.model_copy(update={"data_root": Path(root)}, deep=True)
            try:
                if cell.strategies:
                    result = await self.workload.run(config, seed, objects=cell.objects())  # type: ignore[call-arg]
                else:
                    result = await self.workload.run(config, seed)
                if not isinstance(result, WorkloadResult):
                    raise ValidationError(f"{type(self.workload).__name__}.run() returned {type(result).__name__}, not a WorkloadResult")
                if store is not None:
                    json.dumps(result.to_json())  # a result the cache cannot hold fails here, as the run's error
            except Exception as exc:  # noqa: BLE001 - recorded as the run's failure; the grid goes on
                return Run(cell, seed, "failed", None, _error_text(exc, cell), False, key)
        if store is not None and key is not None:
            about = {"cell": cell.index, "settings": {k: cell.rendered(k) for k in cell.settings}, "seed": seed,
                     "workload": self.workload.name}
            store.save(key, result, about)
        return Run(cell, seed, "ok", result, None, False, key)

    # -- frames ------------------------------------------------------------------------------------

    def _vary_columns(self) -> dict[str, str]:
        """vary key -> the dtype of its column (from its rendered values)."""
        return {key: column_dtype(list(dict.fromkeys(cell.rendered(key) for cell in self.cells))) for key in self.vary}

    def _prefix(self, run: Run) -> dict[str, Any]:
        return {"cell": run.cell.index, **{key: run.cell.rendered(key) for key in self.vary}}

    def frame(self, level: str = "metric") -> "pandas.DataFrame":
        """The last run's results as a DataFrame (``level`` ``"metric"`` or ``"turn"``; see :mod:`memlab.experiments`)."""
        _check_level(level)
        return self._metric_frame() if level == "metric" else self._turn_frame()

    def _metric_frame(self) -> "pandas.DataFrame":
        import pandas as pd

        name = self.workload.name
        rows: list[dict[str, Any]] = []
        for run in self.runs:
            prefix = {**self._prefix(run), "seed": run.seed, "workload": name}
            if run.result is None:
                rows.append({**prefix, "metric": None, "value": None, "unit": None, "status": "failed", "error": run.error, "cached": False})
                continue
            for metric, value in run.result.metrics.items():
                rows.append({**prefix, "metric": metric, "value": None if value is None else float(value), "unit": run.result.units[metric],
                             "status": "ok", "error": None, "cached": run.cached})
        dtypes = {"cell": "Int64", **self._vary_columns(), "seed": "Int64", "workload": "string", "metric": "string", "value": "Float64",
                  "unit": "string", "error": "string", "cached": "bool"}
        frame = pd.DataFrame.from_records(rows, columns=["cell", *self.vary, *METRIC_COLUMNS])
        for column, dtype in dtypes.items():
            frame[column] = frame[column].astype(dtype)
        frame["status"] = pd.Categorical(frame["status"], categories=["ok", "failed"])
        return frame

    def _turn_frame(self) -> "pandas.DataFrame":
        import pandas as pd

        fixed = ["cell", *self.vary, *TURN_COLUMNS]
        declared = dict(getattr(self.workload, "turn_columns", {}) or {})
        own: dict[str, None] = dict.fromkeys(name for name in declared if name != "turn")
        rows: list[dict[str, Any]] = []
        for run in self.runs:
            if run.result is None:
                continue
            prefix = {**self._prefix(run), "seed": run.seed, "workload": self.workload.name}
            for index, turn in enumerate(run.result.turns):
                clash = sorted(set(turn) & set(fixed) - {"turn"})
                if clash:
                    raise ValidationError(f"{type(self.workload).__name__} turn columns {clash} clash with the grid's own columns")
                own.update(dict.fromkeys(name for name in turn if name != "turn"))
                rows.append({**prefix, "turn": turn.get("turn", index), **{k: v for k, v in turn.items() if k != "turn"}})
        columns = [*fixed, *own]
        frame = pd.DataFrame.from_records(rows, columns=columns)
        dtypes = {"cell": "Int64", **self._vary_columns(), "seed": "Int64", "workload": "string", "turn": "Int64"}
        for name in own:
            dtypes[name] = declared.get(name) or _inferred(frame[name].tolist())
        for column, dtype in dtypes.items():
            if dtype != "object":
                frame[column] = frame[column].astype(dtype)
        return frame


def _error_text(exc: Exception, cell: Cell) -> str:
    """``"Type: message"`` of a failed run, URL passwords and the cell's secrets masked."""
    text = f"{type(exc).__name__}: {exc}"
    for secret in sorted(secret_values(cell.config), key=len, reverse=True):
        text = text.replace(secret, "**********")
    return mask_url_passwords(text)


def _inferred(values: list[Any]) -> str:
    """A turn column's dtype from its values: lists (or anything unrenderable) stay ``object``."""
    present = [value for value in values if value is not None and not (isinstance(value, float) and math.isnan(value))]
    if any(not isinstance(value, (bool, int, float, str)) for value in present):
        return "object"
    return column_dtype(present)


def _check_level(level: str) -> None:
    if level not in _LEVELS:
        raise ValidationError(f"level must be one of {', '.join(_LEVELS)}, got {level!r}")
