"""``memlab demo`` / ``make demo``: what running turn analysis concurrently does to latency, tokens and answers.

The conversation of ``memlab bench modes`` (:class:`memlab.experiments.ModesConversation`:
new questions about a remembered synthetic corpus, terse follow-ups, guidance
statements, thanks and corrections) runs through the ``concurrent``, ``sequential`` and
``off`` analysis modes on the stack configuration it is given (the embedded default for
``make demo``: SQLite session cache, the local MiniLM embedder, the offline LLM), each
mode on a fresh stack, with every LLM call taking ``latency_ms`` (a realistic hosted
model). It is one :class:`memlab.experiments.Grid` over ``analysis.search_mode``: the
same table a notebook gets, printed, and an HTML report with the charts of
:mod:`memlab.charts` written under the data root.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab._format import format_value, value_kind
from memlab.demo._report import write_report
from memlab.exceptions import ValidationError

if TYPE_CHECKING:
    import pandas

    from memlab.config import StackConfig

DEMO_MODES = ("concurrent", "sequential", "off")
MODE_COLUMN = "analysis.search_mode"
#: printed and noted in the report when matplotlib and plotly are both missing (the report then has the tables only)
NO_CHARTS = "charts left out: neither plotly nor matplotlib is installed (pip install 'memlab[widgets]' draws them)"

#: (column heading, metric) of the printed table; each value formatted by its metric's kind (memlab.charts.format_value)
_TABLE = (
    ("turns", "turns"),
    ("answered", "answered"),
    ("p50 ms", "latency_p50_ms"),
    ("p95 ms", "latency_p95_ms"),
    ("tokens/turn", "tokens_per_turn"),
    ("LLM calls", "llm_calls"),
    ("guidance written", "guidance_written"),
    ("hit rate", "hit_rate"),
    ("wall s", "wall_s"),
)
#: the summary's machine columns: shown once, at the top of the report, not in its table
MACHINE_COLUMNS = ("cpus", "load_avg_before", "load_avg_after", "embedder")


@dataclass(frozen=True)
class ModeDemoSpec:
    """What the mode demo runs: ``turns`` user messages over ``documents`` remembered documents, each LLM call ``latency_ms``."""

    turns: int = 24
    documents: int = 20
    latency_ms: float = 250.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("turns", "documents"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"ModeDemoSpec.{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.latency_ms, bool) or not isinstance(self.latency_ms, (int, float)) or not 0 <= self.latency_ms <= 60_000:
            raise ValidationError(f"ModeDemoSpec.latency_ms must be a number of ms in [0, 60000], got {self.latency_ms!r}")


@dataclass
class ModeDemoResult:
    """The demo's Grid metric frame, its one-row-per-mode summary, the report's path and the run's wall-clock."""

    frame: "pandas.DataFrame"
    summary: "pandas.DataFrame"
    report: Path
    seconds: float

    @property
    def failed(self) -> "pandas.DataFrame":
        """The rows of cells that failed (empty when every mode ran)."""
        return self.frame[self.frame["status"] == "failed"]


