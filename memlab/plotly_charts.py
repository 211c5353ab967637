"""Interactive charts of memlab results: the :mod:`memlab.charts` comparisons as plotly figures, with hover values.

plotly is imported on first use (``pip install 'memlab[widgets]'`` brings it). Each
function draws the same description of the chart as its matplotlib twin
(:func:`memlab.charts.comparison_data`, :func:`memlab.charts.turn_latency_data`), so
the numbers, the error-bar rule (:func:`memlab.charts.show_error_bars`: whiskers only
where two or more seeds ran) and the series styles (:func:`memlab.charts.series_styles`:
a marker shape per series, markers shrinking and lines thinning from one series to
the next) are the same. Hovering a point shows its series, x, median, min - max and
seed count, formatted by :func:`memlab.charts.format_value`; line charts hover per x
("x unified"), so series that coincide are all listed.

:func:`figure_html` embeds a figure in a page with plotly.js inlined from the installed
package (no CDN): a report opens offline.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlab._format import format_value
from memlab.charts import DEFAULT_METRICS, Comparison, Trace, comparison_data, turn_latency_data

if TYPE_CHECKING:
    import pandas
    from plotly.graph_objects import Figure

__all__ = ["comparison_plot", "figure_html", "is_available", "require_plotly", "turn_latency_plot"]

_INSTALL_HINT = "pip install 'memlab[widgets]'"
_DASHES = ("solid", "dash", "dot", "dashdot")
_HOVER = "<b>%{fullData.name}</b><br>%{customdata[0]}<br>median %{customdata[1]}<br>min - max %{customdata[2]}<br>seeds %{customdata[3]}<extra></extra>"


def is_available() -> bool:
    """True when plotly can be imported; imports nothing."""
    return importlib.util.find_spec("plotly") is not None


def require_plotly() -> Any:
    """The ``plotly.graph_objects`` module; ``ImportError`` naming ``pip install 'memlab[widgets]'`` when plotly is missing."""
    try:
        import plotly.graph_objects as go
    except ImportError as exc:
        raise ImportError(f"interactive charts need plotly: {_INSTALL_HINT}") from exc
    return go


def _custom(data: Comparison, trace: Trace, kind: str) -> list[list[str]]:
    """Per point: the x label, median, min - max and seeds, formatted (the hover text)."""
    axis = data.x or data.series
    rows = []
    for point in trace.points:
        spread = f"{format_value(point.low, kind)} - {format_value(point.high, kind)}" if point.error_bar else "(one seed: no spread)"
        rows.append([f"{axis} = {point.x}", format_value(point.median, kind), spread, str(point.seeds)])
    return rows


def _error(trace: Trace) -> dict[str, Any] | None:
    if not any(point.error_bar for point in trace.points):
        return None
    nan = float("nan")
    return {
        "type": "data",
        "symmetric": False,
        "array": [point.high - point.median if point.error_bar else nan for point in trace.points],
        "arrayminus": [point.median - point.low if point.error_bar else nan for point in trace.points],
        "thickness": 1.2,
        "width": 3,
    }


def _draw(data: Comparison, *, height: int = 380) -> "Figure":
    go = require_plotly()
    from plotly.subplots import make_subplots

    titles = [panel.title + (" · p50 plain, p95 hatched" if data.x is None and len(panel.metrics) > 1 else "") for panel in data.panels]
    fig = make_subplots(rows=1, cols=len(data.panels), subplot_titles=titles)
    shown: set[str] = set()
    for index, panel in enumerate(data.panels):
        traces = data.panel_traces(index)
        column = index + 1
        if not traces:
            fig.add_annotation(text="no data", showarrow=False, xref=f"x{column if column > 1 else ''} domain",
                               yref=f"y{column if column > 1 else ''} domain", x=0.5, y=0.5)
            continue
        for trace in traces:
            style = data.styles[trace.series_value]
            custom = _custom(data, trace, panel.kind)
            if data.x is None:
                [point] = trace.points
                fig.add_trace(go.Bar(
                    x=[str(point.x)], y=[point.median], name=trace.label, customdata=custom, hovertemplate=_HOVER,
                    marker={"color": style.color, "opacity": 1.0 if trace.slot == 0 else 0.6,
                            "pattern": {"shape": "" if trace.slot == 0 else "/"}},
                    error_y=_error(trace), offsetgroup=str(trace.slot), showlegend=False,
                ), row=1, col=column)
            else:
                first = trace.label not in shown
                shown.add(trace.label)
                fig.add_trace(go.Scatter(
                    x=[point.x for point in trace.points] if data.x_numeric else [str(point.x) for point in trace.points],
                    y=[point.median for point in trace.points], name=trace.label, legendgroup=trace.label, showlegend=first,
                    mode="lines+markers", customdata=custom, hovertemplate=_HOVER,
                    marker={"symbol": style.symbol, "size": style.size, "color": style.color},
                    line={"color": style.color, "width": style.width, "dash": _DASHES[trace.slot % len(_DASHES)]},
                    error_y=_error(trace),
                ), row=1, col=column)
        lows = [point.low for trace in traces for point in trace.points]
        highs = [point.high for trace in traces for point in trace.points]
        if lows and min(lows) >= 0:
            if panel.kind == "ratio" and max(highs) <= 1:
                fig.update_yaxes(range=[0, 1.05], row=1, col=column)
            else:
                fig.update_yaxes(rangemode="tozero", row=1, col=column)
        fig.update_xaxes(title_text=data.x or data.series, row=1, col=column)
        if data.x is not None and not data.x_numeric:
            fig.update_xaxes(type="category", categoryorder="array", categoryarray=[str(value) for value in data.x_values], row=1, col=column)
    fig.update_layout(
        height=height,
        template="plotly_white",
        margin={"l": 50, "r": 20, "t": 50, "b": 50},
        barmode="group",
        hovermode="closest" if data.x is None else "x unified",
        legend={"title": {"text": data.series}},
    )
    return fig


def comparison_plot(
    frame: "pandas.DataFrame",
    *,
    series: str,
    x: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
) -> "Figure":
    """:func:`memlab.charts.comparison_figure` as an interactive plotly figure (same panels, series, whiskers and styles)."""
    return _draw(comparison_data(frame, series=series, x=x, metrics=metrics))


def turn_latency_plot(turns: "pandas.DataFrame", *, series: str, value: str = "wall_ms", title: str | None = None) -> "Figure":
    """:func:`memlab.charts.turn_latency_figure` as an interactive plotly figure: one line per series value over the turns."""
    data = turn_latency_data(turns, series=series, value=value)
    fig = _draw(data, height=340)
    fig.update_layout(title={"text": title or f"{value.replace('_', ' ')} per turn"})
    if data.panels:
        fig.layout.annotations = tuple(a for a in fig.layout.annotations if a.text != data.panels[0].title)
    return fig


def figure_html(fig: "Figure", *, include_plotlyjs: bool = True, div_id: str | None = None) -> str:
    """``fig`` as an HTML fragment (a ``<div>`` and its script); ``include_plotlyjs``: inline plotly.js from the installed package.

    Inline it once per page (the first figure) and pass ``False`` for the others;
    nothing is loaded from a CDN either way.
    """
    return str(fig.to_html(full_html=False, include_plotlyjs=bool(include_plotlyjs), div_id=div_id,
                           config={"displaylogo": False, "responsive": True}))
