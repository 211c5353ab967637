"""Charts of memlab results (matplotlib and pandas, both imported on first use).

Pure functions shared by :mod:`memlab.widgets` and the HTML report of ``make demo``.
Figures are built as :class:`matplotlib.figure.Figure` objects directly (no pyplot
state, any backend); :func:`figure_png` / :func:`figure_data_uri` embed them. The
interactive (plotly) versions of the same charts are in :mod:`memlab.plotly_charts`;
both draw from one description of the chart (:func:`comparison_data`,
:func:`turn_latency_data`), so the two always show the same numbers.

An experiment's result frame (:meth:`memlab.experiments.Grid.run`) has the columns
:data:`RESULT_COLUMNS` plus one column per vary key, named as the key
(``"analysis.search_mode"``, ``"llm_latency_ms"``): one row per (cell, seed,
workload, metric), ``status`` ``"ok"`` or ``"failed"``.

Rules every chart follows:

* numbers are formatted by kind (:func:`memlab.charts.format_value`, the one rule of
  the explorers and the report: counts as integers, ratios and ms to a sensible precision);
* a metric with an interval in the frame (``<metric>_lo`` / ``<metric>_hi``,
  :func:`interval_metrics`, such as :class:`memlab.experiments.ConversationalBenchmark`'s
  bootstrap intervals over questions) is drawn with that interval (medians over seeds);
  otherwise a whisker from the min to the max over seeds is drawn only where two or more
  seeds ran (:func:`show_error_bars`): one run has no spread to show;
* series that coincide stay distinguishable (:func:`series_styles`): each has its own
  marker shape, markers shrink and lines thin from one series to the next and are drawn
  in that order, so equal values show as nested markers of different colours.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memlab._format import format_value, value_kind
from memlab.exceptions import ValidationError

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_METRICS",
    "MIN_SEEDS_FOR_ERROR_BARS",
    "PALETTE",
    "RESULT_COLUMNS",
    "Comparison",
    "Panel",
    "Point",
    "SeriesStyle",
    "Trace",
    "comparison_data",
    "comparison_figure",
    "comparison_summary",
    "failed_cells",
    "figure_data_uri",
    "figure_png",
    "format_value",
    "interval_metrics",
    "metric_units",
    "phase_timeline_figure",
    "quality_results",
    "require_matplotlib",
    "series_styles",
    "show_error_bars",
    "turn_latency_data",
    "turn_latency_figure",
    "value_kind",
    "vary_columns",
]

#: the fixed columns of a Grid result frame; every other column is a vary key
RESULT_COLUMNS = ("cell", "seed", "workload", "metric", "value", "unit", "status", "error", "cached")
#: the panels :func:`comparison_figure` draws by default (the two latencies share one)
DEFAULT_METRICS = ("latency_p50_ms", "latency_p95_ms", "tokens_per_turn", "hit_rate")
#: a group of runs needs this many distinct seeds before a chart draws its spread (see :func:`show_error_bars`)
MIN_SEEDS_FOR_ERROR_BARS = 2
#: series colours, in order (matplotlib's tab10, so PNG and plotly charts agree)
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_MARKERS = (("o", "circle"), ("s", "square"), ("D", "diamond"), ("^", "triangle-up"), ("v", "triangle-down"), ("P", "cross"), ("X", "x"), ("*", "star"))
_LATENCY = ("latency_p50_ms", "latency_p95_ms")
_INSTALL_HINT = "pip install 'memlab[widgets]'"


def show_error_bars(seeds: int) -> bool:
    """Whether a chart draws a whisker (min to max) for a value aggregated over ``seeds`` distinct seeds: two or more.

    The one place this rule lives: :func:`comparison_figure`, :func:`turn_latency_figure`
    and their plotly versions ask it for every point.
    """
    return seeds >= MIN_SEEDS_FOR_ERROR_BARS


@dataclass(frozen=True)
class SeriesStyle:
    """How one series is drawn: colour, marker (matplotlib name and plotly symbol), marker size (points) and line width."""

    color: str
    marker: str
    symbol: str
    size: float
    width: float


def series_styles(values: Sequence[Any]) -> dict[Any, SeriesStyle]:
    """A distinct style per series value, in order: its own colour and marker shape, markers and lines a little smaller each time.

    Drawn in this order, series whose values coincide show as nested markers (a large
    circle around a smaller square around a smaller diamond...) over lines of
    decreasing width, so none hides another.
    """
    styles = {}
    for index, value in enumerate(dict.fromkeys(values)):
        marker, symbol = _MARKERS[index % len(_MARKERS)]
        styles[value] = SeriesStyle(
            color=PALETTE[index % len(PALETTE)],
            marker=marker,
            symbol=symbol,
            size=max(4.0, 11.0 - 2.0 * index),
            width=max(1.0, 3.5 - 0.75 * index),
        )
    return styles


def require_matplotlib() -> Any:
    """The ``matplotlib`` module; ``ImportError`` naming ``pip install 'memlab[widgets]'`` when it is missing."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - matplotlib is installed wherever the tests run
        raise ImportError(f"memlab charts need matplotlib: {_INSTALL_HINT}") from exc
    return matplotlib


