"""The workload contract: what a :class:`~memlab.experiments.Grid` runs on each cell x seed."""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ValidationError

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = ["TIMING_UNITS", "Workload", "WorkloadResult", "is_timing"]

#: units of wall-clock metrics: they vary from run to run; every other metric is deterministic for a seed
TIMING_UNITS = frozenset({"s", "ms", "us", "ops/s"})


def is_timing(unit: str | None) -> bool:
    """True for a metric (or per-turn column) measured in a :data:`TIMING_UNITS` unit."""
    return unit in TIMING_UNITS


@dataclass
class WorkloadResult:
    """What one :meth:`Workload.run` measured.

    ``metrics``: name -> number (None: not defined for this run, e.g. a p95 of no
    answered turns); ``units``: name -> unit for every metric (:data:`TIMING_UNITS`
    mark the wall-clock ones); ``turns``: one dict per turn (scalar values), possibly
    empty. Everything must be JSON-serialisable (the grid's disk cache stores it).
    """

    metrics: dict[str, float | int | None]
    units: dict[str, str]
    turns: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        missing = sorted(set(self.metrics) - set(self.units))
        if missing:
            raise ValidationError(f"WorkloadResult: no unit for metrics {missing}")
        for name, value in self.metrics.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValidationError(f"WorkloadResult: metric {name!r} must be a number or None, got {value!r}")
            if isinstance(value, float) and math.isnan(value):
                self.metrics[name] = None

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data (see :meth:`from_json`)."""
        return {"metrics": dict(self.metrics), "units": dict(self.units), "turns": [dict(turn) for turn in self.turns]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "WorkloadResult":
        """The result :meth:`to_json` wrote."""
        return cls(dict(data["metrics"]), dict(data["units"]), [dict(turn) for turn in data.get("turns", [])])


class Workload(abc.ABC):
    """Something measurable on a fresh stack: one call of :meth:`run` per grid cell x seed.

    Contract:

    * ``name``: a short label (the frame's ``workload`` column).
    * :meth:`fingerprint`: every parameter that changes the result, as JSON-serialisable
      data; it is part of the disk-cache key, so two workloads with equal fingerprints
      (and names) must compute the same thing.
    * :meth:`run` gets the cell's config, its ``data_root`` a fresh empty directory the
      grid deletes afterwards, and the seed; it builds whatever stacks it needs from that
      config (and closes them), and returns a :class:`WorkloadResult` whose metric names
      and units are the same for every cell and seed. An exception is recorded as the
      cell's failure; the grid goes on.
    * Strategy objects (optional): a workload whose ``run`` accepts ``objects`` (a mapping
      :class:`~memlab.MemoryStack` keyword -> a fresh object for this run; empty or None
      when the cell varies none) may run on grids that vary objects
      (``vary={"session_retriever": [...]}``); it passes them into every stack it builds
      (``MemoryStack.from_config(config, **objects)``) or, building no stack, uses them in
      place of what the config would build. A grid varying objects refuses a workload whose
      ``run`` takes no ``objects``; otherwise it calls ``run(config, seed)``.
    * ``turn_columns`` (optional): the per-turn columns' dtypes, in order.
    * :meth:`check` (optional) rejects a cell's config before anything runs (raise
      :class:`~memlab.exceptions.ConfigError`).
    """

    name: str = ""
    #: per-turn column -> pandas dtype, in column order (the turn frame types undeclared columns from their values)
    turn_columns: Mapping[str, str] = {}

    @abc.abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """Every parameter of the workload, JSON-serialisable."""

    @abc.abstractmethod
    async def run(self, config: "StackConfig", seed: int) -> WorkloadResult:
        """Measure once on ``config`` (a fresh ``data_root``) with ``seed``."""

    def check(self, config: "StackConfig") -> None:
        """Raise :class:`~memlab.exceptions.ConfigError` when ``config`` cannot run this workload (default: accept)."""

    def __repr__(self) -> str:
        params = ", ".join(f"{key}={value!r}" for key, value in self.fingerprint().items())
        return f"{type(self).__name__}({params})"
