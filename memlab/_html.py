"""Small HTML tables for Jupyter (``_repr_html_`` of the result models); every value is HTML-escaped.

No pandas, no templates: :func:`field_table` renders field / value rows (one object),
:func:`row_table` a list of rows under column headers. Long text and long id lists
are shortened (the full values stay on the object).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["cell", "field_table", "model_table", "row_table", "shorten"]

MAX_TEXT = 300
MAX_ITEMS = 5
_TABLE = '<table class="memlab-table" style="border-collapse:collapse">'
_TD = '<td style="text-align:left;vertical-align:top;white-space:pre-wrap">'
_TH = '<th style="text-align:left;vertical-align:top">'


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` cut to ``limit`` characters, the last an ellipsis (unchanged when it fits); not escaped."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(value: Any) -> str:
    """``value`` as short plain text (lists: the first few items and a count; mappings: ``key: value`` pairs)."""
    if value is None:
        return "None"
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, Mapping):
        return shorten("; ".join(f"{key}: {_plain(item)}" for key, item in value.items())) if value else "{}"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        shown = ", ".join(_plain(item) for item in items[:MAX_ITEMS])
        more = f" … ({len(items)} in all)" if len(items) > MAX_ITEMS else ""
        return f"[{shown}{more}]"
    if isinstance(value, float):
        return f"{value:.6g}"
    return shorten(str(value))


def cell(value: Any) -> str:
    """One escaped table cell."""
    return f"{_TD}{html.escape(_plain(value))}</td>"


def _caption(title: str | None) -> str:
    return f"<caption style=\"text-align:left;font-weight:bold\">{html.escape(title)}</caption>" if title else ""


def field_table(fields: Iterable[tuple[str, Any]], *, title: str | None = None) -> str:
    """A two-column table, one ``field | value`` row per pair."""
    body = "".join(f"<tr>{_TH}{html.escape(str(name))}</th>{cell(value)}</tr>" for name, value in fields)
    return f"{_TABLE}{_caption(title)}<tbody>{body}</tbody></table>"


def row_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None) -> str:
    """A table with a header of ``columns`` and one row per sequence of values."""
    head = "".join(f"{_TH}{html.escape(str(name))}</th>" for name in columns)
    body = "".join("<tr>" + "".join(cell(value) for value in row) + "</tr>" for row in rows)
    return f"{_TABLE}{_caption(title)}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def model_table(model: Any, *, exclude: Iterable[str] = (), title: str | None = None) -> str:
    """A pydantic model's fields (in declaration order, ``exclude`` left out) as a :func:`field_table`."""
    skipped = set(exclude)
    fields = [(name, getattr(model, name)) for name in type(model).model_fields if name not in skipped]
    return field_table(fields, title=title if title is not None else type(model).__name__)