def format_mode_table(summary: "pandas.DataFrame", units: Mapping[str, str] | None = None) -> str:
    """The summary (one row per mode, one column per metric) as the demo's text table, numbers formatted by kind.

    ``units``: metric -> unit (:func:`memlab.charts.metric_units` of the Grid frame) for each
    column's kind; without it the kind comes from the metric's name and dtype.
    """
    units = units or {}
    dtypes = {str(column): summary[column].dtype for column in summary.columns}
    headings = ["mode"] + [heading for heading, _ in _TABLE]
    rows = []
    for _, row in summary.iterrows():
        cells = [str(row[MODE_COLUMN])]
        for _, metric in _TABLE:
            cells.append(format_value(row.get(metric), value_kind(metric, dtype=dtypes.get(metric), unit=units.get(metric)), missing="-"))
        rows.append(cells)
    widths = [max([len(headings[i]), *(len(row[i]) for row in rows)]) for i in range(len(headings))]  # rows may be empty
    lines = ["  ".join(text.ljust(width) if i == 0 else text.rjust(width) for i, (text, width) in enumerate(zip(line, widths)))
             for line in [headings, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


#: concurrent at most this share of sequential's median before the demo names the overlap as the cause
CAUSE_RATIO = 0.75


@dataclass(frozen=True)
class Machine:
    """What the numbers were measured on: CPUs, the 1-minute load average before and after, the embedder."""

    cpus: int
    load_before: float | None
    load_after: float | None
    embedder: str

    def describe(self) -> str:
        load = "n/a" if self.load_before is None else f"{self.load_before:.2f} -> {self.load_after:.2f}"
        return f"{self.cpus} CPUs, load average (1 min) {load} over the run, embedder {self.embedder}"


def _load() -> float | None:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _headline(summary: "pandas.DataFrame", machine: Machine) -> list[str]:
    """One sentence per comparison the demo is about (only for the modes that ran), stating a cause only when the numbers support it.

    The concurrent / sequential sentence gives the measured ratio of the medians; it says
    the analysis call ran beside the answer only when concurrent took at most
    :data:`CAUSE_RATIO` of sequential's time (two equal LLM calls overlapped give ~0.5);
    otherwise it says what was measured, on what machine, and claims no cause.
    """
    by_mode = {row[MODE_COLUMN]: row for _, row in summary.iterrows()}
    lines = []
    concurrent, sequential, off = (by_mode.get(mode) for mode in DEMO_MODES)
    if concurrent is not None and sequential is not None and sequential["latency_p50_ms"]:
        ratio = concurrent["latency_p50_ms"] / sequential["latency_p50_ms"]
        measured = (f"concurrent answers in {concurrent['latency_p50_ms']:,.0f} ms (median) against sequential's "
                    f"{sequential['latency_p50_ms']:,.0f} ms: {ratio:.2f}x the time")
        if ratio <= CAUSE_RATIO:
            lines.append(f"{measured}: the analysis call runs beside the answer instead of before it.")
        elif ratio < 1:
            lines.append(f"{measured}: faster, but by less than overlapping the analysis with the answer allows (~0.5x), so "
                         f"something else dominated this run ({machine.describe()}); no cause is claimed.")
        else:
            lines.append(f"{measured}: not faster in this run ({machine.describe()}); the overlap did not pay off here and "
                         "no cause is claimed.")
        lines.append(
            f"sequential may gate a turn (answered {sequential['answered']:.0f} of {sequential['turns']:.0f}) "
            f"and serves guidance in the same turn; concurrent answers every turn and applies guidance from the next."
        )
    if off is not None:
        base = f"off skips the analysis: {off['latency_p50_ms']:,.0f} ms median, {off['tokens_per_turn']:,.0f} tokens per turn"
        if concurrent is not None:
            base += f" (concurrent: {concurrent['tokens_per_turn']:,.0f}), and writes no guidance"
        lines.append(base + ".")
    return lines


async def run_mode_demo(
    config: "StackConfig",
    spec: ModeDemoSpec = ModeDemoSpec(),
    *,
    out: Callable[[str], Any] = print,
    progress: bool = True,
    report_dir: str | Path | None = None,
) -> ModeDemoResult:
    """Run the three modes on ``config`` (its LLM latency set to ``spec.latency_ms``), report through ``out``.

    Prints the comparison table and a few sentences reading it, writes the HTML report
    (the machine it ran on at the top, the table, the comparison chart and a per-turn
    latency chart by mode: interactive plotly when plotly is installed, PNG when only
    matplotlib is, none on the core install; every metric and every turn) to
    ``report_dir`` (default: ``<data_root>/reports``) as ``modes-<UTC time>.html`` and
    prints its path. A mode that fails is listed with
    its error; the others are still compared.
    """
    from memlab.charts import comparison_figure, comparison_summary, figure_data_uri, metric_units
    from memlab.experiments import Grid, ModesConversation

    base = config.model_copy(update={"llm": config.llm.model_copy(update={"offline_latency_ms": float(spec.latency_ms)})})
    workload = ModesConversation(turns=spec.turns, documents=spec.documents)
    out(f"memlab demo: one conversation of {spec.turns} turns (seed {spec.seed}) over {spec.documents} remembered documents, "
        f"through each analysis mode; every LLM call takes {spec.latency_ms:g} ms")
    out(f"stack: {base.cache.backend} session cache, embedder {base.embedding.model}, LLM {base.llm.model}; a fresh stack per mode")
    started, load_before = time.perf_counter(), _load()
    grid = Grid(base=base, vary={MODE_COLUMN: list(DEMO_MODES)}, workload=workload, seeds=[spec.seed])
    frame = await grid.run(progress=progress)
    seconds = time.perf_counter() - started
    machine = Machine(os.cpu_count() or 1, load_before, _load(), base.embedding.model)
    summary = comparison_summary(frame, by=[MODE_COLUMN])
    if not summary.empty:
        summary = summary.assign(cpus=machine.cpus, load_avg_before=machine.load_before, load_avg_after=machine.load_after,
                                 embedder=machine.embedder)
    out("")
    out(format_mode_table(summary, metric_units(frame)))
    out(f"measured on {machine.describe()}")
    out("")
    headline = _headline(summary, machine)
    for line in headline:
        out(line)
    failed = frame[frame["status"] == "failed"]
    for _, row in failed.iterrows():
        out(f"FAILED {row[MODE_COLUMN]}: {row['error']}")
    notes = [*headline,
             "p50 / p95: wall-clock of the answered turns. hit rate: question and follow-up turns whose merged retrieval "
             "lane held an element of the gold document. guidance written: guidance entries in the session afterwards. "
             "One seed: no whiskers (they are drawn from two seeds on)."]
    context = [
        ("machine", f"{machine.cpus} CPUs"),
        ("load average (1 min)", "n/a" if machine.load_before is None else f"{machine.load_before:.2f} before, {machine.load_after:.2f} after the run"),
        ("embedder", machine.embedder),
        ("LLM", f"{base.llm.model}, {spec.latency_ms:g} ms per call"),
        ("session cache", base.cache.backend),
        ("run", f"{spec.turns} turns over {spec.documents} documents, seed {spec.seed}, a fresh stack per mode; {seconds:.1f} s"),
    ]
    plots, images = [], []
    turns = grid.frame("turn")
    if not summary.empty and importlib.util.find_spec("plotly") is not None:
        from memlab.plotly_charts import comparison_plot, turn_latency_plot

        plots.append(("latency, tokens and hit rate per mode (hover for the values)", comparison_plot(frame, series=MODE_COLUMN)))
        if not turns.empty:
            plots.append(("wall-clock of every turn, by mode", turn_latency_plot(turns, series=MODE_COLUMN, title="wall-clock per turn (ms)")))
    elif not summary.empty and importlib.util.find_spec("matplotlib") is not None:
        from memlab.charts import turn_latency_figure

        images.append(("latency, tokens and hit rate per mode", figure_data_uri(comparison_figure(frame, series=MODE_COLUMN))))
        if not turns.empty:
            images.append(("wall-clock of every turn, by mode", figure_data_uri(turn_latency_figure(turns, series=MODE_COLUMN, title="wall-clock per turn (ms)"))))
    elif not summary.empty:  # the core install: the charts come with memlab[widgets]
        out("")
        out(NO_CHARTS)
        notes.append(NO_CHARTS)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(report_dir) if report_dir is not None else base.data_root / "reports"
    report = write_report(
        directory / f"modes-{stamp}.html",
        "memlab: concurrent vs sequential vs off",
        context=context,
        notes=notes,
        tables=[("per mode (median over seeds)", summary.drop(columns=[c for c in MACHINE_COLUMNS if c in summary.columns]))],
        plots=plots,
        images=images,
        details=[("every metric (the Grid frame)", frame), ("every turn", turns)],
        units=metric_units(frame),
    )
    out("")
    out(f"report: {report}")
    return ModeDemoResult(frame, summary, report, seconds)