def _new_figure(width: float, height: float) -> "Figure":
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def figure_png(fig: "Figure", *, dpi: int = 100) -> bytes:
    """The figure rendered as PNG bytes (works without pyplot or a display)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def figure_data_uri(fig: "Figure", *, dpi: int = 100) -> str:
    """The figure as a ``data:image/png;base64,...`` URI, for ``<img src=...>`` in an HTML report."""
    return "data:image/png;base64," + base64.b64encode(figure_png(fig, dpi=dpi)).decode("ascii")


# -- experiment result frames ---------------------------------------------------------------


def vary_columns(frame: "pandas.DataFrame") -> list[str]:
    """The vary-key columns of a result frame: every column not in :data:`RESULT_COLUMNS`, in frame order."""
    return [str(column) for column in frame.columns if column not in RESULT_COLUMNS]


def _check_frame(frame: "pandas.DataFrame", by: Sequence[str]) -> None:
    missing = [column for column in ("metric", "value", "status") if column not in frame.columns]
    if missing:
        raise ValidationError(f"not a result frame: columns {missing} are missing (have {list(frame.columns)})")
    unknown = [column for column in by if column not in frame.columns]
    if unknown:
        raise ValidationError(f"no column {unknown[0]!r} in the result frame; vary columns: {vary_columns(frame)}")


def _ok_rows(frame: "pandas.DataFrame") -> "pandas.DataFrame":
    import pandas as pd

    ok = frame[frame["status"].astype("string") == "ok"]
    ok = ok[ok["metric"].notna()].copy()
    ok["value"] = pd.to_numeric(ok["value"], errors="coerce").astype("Float64")
    ok["metric"] = ok["metric"].astype(str)
    return ok


@dataclass(frozen=True)
class _Group:
    key: tuple[Any, ...]
    median: dict[str, Any]
    low: dict[str, Any]
    high: dict[str, Any]
    seeds: dict[str, int]


def _aggregate(frame: "pandas.DataFrame", by: Sequence[str]) -> tuple[list[str], list[_Group]]:
    """The metrics (first-appearance order) and, per group of ``by`` (first-appearance order), each metric's median, min, max and seed count over ok rows."""
    import pandas as pd

    ok = _ok_rows(frame).reset_index(drop=True)  # a concatenated frame may repeat index labels
    metrics = list(dict.fromkeys(ok["metric"]))
    if ok.empty:
        return metrics, []
    seeds = ok["seed"] if "seed" in ok.columns else pd.Series(0, index=ok.index)
    groups: Any = ok.groupby(list(by), sort=False, dropna=False) if by else [((), ok)]
    found = []
    for key, group in groups:
        values = group.groupby("metric", sort=False)["value"]
        stats = values.agg(["median", "min", "max"])
        counts = seeds.loc[group.index].groupby(group["metric"], sort=False).nunique()
        found.append(_Group(
            key=key if isinstance(key, tuple) else (key,),
            median=stats["median"].to_dict(),
            low=stats["min"].to_dict(),
            high=stats["max"].to_dict(),
            seeds={str(metric): int(count) for metric, count in counts.items()},
        ))
    return metrics, found


