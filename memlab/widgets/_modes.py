"""ModeComparison: latency, tokens and hit rate of an experiment's result frame, side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memlab.charts import (
    DEFAULT_METRICS,
    comparison_figure,
    comparison_summary,
    failed_cells,
    figure_png,
    vary_columns,
)
from memlab.exceptions import ValidationError
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

NONE = ""
SERIES_DEFAULT = "analysis.search_mode"


class ModeComparison(Explorer):
    """Charts and a summary of a :meth:`memlab.experiments.Grid.run` result frame (see :mod:`memlab.charts`).

    ``ModeComparison(results)`` renders at once and displays as its ``widget``
    (``await refresh()`` re-renders). Controls: ``series_select`` (the column whose
    values are the series; default ``"analysis.search_mode"`` when present, else the
    first vary column, ``"cell"`` when nothing varies) and ``x_select`` (a second vary
    column for the x axis, ``""`` for none: grouped bars; default the first other vary
    column). Shown: ``chart`` (``ipywidgets.Image`` of ``figure``,
    :func:`memlab.charts.comparison_figure` of ``metrics``), ``summary`` (HTML of
    ``summary_frame``: :func:`memlab.charts.comparison_summary` by series and x, medians
    over ok seeds), ``failures`` (the failed cells and their errors).
    """

    def __init__(self, results: "pandas.DataFrame", *, metrics: Sequence[str] = DEFAULT_METRICS) -> None:
        if "metric" not in getattr(results, "columns", ()):
            raise ValidationError("ModeComparison takes the result frame of Grid.run() (columns cell, <vary keys>, seed, metric, value, ...)")
        super().__init__()
        w = self._w
        self.results, self.metrics = results, tuple(metrics)
        self.figure: "Figure | None" = None
        self.summary_frame: "pandas.DataFrame | None" = None
        varied = vary_columns(results) or ["cell"]
        series = SERIES_DEFAULT if SERIES_DEFAULT in varied else varied[0]
        others = [column for column in varied if column != series]
        self.series_select = w.Dropdown(description="series", options=varied, value=series)
        self.x_select = w.Dropdown(description="x axis", options=[("(none: bars)", NONE), *[(c, c) for c in varied]], value=others[0] if others else NONE)
        self.chart = w.Image(format="png")
        self.summary, self.failures = w.HTML(), w.HTML()
        self.widget = w.VBox([w.HBox([self.series_select, self.x_select]), self.chart, self.summary, self.failures, self.status])
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
        self.figure = comparison_figure(self.results, series=series, x=x, metrics=self.metrics)
        self.chart.value = figure_png(self.figure)
        self.summary.value = h.page(h.heading(f"median over ok seeds, by {', '.join(by)}"), _frame_html(self.summary_frame))
        failed = failed_cells(self.results)
        self.failures.value = h.page(h.heading(f"failed cells: {len(failed)}"), _frame_html(failed, empty="every cell ran"))
        self._say("")


def _frame_html(frame: "pandas.DataFrame", *, empty: str = "no rows") -> str:
    rows = [[h.esc(_fmt(value)) for value in row] for row in frame.itertuples(index=False)]
    return h.table([str(column) for column in frame.columns], rows, empty=empty)


def _fmt(value: Any) -> Any:
    import pandas as pd

    if value is None or (not isinstance(value, (list, tuple, dict)) and pd.isna(value)):
        return None
    if isinstance(value, float):
        return f"{value:.6g}"
    return value
