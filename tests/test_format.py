"""memlab's one number-formatting rule (memlab.charts.format_value): counts as integers, ratios and timings to a sensible precision."""

from __future__ import annotations

import datetime as dt
import math

import pandas as pd
import pytest

from memlab.charts import format_value, value_kind
from memlab._format import format_frame, frame_kinds, kind_for_unit


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        (24.0, "count", "24"),
        (1234, "count", "1,234"),
        (23.5, "count", "23.5"),  # a median over an even number of seeds: the half is kept
        (0.590032, "ratio", "0.590"),
        (1.0, "ratio", "1.000"),
        (320.4, "ms", "320"),
        (1234.56, "ms", "1,235"),
        (45.67, "ms", "45.7"),
        (7.5, "s", "7.50"),
        (0.4213, "ms", "0.421"),
        (250.0, "ms", "250"),
        (0.00015, "usd", "$0.000150"),
        (12.345, "usd", "$12.35"),
        (753.4, "number", "753"),
        (True, "bool", "yes"),
        (False, "bool", "no"),
        (dt.datetime(2026, 12, 1, 15, 53, 21, 123456, tzinfo=dt.timezone.utc), "datetime", "2026-12-01 15:53:21"),
        ("concurrent", "text", "concurrent"),
    ],
)
def test_each_kind_has_one_rule(value, kind, text) -> None:
    assert format_value(value, kind) == text


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA, pd.NaT, math.nan])
def test_missing_values_are_a_dash_or_what_the_caller_asks(missing) -> None:
    assert format_value(missing, "ms") == "—" and format_value(missing, "count", missing="") == ""


def test_an_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown value kind 'furlongs'"):
        format_value(1.0, "furlongs")


def test_the_kind_comes_from_the_unit_then_the_name_then_the_dtype() -> None:
    assert [kind_for_unit(unit) for unit in ("ms", "s", "ratio", "turns", "tokens", "calls", "tokens/turn", "ops/s", None, "")] == [
        "ms", "s", "ratio", "count", "count", "count", "number", "number", None, None]
    assert value_kind("latency_p50_ms") == "ms" and value_kind("wall_s") == "s" and value_kind("cost_usd") == "usd"
    assert value_kind("hit_rate") == "ratio" and value_kind("recall@5") == "ratio" and value_kind("mrr") == "ratio"
    assert value_kind("hit_rate", unit="turns") == "count"  # a unit wins over the name
    assert value_kind("turns", dtype="Int64") == "count" and value_kind("score", dtype="Float64") == "number"
    assert value_kind("answered", dtype="boolean") == "bool" and value_kind("time", dtype="datetime64[us, UTC]") == "datetime"
    assert value_kind("status", dtype="string") == "text"


def test_a_frame_is_formatted_column_by_column() -> None:
    frame = pd.DataFrame({"mode": ["off", "concurrent"], "turns": pd.array([24, None], dtype="Int64"),
                          "latency_p50_ms": [266.2, 320.9], "hit_rate": [0.79, 1.0]})
    assert frame_kinds(frame) == {"mode": "text", "turns": "count", "latency_p50_ms": "ms", "hit_rate": "ratio"}
    shown = format_frame(frame)
    assert shown.to_dict("list") == {"mode": ["off", "concurrent"], "turns": ["24", "—"], "latency_p50_ms": ["266", "321"],
                                     "hit_rate": ["0.790", "1.000"]}
    assert format_frame(frame, {"turns": "text"}, missing="-")["turns"].tolist() == ["24", "-"]