def comparison_summary(frame: "pandas.DataFrame", by: Sequence[str]) -> "pandas.DataFrame":
    """One row per group of ``by`` (in first-appearance order), one ``Float64`` column per metric.

    Each value is the median of that metric over the group's ``ok`` rows (its seeds,
    and any vary key not in ``by``); failed rows are left out, and a metric a group
    never produced is NA. ``by`` empty: a single row over the whole frame. Raises
    ``ValidationError`` when a ``by`` column or a result column is missing.
    """
    import pandas as pd

    by = list(by)
    _check_frame(frame, by)
    metrics, groups = _aggregate(frame, by)
    rows = [{**dict(zip(by, group.key)), **{metric: group.median.get(metric, pd.NA) for metric in metrics}} for group in groups]
    return pd.DataFrame(rows, columns=[*by, *metrics]).astype({metric: "Float64" for metric in metrics})


def metric_units(frame: "pandas.DataFrame") -> dict[str, str]:
    """Metric -> unit of a result frame (its ``unit`` column; metrics without one are left out)."""
    if "unit" not in frame.columns:
        return {}
    rows = frame[frame["metric"].notna() & frame["unit"].notna()].drop_duplicates("metric")
    return {str(metric): str(unit) for metric, unit in zip(rows["metric"], rows["unit"]) if str(unit)}


def failed_cells(frame: "pandas.DataFrame") -> "pandas.DataFrame":
    """One row per failed (cell, seed, workload): the vary values and the ``error``; empty when all ran."""
    import pandas as pd

    _check_frame(frame, ())
    keys = [column for column in ("cell", *vary_columns(frame), "seed", "workload", "error") if column in frame.columns]
    failed = frame[frame["status"].astype("string") != "ok"]
    if failed.empty:
        return pd.DataFrame(columns=keys)
    dedupe = [column for column in ("cell", "seed", "workload") if column in failed.columns] or keys
    return failed.drop_duplicates(subset=dedupe)[keys].reset_index(drop=True)


def _panels(metrics: Sequence[str]) -> list[tuple[str, ...]]:
    """The metric panels: the two latencies share one when both are asked for, every other metric has its own."""
    panels: list[tuple[str, ...]] = []
    for metric in metrics:
        if metric in _LATENCY and all(name in metrics for name in _LATENCY):
            if _LATENCY not in panels:
                panels.append(_LATENCY)
        else:
            panels.append((metric,))
    return panels


def _panel_title(panel: tuple[str, ...], units: Mapping[str, str]) -> str:
    name = "latency" if panel == _LATENCY else panel[0].replace("_", " ")
    unit = units.get(panel[0], "ms" if panel == _LATENCY else "")
    return f"{name} ({unit})" if unit else name


def _series_label(metric: str, panel: tuple[str, ...]) -> str:
    return {"latency_p50_ms": "p50", "latency_p95_ms": "p95"}.get(metric, metric) if len(panel) > 1 else metric


