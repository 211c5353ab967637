"""Charts of memlab results (matplotlib and pandas, both imported on first use).

Pure functions shared by :mod:`memlab.widgets` and the HTML report of ``make demo``.
Figures are built as :class:`matplotlib.figure.Figure` objects directly (no pyplot
state, any backend); :func:`figure_png` / :func:`figure_data_uri` embed them.

An experiment's result frame (:meth:`memlab.experiments.Grid.run`) has the columns
:data:`RESULT_COLUMNS` plus one column per vary key, named as the key
(``"analysis.search_mode"``, ``"llm_latency_ms"``): one row per (cell, seed,
workload, metric), ``status`` ``"ok"`` or ``"failed"``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ValidationError

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

__all__ = [
    "DEFAULT_METRICS",
    "RESULT_COLUMNS",
    "comparison_figure",
    "comparison_summary",
    "failed_cells",
    "figure_data_uri",
    "figure_png",
    "interval_metrics",
    "phase_timeline_figure",
    "require_matplotlib",
    "vary_columns",
]

#: the fixed columns of a Grid result frame; every other column is a vary key
RESULT_COLUMNS = ("cell", "seed", "workload", "metric", "value", "unit", "status", "error", "cached")
#: the panels :func:`comparison_figure` draws by default (the two latencies share one)
DEFAULT_METRICS = ("latency_p50_ms", "latency_p95_ms", "tokens_per_turn", "hit_rate")
_LATENCY = ("latency_p50_ms", "latency_p95_ms")
_INSTALL_HINT = "pip install 'memlab[widgets]'"


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
    return ok


def _grouped(frame: "pandas.DataFrame", by: Sequence[str], hows: Sequence[str]) -> list["pandas.DataFrame"]:
    """Per aggregate of ``hows`` ("median", "min", "max"): ``value`` per group of ``by`` (first-appearance order), one column per metric."""
    import pandas as pd

    ok = _ok_rows(frame)
    metrics = list(dict.fromkeys(ok["metric"].astype(str)))
    groups: Any = ok.groupby(list(by), sort=False, dropna=False) if by and not ok.empty else [((), ok)]
    rows: dict[str, list[dict[str, Any]]] = {how: [] for how in hows}
    for key, group in groups:
        if group.empty and by:
            continue
        values = key if isinstance(key, tuple) else (key,)
        per_metric = group.groupby(group["metric"].astype(str), sort=False)["value"].agg(list(hows))
        for how in hows:
            rows[how].append({**dict(zip(by, values)), **{metric: per_metric[how].get(metric, pd.NA) for metric in metrics}})
    return [pd.DataFrame(rows[how], columns=[*by, *metrics]).astype({metric: "Float64" for metric in metrics}) for how in hows]


def comparison_summary(frame: "pandas.DataFrame", by: Sequence[str]) -> "pandas.DataFrame":
    """One row per group of ``by`` (in first-appearance order), one ``Float64`` column per metric.

    Each value is the median of that metric over the group's ``ok`` rows (its seeds,
    and any vary key not in ``by``); failed rows are left out, and a metric a group
    never produced is NA. ``by`` empty: a single row over the whole frame. Raises
    ``ValidationError`` when a ``by`` column or a result column is missing.
    """
    by = list(by)
    _check_frame(frame, by)
    return _grouped(frame, by, ["median"])[0]


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


def _units(frame: "pandas.DataFrame") -> dict[str, str]:
    if "unit" not in frame.columns:
        return {}
    rows = frame[frame["metric"].notna() & frame["unit"].notna()].drop_duplicates("metric")
    return {str(metric): str(unit) for metric, unit in zip(rows["metric"], rows["unit"]) if str(unit)}


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


def _whiskers(frame: "pandas.DataFrame", by: Sequence[str]) -> tuple["pandas.DataFrame", "pandas.DataFrame", "pandas.DataFrame"]:
    """Per group of ``by``: the median of every metric, and the whiskers' low and high ends (NA: no whisker).

    A metric with interval metrics (:func:`interval_metrics`, e.g. a workload's bootstrap
    interval over questions) whiskers from the median over seeds of its ``_lo`` to that of
    its ``_hi``; otherwise, where the group has more than one ok seed, from the minimum to the
    maximum over them; otherwise (one seed, no interval) it has none.
    """
    import pandas as pd

    median, low, high = _grouped(frame, by, ["median", "min", "max"])
    seeds = _seed_counts(frame, by, len(median))
    for metric in [column for column in median.columns if column not in by]:
        lo, hi = interval_metrics(metric)
        if lo in median.columns and hi in median.columns:
            low[metric], high[metric] = median[lo], median[hi]
        else:
            spread = pd.Series([count > 1 for count in seeds], index=median.index)
            low[metric] = low[metric].where(spread, pd.NA)
            high[metric] = high[metric].where(spread, pd.NA)
    return median, low, high


def _seed_counts(frame: "pandas.DataFrame", by: Sequence[str], groups: int) -> list[int]:
    """The number of distinct seeds among each group's ok rows (the groups of :func:`_grouped`, in its order)."""
    ok = _ok_rows(frame)
    if "seed" not in ok.columns:
        return [1] * groups
    if not by:
        return [int(ok["seed"].nunique())] * groups
    counts = ok.groupby(list(by), sort=False, dropna=False)["seed"].nunique()
    return [int(count) for count in counts.tolist()]


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
    sorted ``x`` values (numeric when they all are). Error bars only where there is a
    spread to show: a metric's interval when the frame has one (``<metric>_lo`` /
    ``<metric>_hi`` metrics, such as :class:`memlab.experiments.ConversationalBenchmark`'s
    bootstrap intervals; medians over seeds), else the min to the max over a group's ok
    seeds when it has more than one; with one seed and no interval, none. A metric the
    frame lacks gets a panel saying "no data". Raises ``ValidationError`` for an unknown
    column.
    """
    if x is not None and x == series:
        raise ValidationError(f"series and x are the same column {series!r}")
    by = [series] + ([x] if x is not None else [])
    _check_frame(frame, by)
    panels = _panels(list(metrics))
    if not panels:
        raise ValidationError("comparison_figure needs at least one metric")
    median, low, high = _whiskers(frame, by)
    units = _units(frame)
    fig = _new_figure(max(4.0, 4.0 * len(panels)), 3.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    series_values = list(dict.fromkeys(median[series].tolist())) if not median.empty else []
    colors = {value: f"C{index % 10}" for index, value in enumerate(series_values)}
    for ax, panel in zip(axes, panels):
        ax.set_title(_panel_title(panel, units))
        present = [metric for metric in panel if metric in median.columns]
        if not present or not series_values:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        if x is None:
            _bars(ax, median, low, high, series, series_values, present, panel, colors)
        else:
            _lines(ax, median, low, high, series, x, series_values, present, panel, colors)
        ax.grid(axis="y", alpha=0.3)
        values = [float(v) for metric in present for v in (*high[metric], *median[metric]) if not _missing(v)]
        if values and min(values) >= 0:  # counts, times, ratios: start the axis at zero
            top = max(values)
            ax.set_ylim(0, 1.05 if units.get(panel[0]) == "ratio" and top <= 1 else None)
    if x is not None and series_values:
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside right upper", fontsize="small", title=series, title_fontsize="small")
    return fig


def _bars(ax: Any, median: Any, low: Any, high: Any, series: str, values: list[Any], present: list[str], panel: tuple[str, ...], colors: dict[Any, str]) -> None:
    width = 0.8 / len(present)
    for slot, metric in enumerate(present):
        offset = (slot - (len(present) - 1) / 2) * width
        for position, value in enumerate(values):
            row = median[series] == value
            mid = median.loc[row, metric].iloc[0]
            if _missing(mid):
                continue
            lo, hi = low.loc[low[series] == value, metric].iloc[0], high.loc[high[series] == value, metric].iloc[0]
            whisker = None if _missing(lo) or _missing(hi) else [[float(mid) - float(lo)], [float(hi) - float(mid)]]
            ax.bar(
                position + offset,
                float(mid),
                width * 0.95,
                color=colors[value],
                alpha=1.0 if slot == 0 else 0.55,
                hatch=None if slot == 0 else "//",
                yerr=whisker,
                capsize=3 if whisker else 0,
            )
    ax.set_xticks(range(len(values)), [str(value) for value in values])
    ax.set_xlabel(series)
    if len(present) > 1:
        from matplotlib.patches import Patch

        keys = [
            Patch(facecolor="0.45", alpha=1.0 if slot == 0 else 0.55, hatch=None if slot == 0 else "//", label=_series_label(metric, panel))
            for slot, metric in enumerate(present)
        ]
        ax.legend(handles=keys, fontsize="small")


def _lines(ax: Any, median: Any, low: Any, high: Any, series: str, x: str, values: list[Any], present: list[str], panel: tuple[str, ...],
           colors: dict[Any, str]) -> None:
    xs_all = list(dict.fromkeys(median[x].tolist()))
    numeric = _numeric(xs_all)
    if numeric is not None:
        order = [value for _, value in sorted(zip(numeric, xs_all), key=lambda pair: pair[0])]
        position = {value: float(value) for value in order}
    else:
        order = sorted(xs_all, key=str)
        position = {value: float(index) for index, value in enumerate(order)}
    styles = ("-", "--", ":", "-.")
    for slot, metric in enumerate(present):
        for value in values:
            chosen = median[series] == value
            rows, lows, highs = median[chosen], low[chosen], high[chosen]
            points = sorted(
                ((position[xv], float(yv), lo, hi) for xv, yv, lo, hi in zip(rows[x], rows[metric], lows[metric], highs[metric]) if not _missing(yv)),
                key=lambda point: point[0],
            )
            if not points:
                continue
            label = str(value) if len(present) == 1 else f"{value} {_series_label(metric, panel)}"
            ax.plot(
                [p[0] for p in points],
                [p[1] for p in points],
                styles[slot % len(styles)],
                marker="o" if slot == 0 else "s",
                color=colors[value],
                label=label,
            )
            spread = [(px, py, float(lo), float(hi)) for px, py, lo, hi in points if not _missing(lo) and not _missing(hi)]
            if spread:
                ax.errorbar(
                    [p[0] for p in spread],
                    [p[1] for p in spread],
                    yerr=[[p[1] - p[2] for p in spread], [p[3] - p[1] for p in spread]],
                    fmt="none",
                    ecolor=colors[value],
                    capsize=3,
                )
    if numeric is None:
        ax.set_xticks(range(len(order)), [str(value) for value in order])
    ax.set_xlabel(x)


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
