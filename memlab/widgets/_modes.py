"""ModeComparison: latency, tokens and hit rate of an experiment's result frame, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlab._format import format_frame, value_kind
from memlab.charts import (
    DEFAULT_METRICS,
    comparison_figure,
    comparison_summary,
    failed_cells,
    figure_png,
    metric_units,
    vary_columns,
)
from memlab.exceptions import ValidationError
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer
from memlab.widgets._grid import FrameGrid

if TYPE_CHECKING:
    import pandas

NONE = ""
SERIES_DEFAULT = "analysis.search_mode"


class ModeComparison(Explorer):
    """Charts, a summary and a grid of a :meth:`memlab.experiments.Grid.run` result frame (see :mod:`memlab.charts`).

    ``ModeComparison(results)`` renders at once and displays as its ``widget``
    (``await refresh()`` re-renders). Controls: ``series_select`` (the column whose
    values are the series; default ``"analysis.search_mode"`` when present, else the
    first vary column, ``"cell"`` when nothing varies) and ``x_select`` (a second vary
    column for the x axis, ``""`` for none: grouped bars; default the first other vary
    column). Shown: ``chart``, the comparison of ``metrics``: with plotly installed
    (``interactive`` None or True) a ``plotly.graph_objects.FigureWidget`` of
    :func:`memlab.plotly_charts.comparison_plot` (hover a point for its median, min -
    max and seed count; lines hover per x, so coinciding series are all listed),
    else (``interactive=False``, or no plotly) an ``ipywidgets.Image`` of the matplotlib
    :func:`memlab.charts.comparison_figure`; ``figure`` is the figure drawn (plotly or
    matplotlib). ``summary`` (HTML of ``summary_frame``:
    :func:`memlab.charts.comparison_summary` by series and x, medians over ok seeds,
    formatted by the metrics' units), ``failures`` (the failed cells and their errors)
    and ``grid`` (a :class:`~memlab.widgets.FrameGrid` of the whole result frame: sort
    and filter by metric, cell, seed).
    """

    def __init__(self, results: "pandas.DataFrame", *, metrics: Sequence[str] = DEFAULT_METRICS, interactive: bool | None = None) -> None:
        if "metric" not in getattr(results, "columns", ()):
            raise ValidationError("ModeComparison takes the result frame of Grid.run() (columns cell, <vary keys>, seed, metric, value, ...)")
        super().__init__()
        w = self._w
        from memlab import plotly_charts

        if interactive and not plotly_charts.is_available():
            plotly_charts.require_plotly()  # ImportError naming the extra
        self.interactive = plotly_charts.is_available() if interactive is None else bool(interactive)
        self.results, self.metrics = results, tuple(metrics)
        self.figure: Any = None
        self.summary_frame: "pandas.DataFrame | None" = None
        self._units = metric_units(results)
        varied = vary_columns(results) or ["cell"]
        series = SERIES_DEFAULT if SERIES_DEFAULT in varied else varied[0]
        others = [column for column in varied if column != series]
        self.series_select = w.Dropdown(description="series", options=varied, value=series)
        self.x_select = w.Dropdown(description="x axis", options=[("(none: bars)", NONE), *[(c, c) for c in varied]], value=others[0] if others else NONE)
        self.chart: Any = w.Output() if self.interactive else w.Image(format="png")
        self.chart_box = w.VBox([self.chart])
        self.summary, self.failures = w.HTML(), w.HTML()
        self.grid = FrameGrid(results, kinds={"value": "number"}, page_size=10, title="every run and metric (the Grid frame)")
        self.widget = w.VBox([w.HBox([self.series_select, self.x_select]), self.chart_box, self.summary, self.failures, self.grid.widget, self.status])
        self._observe(self.series_select, self._series_changed)
        self._observe(self.x_select, self._render)
        self._render()

    async def refresh(self) -> None:
        """Re-render from ``results`` (nothing to load: the frame is in memory)."""
        self._render()

    def _series_changed(self) -> None:
        if self.x_select.value == self.series_select.value:
            with self._programmatic():
                self.x_select.value = next((c for c in vary_columns(self.results) if c != self.series_select.value), NONE)
        self._render()

    def _render(self) -> None:
        series = self.series_select.value
        x = self.x_select.value or None
        if x == series:
            x = None
        by = [series] + ([x] if x else [])
        self.summary_frame = comparison_summary(self.results, by)
        if self.interactive:
            from plotly.graph_objects import FigureWidget

            from memlab.plotly_charts import comparison_plot

            self.figure = comparison_plot(self.results, series=series, x=x, metrics=self.metrics)
            previous, self.chart = self.chart, FigureWidget(self.figure)
            self.chart_box.children = (self.chart,)
            previous.close()  # the panels' axes change with x: a new figure widget, the old one's model closed
        else:
            self.figure = comparison_figure(self.results, series=series, x=x, metrics=self.metrics)
            self.chart.value = figure_png(self.figure)
        kinds = {column: value_kind(column, unit=self._units[column]) for column in self.summary_frame.columns if column in self._units}
        self.summary.value = h.page(h.heading(f"median over ok seeds, by {', '.join(by)}"), _frame_html(self.summary_frame, kinds))
        failed = failed_cells(self.results)
        self.failures.value = h.page(h.heading(f"failed cells: {len(failed)}"), _frame_html(failed, {}, empty="every cell ran"))
        self._say("")


def _frame_html(frame: "pandas.DataFrame", kinds: dict[str, str], *, empty: str = "no rows") -> str:
    """``frame`` as a table formatted by kind, in a container that scrolls sideways when it is wide."""
    shown = format_frame(frame, {column: kind for column, kind in kinds.items() if column in frame.columns})
    rows = [[h.esc(value) for value in row] for row in shown.itertuples(index=False)]
    return f'<div style="overflow-x:auto;max-width:100%">{h.table([str(column) for column in frame.columns], rows, empty=empty)}</div>'
