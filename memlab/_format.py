"""Numbers as people read them: one formatting rule per kind of value, used by every table and chart of memlab.

:func:`format_value` is the one function that turns a value into text for the explorers,
the data grid, the chart hover labels, the ``memlab demo`` report and its printed table;
:func:`value_kind` picks the kind of a column from its unit (a Grid frame's ``unit``),
its name or its dtype. Kinds (:data:`KINDS`):

========  =====================================================  ==================
kind      rule                                                   examples
========  =====================================================  ==================
count     an integer with thousands separators (a median of      ``24``, ``1,234``,
          counts over an even number of seeds keeps one          ``23.5``
          decimal rather than hide the half)
ratio     three decimals                                         ``0.590``, ``1.000``
ms        three significant digits, never fewer than the         ``320``, ``45.7``,
(s, us,   integer part: >= 100 no decimals, >= 10 one, >= 1      ``7.50``, ``0.421``
number)   two, below 1 three; an integral value has none
usd       a dollar sign; two decimals from $1, six below         ``$1.23``, ``$0.000150``
bool      yes / no                                               ``yes``
datetime  ``YYYY-MM-DD HH:MM:SS`` (the timestamp's own zone)     ``2026-12-01 15:53:21``
text      the value as text                                      ``concurrent``
========  =====================================================  ==================

A missing value (None, NA, NaN, NaT) is ``missing`` (a dash by default). Pure Python:
pandas is only touched when the value is a pandas scalar.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

__all__ = ["KINDS", "MISSING", "format_frame", "format_value", "frame_kinds", "kind_for_unit", "value_kind"]

KINDS = ("count", "ratio", "ms", "s", "us", "number", "usd", "bool", "datetime", "text")
MISSING = "—"
#: units (a Grid frame's ``unit`` column) whose values are counted things
COUNT_UNITS = frozenset({"count", "turns", "calls", "tokens", "entries", "questions", "conversations", "runs", "rows", "sessions", "documents"})
_UNIT_KINDS = {"ms": "ms", "s": "s", "us": "us", "µs": "us", "ratio": "ratio", "usd": "usd", "$": "usd"}
_DURATIONS = frozenset({"ms", "s", "us", "number"})
#: name suffixes (and whole names) that say a column's kind when no unit does
_NAME_KINDS = (("_ms", "ms"), ("_s", "s"), ("_us", "us"), ("_usd", "usd"), ("_rate", "ratio"), ("_ratio", "ratio"), ("_share", "ratio"))
_RATIO_NAMES = ("mrr", "recall@", "hit@", "precision@", "ndcg@", "recall", "precision")


def kind_for_unit(unit: Any) -> str | None:
    """The kind of a metric measured in ``unit`` (``"ms"`` -> ms, ``"turns"`` -> count, ``"ratio"`` -> ratio); None when the unit says nothing."""
    if unit is None or _missing(unit):
        return None
    text = str(unit).strip()
    if text in _UNIT_KINDS:
        return _UNIT_KINDS[text]
    if text in COUNT_UNITS:
        return "count"
    return "number" if text else None


def value_kind(name: str, *, dtype: Any = None, unit: Any = None) -> str:
    """The kind of column ``name``: from its ``unit`` when given, else its name (``*_ms``, ``cost_usd``, ``hit_rate``), else its dtype."""
    by_unit = kind_for_unit(unit)
    if by_unit is not None:
        return by_unit
    lowered = name.lower()
    for suffix, kind in _NAME_KINDS:
        if lowered.endswith(suffix) or lowered == suffix.lstrip("_"):
            return kind
    if lowered.startswith(_RATIO_NAMES):
        return "ratio"
    if dtype is not None:
        text = str(dtype).lower()
        if text in ("bool", "boolean"):
            return "bool"
        if text.startswith(("int", "uint")):
            return "count"
        if text.startswith("float"):
            return "number"
        if text.startswith("datetime"):
            return "datetime"
    return "text"


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (str, bool, int, list, tuple, dict, set)):
        return False
    try:  # pandas NA / NaT, numpy nan
        import pandas as pd

        return bool(pd.isna(value))
    except (ImportError, TypeError, ValueError):
        return False


def _digits(value: float) -> str:
    """Three significant digits, never fewer than the integer part (the ms / s / number rule)."""
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value):,}"
    size = abs(value)
    decimals = 0 if size >= 100 else 1 if size >= 10 else 2 if size >= 1 else 3
    return f"{value:,.{decimals}f}"


def format_value(value: Any, kind: str, *, missing: str = MISSING) -> str:
    """``value`` as text by ``kind`` (see the module docstring for each rule); ``missing`` for None / NA / NaN."""
    if _missing(value):
        return missing
    if kind == "text":
        return str(value)
    if kind == "bool":
        return "yes" if bool(value) else "no"
    if kind == "datetime":
        if isinstance(value, (_dt.datetime, _dt.date)):
            return value.strftime("%Y-%m-%d %H:%M:%S")
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if kind == "count":
        if number == int(number):
            return f"{int(number):,}"
        return f"{number:,.1f}"
    if kind == "ratio":
        return f"{number:.3f}"
    if kind == "usd":
        return f"${number:,.2f}" if abs(number) >= 1 else f"${number:.6f}"
    if kind in _DURATIONS:
        return _digits(number)
    raise ValueError(f"unknown value kind {kind!r}; kinds: {', '.join(KINDS)}")


def frame_kinds(frame: "pandas.DataFrame", units: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Column -> kind for every column of ``frame`` (``units``: column -> unit, e.g. a Grid frame's metric units)."""
    units = units or {}
    return {str(column): value_kind(str(column), dtype=frame[column].dtype, unit=units.get(str(column))) for column in frame.columns}


def format_frame(frame: "pandas.DataFrame", kinds: Mapping[str, str] | None = None, *, missing: str = MISSING) -> "pandas.DataFrame":
    """``frame`` with every cell as text by its column's kind (``kinds`` wins over :func:`frame_kinds`); same columns and order."""
    import pandas as pd

    chosen = {**frame_kinds(frame), **(kinds or {})}
    return pd.DataFrame(
        {column: [format_value(value, chosen[str(column)], missing=missing) for value in frame[column].tolist()] for column in frame.columns},
        columns=list(frame.columns),
        index=frame.index,
    )