def _missing(value: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


def _numeric(values: Sequence[Any]) -> list[float] | None:
    try:
        return [float(value) for value in values]
    except (TypeError, ValueError):
        return None


def interval_metrics(metric: str) -> tuple[str, str]:
    """The metrics holding the bounds of ``metric``'s interval in a result frame: ``(<metric>_lo, <metric>_hi)``."""
    return f"{metric}_lo", f"{metric}_hi"


def quality_results(frame: "pandas.DataFrame", *, by: Sequence[str] = ("dataset", "retriever", "category")) -> "pandas.DataFrame":
    """A quality summary frame (``stack.frames.quality``, :func:`memlab.bench.quality.to_frame`) as a result frame.

    What :func:`comparison_figure` reads: one row per summary row and metric with an
    interval (every column ``m`` with ``m_lo`` and ``m_hi`` beside it: the recall, hit,
    MRR and no-result metrics), and one per bound (metrics ``m_lo`` / ``m_hi``, drawn as
    ``m``'s error bar); columns ``by`` (the vary columns, e.g. ``series="retriever"``,
    ``x="dataset"``), ``metric``, ``value``, ``unit`` (``"ratio"``), ``status`` (``"ok"``)
    and ``seed`` (0). Missing values (a category without the metric, bounds of a run
    with ``resamples=0``) are left out. Raises ``ValidationError`` for a ``by`` column
    the frame lacks.
    """
    import pandas as pd

    by = list(by)
    missing = [column for column in by if column not in frame.columns]
    if missing:
        raise ValidationError(f"no column {missing[0]!r} in the quality frame (have {list(frame.columns)})")
    metrics = [str(column) for column in frame.columns if all(bound in frame.columns for bound in interval_metrics(str(column)))]
    columns = [name for metric in metrics for name in (metric, *interval_metrics(metric))]
    long = frame[[*by, *columns]].melt(id_vars=by, value_vars=columns, var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"], errors="coerce").astype("Float64")
    long = long[long["value"].notna()].reset_index(drop=True)
    return long.assign(unit="ratio", status="ok", seed=0)


@dataclass(frozen=True)
class Point:
    """One drawn value: at ``x``, the ``median`` over ``seeds`` seeds, spread ``low`` .. ``high``.

    The spread is the metric's interval when the frame has one (``interval``: the medians
    over seeds of its :func:`interval_metrics`, e.g. a bootstrap interval over questions),
    else the min and max over seeds.
    """

    x: Any
    median: float
    low: float
    high: float
    seeds: int
    interval: bool = False

    @property
    def error_bar(self) -> bool:
        """Whether this point's spread is drawn: an interval always, a min-max spread from two seeds (:func:`show_error_bars`)."""
        return self.interval or show_error_bars(self.seeds)


@dataclass(frozen=True)
class Panel:
    """One chart panel: the metrics it shows, its title, and the kind (:func:`format_value`) of its values."""

    metrics: tuple[str, ...]
    title: str
    kind: str


@dataclass(frozen=True)
class Trace:
    """One series of one metric in panel ``panel``: a bar per point (bars) or a line through them (lines).

    ``slot``: the metric's place in its panel (0: p50 / the only metric, drawn solid and
    plain; 1: p95, dashed and hatched).
    """

    panel: int
    metric: str
    series_value: Any
    label: str
    slot: int
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Comparison:
    """What :func:`comparison_figure` and :func:`memlab.plotly_charts.comparison_plot` draw.

    ``x`` None: bars, one group per series value (``points[0].x`` is the series value).
    Otherwise lines over ``x_values`` (sorted; numbers when ``x_numeric``).
    """

    series: str
    x: str | None
    panels: tuple[Panel, ...]
    series_values: tuple[Any, ...]
    traces: tuple[Trace, ...]
    x_values: tuple[Any, ...]
    x_numeric: bool
    styles: Mapping[Any, SeriesStyle]

    def panel_traces(self, index: int) -> list[Trace]:
        return [trace for trace in self.traces if trace.panel == index]


def comparison_data(
    frame: "pandas.DataFrame",
    *,
    series: str,
    x: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> Comparison:
    """The panels, series and points of a comparison chart of ``metrics`` (medians over ok seeds) by ``series`` (and ``x``).

    Raises ``ValidationError`` for an unknown column, ``series == x`` or no metric.
    """
    if x is not None and x == series:
        raise ValidationError(f"series and x are the same column {series!r}")
    by = [series] + ([x] if x is not None else [])
    _check_frame(frame, by)
    panels = _panels(list(metrics))
    if not panels:
        raise ValidationError("comparison_figure needs at least one metric")
    _, groups = _aggregate(frame, by)
    units = metric_units(frame)
    series_values = tuple(dict.fromkeys(group.key[0] for group in groups))
    x_values: tuple[Any, ...] = ()
    numeric = False
    if x is not None:
        raw = list(dict.fromkeys(group.key[1] for group in groups))
        as_numbers = _numeric(raw)
        numeric = as_numbers is not None
        x_values = tuple(value for _, value in sorted(zip(as_numbers, raw), key=lambda pair: pair[0])) if as_numbers is not None else tuple(sorted(raw, key=str))
    traces = []
    for index, panel in enumerate(panels):
        for slot, metric in enumerate(panel):
            for value in series_values:
                points = []
                for group in groups:
                    if group.key[0] != value or _missing(group.median.get(metric, float("nan"))):
                        continue
                    lo, hi = interval_metrics(metric)
                    interval = not _missing(group.median.get(lo, float("nan"))) and not _missing(group.median.get(hi, float("nan")))
                    points.append(Point(
                        x=group.key[1] if x is not None else value,
                        median=float(group.median[metric]),
                        low=float(group.median[lo] if interval else group.low[metric]),
                        high=float(group.median[hi] if interval else group.high[metric]),
                        seeds=group.seeds.get(metric, 0),
                        interval=interval,
                    ))
                if not points:
                    continue
                if x is not None:
                    points.sort(key=lambda point: x_values.index(point.x))
                label = str(value) if len(panel) == 1 else f"{value} {_series_label(metric, panel)}"
                traces.append(Trace(index, metric, value, label, slot, tuple(points)))
    panel_info = tuple(
        Panel(panel, _panel_title(panel, units), value_kind(panel[0], unit=units.get(panel[0], "ms" if panel == _LATENCY else None)))
        for panel in panels
    )
    return Comparison(series, x, panel_info, series_values, tuple(traces), x_values, numeric, series_styles(series_values))


def comparison_figure(
    frame: "pandas.DataFrame",
    *,
    series: str,
    x: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> "Figure":
    """Side-by-side panels of ``metrics`` (medians over ok seeds), one series per value of the ``series`` column.

    Panels, left to right, follow ``metrics``; ``latency_p50_ms`` and ``latency_p95_ms``
    share one panel (p50 solid / plain, p95 dashed / hatched). ``x`` None: grouped bars,
    one group per series value. ``x`` a column: one line per series value over the
    sorted ``x`` values (numeric when they all are), each series with its own marker
    (:func:`series_styles`). Whiskers: a metric's interval when the frame has one
    (:func:`interval_metrics`), else the min to the max over seeds where two or more
    seeds ran (:func:`show_error_bars`). A metric the frame lacks gets a panel
    saying "no data". Raises ``ValidationError`` for an unknown column.
    """
    data = comparison_data(frame, series=series, x=x, metrics=metrics)
    fig = _new_figure(max(4.0, 4.0 * len(data.panels)), 3.4)
    axes = fig.subplots(1, len(data.panels), squeeze=False)[0]
    for index, (ax, panel) in enumerate(zip(axes, data.panels)):
        ax.set_title(panel.title)
        traces = data.panel_traces(index)
        if not traces:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        if x is None:
            _bars(ax, data, panel, traces)
        else:
            _lines(ax, data, traces)
        ax.grid(axis="y", alpha=0.3)
        ax.yaxis.set_major_formatter(lambda value, _: format_value(value, panel.kind))
        highs = [point.high for trace in traces for point in trace.points]
        if highs and min(point.low for trace in traces for point in trace.points) >= 0:  # counts, times, ratios: start at zero
            ax.set_ylim(0, 1.05 if panel.kind == "ratio" and max(highs) <= 1 else None)
    if x is not None and data.traces:
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside right upper", fontsize="small", title=series, title_fontsize="small")
    return fig


def _bars(ax: Any, data: Comparison, panel: Panel, traces: list[Trace]) -> None:
    slots = len(panel.metrics)
    width = 0.8 / slots
    positions = {value: position for position, value in enumerate(data.series_values)}
    for trace in traces:
        offset = (trace.slot - (slots - 1) / 2) * width
        [point] = trace.points
        style = data.styles[trace.series_value]
        ax.bar(
            positions[trace.series_value] + offset,
            point.median,
            width * 0.95,
            color=style.color,
            alpha=1.0 if trace.slot == 0 else 0.55,
            hatch=None if trace.slot == 0 else "//",
            yerr=[[point.median - point.low], [point.high - point.median]] if point.error_bar else None,
            capsize=3,
        )
    ax.set_xticks(range(len(data.series_values)), [str(value) for value in data.series_values])
    ax.set_xlabel(data.series)
    if slots > 1:
        from matplotlib.patches import Patch

        keys = [
            Patch(facecolor="0.45", alpha=1.0 if slot == 0 else 0.55, hatch=None if slot == 0 else "//", label=_series_label(metric, panel.metrics))
            for slot, metric in enumerate(panel.metrics)
        ]
        ax.legend(handles=keys, fontsize="small")


def _positions(data: Comparison) -> dict[Any, float]:
    if data.x_numeric:
        return {value: float(value) for value in data.x_values}
    return {value: float(index) for index, value in enumerate(data.x_values)}


_DASHES = ("-", "--", ":", "-.")


def _lines(ax: Any, data: Comparison, traces: list[Trace]) -> None:
    position = _positions(data)
    for order, trace in enumerate(traces):
        style = data.styles[trace.series_value]
        xs = [position[point.x] for point in trace.points]
        ys = [point.median for point in trace.points]
        spread = [point for point in trace.points if point.error_bar]
        ax.plot(xs, ys, _DASHES[trace.slot % len(_DASHES)], marker=style.marker, markersize=style.size, linewidth=style.width,
                color=style.color, label=trace.label, zorder=2 + order)
        if spread:  # whiskers as one collection: ax.get_lines() stays one line per trace
            ax.vlines([position[point.x] for point in spread], [point.low for point in spread], [point.high for point in spread],
                      colors=style.color, alpha=0.6, linewidth=1.2, zorder=1)
    if not data.x_numeric:
        ax.set_xticks(range(len(data.x_values)), [str(value) for value in data.x_values])
    ax.set_xlabel(data.x)


# -- turns of an experiment ------------------------------------------------------------------


def turn_latency_data(turns: "pandas.DataFrame", *, series: str, value: str = "wall_ms") -> Comparison:
    """One line per ``series`` value over the turn index: the median ``value`` of each turn over ok seeds (spread when two or more).

    ``turns``: a Grid's turn frame (``grid.frame("turn")``: columns ``turn``, ``seed``,
    the vary keys and the workload's per-turn columns such as ``wall_ms``). Raises
    ``ValidationError`` when ``turn``, ``series`` or ``value`` is missing.
    """
    import pandas as pd

    missing = [column for column in ("turn", series, value) if column not in turns.columns]
    if missing:
        raise ValidationError(f"not a turn frame with {missing} (columns: {list(turns.columns)})")
    long = pd.DataFrame({
        series: turns[series],
        "turn": turns["turn"],
        "seed": turns["seed"] if "seed" in turns.columns else 0,
        "metric": value,
        "value": pd.to_numeric(turns[value], errors="coerce"),
        "unit": "ms" if value.endswith("_ms") else None,
        "status": "ok",
    })
    return comparison_data(long, series=series, x="turn", metrics=(value,))


def turn_latency_figure(turns: "pandas.DataFrame", *, series: str, value: str = "wall_ms", title: str | None = None) -> "Figure":
    """The per-turn latency of each ``series`` value (see :func:`turn_latency_data`) as lines with distinct markers."""
    data = turn_latency_data(turns, series=series, value=value)
    fig = _new_figure(8.0, 3.4)
    ax = fig.subplots()
    ax.set_title(title or f"{value.replace('_', ' ')} per turn")
    if not data.traces:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return fig
    _lines(ax, data, list(data.traces))
    ax.yaxis.set_major_formatter(lambda tick, _: format_value(tick, data.panels[0].kind))
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", title=series, title_fontsize="small")
    return fig


# -- one turn ----------------------------------------------------------------------------------


def phase_timeline_figure(phases: Sequence[Mapping[str, Any]], *, title: str | None = None) -> "Figure":
    """A turn's phases (``[{"phase", "start_ms", "ms"}]``, see :func:`memlab.flows.turn.turn_trace`) as a timeline.

    One horizontal bar per phase, top to bottom by ``start_ms`` (ties in recorded
    order), from ``start_ms`` for ``ms`` (so analysis overlapping retrieval in
    concurrent mode shows as overlapping bars). No phases: a figure saying so.
    """
    rows = sorted(phases, key=lambda row: float(row.get("start_ms") or 0.0))
    fig = _new_figure(7.0, max(1.6, 0.42 * len(rows) + 0.9))
    ax = fig.subplots()
    if title:
        ax.set_title(title)
    if not rows:
        ax.text(0.5, 0.5, "no phases recorded", ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    colors = {"analysis": "C3", "answer": "C0", "retrieve_raw": "C2", "retrieve_rewrite": "C4", "merge": "C1"}
    for index, row in enumerate(rows):
        start, span = float(row.get("start_ms") or 0.0), float(row.get("ms") or 0.0)
        ax.barh(index, span, left=start, height=0.6, color=colors.get(str(row.get("phase")), "C7"))
        ax.text(start + span, index, f" {span:.1f} ms", va="center", fontsize="small")
    end = max(float(row.get("start_ms") or 0.0) + float(row.get("ms") or 0.0) for row in rows)
    ax.set_xlim(0, end * 1.2 if end > 0 else 1.0)
    ax.set_yticks(range(len(rows)), [str(row.get("phase")) for row in rows])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the turn took its lock")
    ax.grid(axis="x", alpha=0.3)
    return fig
