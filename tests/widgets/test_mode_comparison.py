"""ModeComparison and memlab.charts on result frames in the Grid's documented shape."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from matplotlib.container import ErrorbarContainer

from memlab import ValidationError, charts, plotly_charts
from memlab.widgets import FrameGrid, ModeComparison

MODES = ("concurrent", "sequential", "off")
METRICS = {"latency_p50_ms": "ms", "latency_p95_ms": "ms", "tokens_per_turn": "tokens", "hit_rate": "ratio", "turns": "count"}


def result_frame(latencies=(0, 50), seeds=(0, 1, 2), failed=True) -> pd.DataFrame:
    """A Grid.run() metric frame: cell, analysis.search_mode, llm_latency_ms, seed, workload, metric, value, unit, status, error, cached."""
    rows = []
    for cell, (mode, latency) in enumerate(itertools.product(MODES, latencies)):
        for seed in seeds:
            for index, (metric, unit) in enumerate(METRICS.items()):
                value = 100.0 * (MODES.index(mode) + 1) + latency + 10.0 * index + seed**2  # seeds 0, 1, 4: median is seed 1's
                rows.append({"cell": cell, "analysis.search_mode": mode, "llm_latency_ms": latency, "seed": seed, "workload": "modes",
                             "metric": metric, "value": value, "unit": unit, "status": "ok", "error": None, "cached": False})
    if failed:
        rows.append({"cell": len(MODES) * len(latencies), "analysis.search_mode": "broken", "llm_latency_ms": 0, "seed": 0, "workload": "modes",
                     "metric": None, "value": None, "unit": None, "status": "failed", "error": "LLMError: provider down", "cached": False})
    types = {"cell": "Int64", "llm_latency_ms": "Int64", "seed": "Int64", "workload": "string", "metric": "string", "value": "Float64",
             "unit": "string", "status": "string", "error": "string", "cached": "bool"}
    return pd.DataFrame(rows).astype(types)


def test_comparison_summary_is_the_median_over_ok_seeds() -> None:
    frame = result_frame()
    summary = charts.comparison_summary(frame, ["analysis.search_mode", "llm_latency_ms"])
    assert list(summary.columns) == ["analysis.search_mode", "llm_latency_ms", *METRICS]
    assert list(summary["analysis.search_mode"]) == ["concurrent", "concurrent", "sequential", "sequential", "off", "off"]
    expected = frame[frame.status == "ok"].groupby(["analysis.search_mode", "llm_latency_ms", "metric"])["value"].median()
    for row in summary.itertuples(index=False):
        for metric in METRICS:
            assert getattr(row, metric) == expected[(row[0], row[1], metric)]
    assert summary.loc[0, "hit_rate"] == 100.0 + 30.0 + 1.0 and str(summary["hit_rate"].dtype) == "Float64"
    by_mode = charts.comparison_summary(frame, ["analysis.search_mode"])
    assert list(by_mode["latency_p50_ms"]) == [127.0, 227.0, 327.0]  # over 100 + {0, 1, 4} and 150 + {0, 1, 4}
    assert "broken" not in set(by_mode["analysis.search_mode"])
    assert charts.comparison_summary(frame, []).shape == (1, len(METRICS))
    with pytest.raises(ValidationError, match="no_such_column"):
        charts.comparison_summary(frame, ["no_such_column"])


def test_failed_cells_and_vary_columns() -> None:
    frame = result_frame()
    assert charts.vary_columns(frame) == ["analysis.search_mode", "llm_latency_ms"]
    [failed] = charts.failed_cells(frame).to_dict("records")
    assert (failed["cell"], failed["analysis.search_mode"], failed["error"]) == (6, "broken", "LLMError: provider down")
    assert charts.failed_cells(result_frame(failed=False)).empty


def test_comparison_figure_bars_and_lines() -> None:
    frame = result_frame()
    bars = charts.comparison_figure(frame, series="analysis.search_mode")
    assert [ax.get_title() for ax in bars.axes] == ["latency (ms)", "tokens per turn (tokens)", "hit rate (ratio)"]
    assert [len(ax.patches) for ax in bars.axes] == [6, 3, 3]  # p50 + p95 per mode, then one bar per mode
    assert [round(patch.get_height(), 6) for patch in bars.axes[2].patches] == [157.0, 257.0, 357.0]
    assert [label.get_text() for label in bars.axes[0].get_xticklabels()] == list(MODES)
    lines = charts.comparison_figure(frame, series="analysis.search_mode", x="llm_latency_ms", metrics=("tokens_per_turn", "no_such_metric"))
    [tokens, missing] = lines.axes
    series_lines = [line for line in tokens.get_lines() if not line.get_label().startswith("_")]  # "_..." are error-bar caps
    assert [line.get_label() for line in series_lines] == list(MODES)
    assert list(series_lines[0].get_xdata()) == [0.0, 50.0] and list(series_lines[0].get_ydata()) == [121.0, 171.0]
    assert missing.texts[0].get_text() == "no data"
    assert charts.figure_png(lines).startswith(b"\x89PNG") and charts.figure_data_uri(lines).startswith("data:image/png;base64,")
    with pytest.raises(ValidationError):
        charts.comparison_figure(frame, series="analysis.search_mode", x="analysis.search_mode")


def _whiskers(ax) -> list[tuple[float, float]]:
    """``(low, high)`` of each vertical error bar drawn on ``ax`` (bars' yerr and errorbar() both draw LineCollections)."""
    from matplotlib.collections import LineCollection

    found = []
    for collection in ax.collections:
        if isinstance(collection, LineCollection):
            found.extend((float(segment[0][1]), float(segment[1][1])) for segment in collection.get_segments())
    return sorted(found)


def test_error_bars_show_the_spread_over_seeds_and_only_when_there_is_one() -> None:
    bars = charts.comparison_figure(result_frame(seeds=(0, 1, 2)), series="analysis.search_mode", metrics=("hit_rate",))
    assert _whiskers(bars.axes[0])[0] == (130.0, 184.0)  # concurrent: min over seeds and latencies (100+30+0) .. max (150+30+4)
    one_seed = result_frame(seeds=(0,))
    assert _whiskers(charts.comparison_figure(one_seed, series="analysis.search_mode", metrics=("hit_rate",)).axes[0]) == []
    lines = charts.comparison_figure(one_seed, series="analysis.search_mode", x="llm_latency_ms", metrics=("hit_rate",))
    assert _whiskers(lines.axes[0]) == []


def test_error_bars_show_an_interval_the_frame_carries_even_for_one_seed() -> None:
    frame = result_frame(seeds=(0,), failed=False)
    bounds = frame[frame["metric"] == "hit_rate"].copy()
    lo, hi = charts.interval_metrics("hit_rate")
    frame = pd.concat([frame, bounds.assign(metric=lo, value=bounds["value"] - 5), bounds.assign(metric=hi, value=bounds["value"] + 7)])
    bars = charts.comparison_figure(frame, series="analysis.search_mode", metrics=("hit_rate",))
    assert _whiskers(bars.axes[0]) == [(150.0 + 100 * i, 162.0 + 100 * i) for i in range(3)]  # medians over latencies 0, 50: 155 - 5 .. 155 + 7
    lines = charts.comparison_figure(frame, series="analysis.search_mode", x="llm_latency_ms", metrics=("hit_rate",))
    assert (125.0, 137.0) in _whiskers(lines.axes[0]) and len(_whiskers(lines.axes[0])) == 6  # 3 modes x 2 latencies
    assert "hit_rate_lo" in charts.comparison_summary(frame, ["analysis.search_mode"]).columns


def test_a_quality_summary_frame_becomes_a_result_frame_drawn_with_its_intervals() -> None:
    from memlab.frames import quality_frame

    def row(retriever: str, category: str, recall: float | None) -> dict:
        bounds = {"session_recall_at_5_lo": recall - 0.1, "session_recall_at_5_hi": recall + 0.05} if recall is not None else {}
        return {"kind": "quality", "dataset": "bench", "retriever": retriever, "category": category, "questions": 10,
                "session_recall_at_5": recall, **bounds, "mrr": None if recall is None else 0.5, "p50_ms": 1.0}

    summary = quality_frame([row("keyword", "all", 0.4), row("hybrid", "all", 0.8), row("keyword", "abstention", None)], (5,))
    long = charts.quality_results(summary)
    assert {"p50_ms", "questions", "mrr_lo"}.isdisjoint(long["metric"])  # only metrics with an interval, and only present values
    assert set(long["metric"]) == {"session_recall_at_5", "session_recall_at_5_lo", "session_recall_at_5_hi", "mrr"}
    assert list(long.columns) == ["dataset", "retriever", "category", "metric", "value", "unit", "status", "seed"]
    assert (long["status"] == "ok").all() and str(long["value"].dtype) == "Float64" and len(long) == 8
    overall = long[long["category"] == "all"]
    bars = charts.comparison_figure(overall, series="retriever", metrics=("session_recall_at_5", "mrr"))
    assert [bound for whisker in _whiskers(bars.axes[0]) for bound in whisker] == pytest.approx([0.3, 0.45, 0.7, 0.85])
    assert _whiskers(bars.axes[1]) == []  # mrr: no interval, one seed
    assert [tick.get_text() for tick in bars.axes[0].get_xticklabels()] == ["keyword", "hybrid"]
    with pytest.raises(ValidationError, match="'seed_set'"):
        charts.quality_results(summary, by=("retriever", "seed_set"))


def test_mode_comparison_renders_and_follows_its_dropdowns() -> None:
    frame = result_frame()
    view = ModeComparison(frame, interactive=False)
    assert (view.series_select.value, view.x_select.value) == ("analysis.search_mode", "llm_latency_ms")
    assert len(view.summary_frame) == 6 and len(view.figure.axes) == 3 and view.figure.axes[1].get_lines()
    assert "<td>concurrent</td><td>50</td><td>151</td>" in view.summary.value  # p50 of concurrent at 50 ms: 100 + 50 + 1
    assert "LLMError: provider down" in view.failures.value and "failed cells: 1" in view.failures.value
    view.x_select.value = ""
    assert len(view.summary_frame) == 3 and [len(ax.patches) for ax in view.figure.axes] == [6, 3, 3]
    assert "<td>off</td><td>327</td>" in view.summary.value
    view.series_select.value = "llm_latency_ms"
    assert list(view.summary_frame["llm_latency_ms"]) == [0, 50] and len(view.figure.axes[1].patches) == 2
    view.x_select.value = "analysis.search_mode"
    assert list(view.summary_frame.columns[:2]) == ["llm_latency_ms", "analysis.search_mode"]
    view.series_select.value = "analysis.search_mode"  # the x column becomes the series: x moves to the other vary column
    assert view.x_select.value == "llm_latency_ms"
    assert bytes(view.chart.value).startswith(b"\x89PNG")


def test_a_frame_without_vary_columns_compares_cells() -> None:
    frame = result_frame(failed=False).drop(columns=["analysis.search_mode", "llm_latency_ms"])
    view = ModeComparison(frame, interactive=False)
    assert view.series_select.value == "cell" and view.x_select.value == "" and len(view.summary_frame) == 6
    with pytest.raises(ValidationError, match="result frame"):
        ModeComparison(pd.DataFrame({"a": [1]}))


async def test_a_real_grid_frame(tmp_path) -> None:
    from memlab.experiments import Grid, ModesConversation
    from memlab.testing import fast_config

    grid = Grid(
        base=fast_config(tmp_path),
        vary={"analysis.search_mode": ["concurrent", "off"]},
        workload=ModesConversation(turns=4, documents=4),
        seeds=[0],
    )
    frame = await grid.run(progress=False)
    view = ModeComparison(frame, interactive=False)
    assert (view.series_select.value, view.x_select.value) == ("analysis.search_mode", "")
    ok = frame[frame["status"] == "ok"]
    summary = view.summary_frame.set_index("analysis.search_mode")
    for mode in ("concurrent", "off"):
        for metric in ("latency_p50_ms", "tokens_per_turn", "hit_rate", "analysis_calls"):
            [expected] = ok[(ok["analysis.search_mode"] == mode) & (ok["metric"] == metric)]["value"]
            assert summary.loc[mode, metric] == expected
    assert summary.loc["off", "analysis_calls"] == 0 and summary.loc["concurrent", "analysis_calls"] > 0
    assert list(view.summary_frame["analysis.search_mode"]) == ["concurrent", "off"]
    assert [len(ax.patches) for ax in view.figure.axes] == [4, 2, 2] and "every cell ran" in view.failures.value


def _errorbars(ax) -> int:
    return sum(isinstance(container, ErrorbarContainer) for container in ax.containers)


def test_error_bars_only_with_two_or_more_seeds() -> None:
    assert [charts.show_error_bars(seeds) for seeds in (0, 1, 2, 5)] == [False, False, True, True]
    for seeds, drawn in (((0,), False), ((0, 1), True)):
        frame = result_frame(seeds=seeds, failed=False)
        data = charts.comparison_data(frame, series="analysis.search_mode")
        assert {point.seeds for trace in data.traces for point in trace.points} == {len(seeds)}
        assert all(point.error_bar is drawn for trace in data.traces for point in trace.points)
        bars = charts.comparison_figure(frame, series="analysis.search_mode")
        assert [_errorbars(ax) for ax in bars.axes] == ([6, 3, 3] if drawn else [0, 0, 0])
        lines = charts.comparison_figure(frame, series="analysis.search_mode", x="llm_latency_ms")
        assert sum(len(ax.collections) for ax in lines.axes) == (12 if drawn else 0)  # one whisker collection per line
        plot = plotly_charts.comparison_plot(frame, series="analysis.search_mode")
        assert all((trace.error_y.array is not None) is drawn for trace in plot.data)
        hover = plotly_charts.comparison_plot(frame, series="analysis.search_mode", x="llm_latency_ms").data[0].customdata[0]
        assert hover[3] == str(len(seeds)) and ("one seed" in hover[2]) is not drawn


def coinciding() -> pd.DataFrame:
    """Every mode at hit rate 1.0 at every latency: the lines lie on top of each other."""
    frame = result_frame(seeds=(0,), failed=False)
    frame.loc[frame["metric"] == "hit_rate", "value"] = 1.0
    return frame


def test_lines_that_coincide_stay_distinguishable() -> None:
    frame = coinciding()
    fig = charts.comparison_figure(frame, series="analysis.search_mode", x="llm_latency_ms", metrics=("hit_rate",))
    [ax] = fig.axes
    lines = ax.get_lines()
    assert [list(line.get_ydata()) for line in lines] == [[1.0, 1.0]] * 3  # the same points...
    markers = [line.get_marker() for line in lines]
    sizes = [line.get_markersize() for line in lines]
    assert len(set(markers)) == 3 and sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 3  # ...drawn as nested markers
    assert [line.get_zorder() for line in lines] == sorted(line.get_zorder() for line in lines)  # biggest first, smaller on top
    assert len({line.get_color() for line in lines}) == 3 and ax.get_ylim()[1] == pytest.approx(1.05)
    plot = plotly_charts.comparison_plot(frame, series="analysis.search_mode", x="llm_latency_ms", metrics=("hit_rate",))
    symbols = [trace.marker.symbol for trace in plot.data]
    sizes = [trace.marker.size for trace in plot.data]
    assert len(set(symbols)) == 3 and sizes == sorted(sizes, reverse=True) and len(set(sizes)) == 3
    assert plot.layout.hovermode == "x unified"  # hovering lists every series at that x, coinciding ones included
    assert [trace.name for trace in plot.data] == list(MODES)


def test_hover_values_are_formatted_by_kind() -> None:
    frame = result_frame(failed=False)
    plot = plotly_charts.comparison_plot(frame, series="analysis.search_mode", x="llm_latency_ms", metrics=("latency_p50_ms", "turns"))
    latency, turns = plot.data[0], plot.data[3]
    assert (latency.name, turns.name) == ("concurrent", "concurrent")
    assert list(latency.customdata[0][:3]) == ["llm_latency_ms = 0", "101", "100 - 104"]  # ms: no decimals at 100+
    assert list(turns.customdata[1][1:3]) == ["191", "190 - 194"]  # unit "count": integers
    html = plotly_charts.figure_html(plot)
    assert "Plotly.newPlot" in html and "cdn.plot.ly/plotly" not in html


def test_the_interactive_comparison_is_a_plotly_figure_widget_with_a_grid_of_the_frame() -> None:
    from plotly.graph_objects import FigureWidget

    frame = result_frame()
    view = ModeComparison(frame)
    assert view.interactive and isinstance(view.chart, FigureWidget) and view.chart_box.children == (view.chart,)
    assert [trace.name for trace in view.figure.data][:3] == ["concurrent p50", "sequential p50", "off p50"]
    view.x_select.value = ""
    assert view.figure.layout.barmode == "group" and len(view.figure.data) == 12
    assert isinstance(view.grid, FrameGrid) and view.grid.widget.count == len(frame)
    view.grid.filter("metric", "=hit_rate")
    assert view.grid.widget.total == 18 and {row["metric"] for row in view.grid.page_rows} == {"hit_rate"}


def test_the_summary_formats_counts_as_integers_and_ratios_to_three_decimals() -> None:
    frame = result_frame(seeds=(0,), failed=False)
    frame.loc[frame["metric"] == "hit_rate", "value"] = 0.590032
    frame.loc[frame["metric"] == "turns", "value"] = 24.0
    view = ModeComparison(frame, interactive=False)
    view.x_select.value = ""
    assert "<td>0.590</td>" in view.summary.value and "<td>24</td>" in view.summary.value
    assert "24.00" not in view.summary.value and "0.590032" not in view.summary.value
    assert 'overflow-x:auto' in view.summary.value  # a wide summary scrolls inside its pane
