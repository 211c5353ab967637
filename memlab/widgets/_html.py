"""Small HTML builders for the explorers' ``ipywidgets.HTML`` panes (every value escaped here).

Unlike :mod:`memlab._html` (the models' ``_repr_html_``: plain values escaped per cell,
inline styles, None as "None") these tables take already-rendered cells under one
stylesheet (:func:`page`) and show None as a dash; both shorten text with
:func:`memlab._html.shorten`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memlab._html import shorten

STYLE = (
    "<style>"
    ".memlab-table{border-collapse:collapse;margin:2px 0 8px 0;font-size:12px}"
    ".memlab-table th,.memlab-table td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}"
    ".memlab-table th{background:#f4f4f4}"
    ".memlab-note{color:#666;font-style:italic}"
    "</style>"
)
MISSING = "—"


def esc(value: Any) -> str:
    """``value`` as escaped text; None as a dash."""
    return MISSING if value is None else html.escape(str(value))


def ident(value: Any, width: int = 8) -> str:
    """An id shortened to ``width`` characters, the full id in the element's title (and so in the markup)."""
    if value is None:
        return MISSING
    text = str(value)
    shown = text if len(text) <= width else text[:width] + "…"
    return f'<code title="{html.escape(text)}">{html.escape(shown)}</code>'


def snippet(text: Any, limit: int = 90) -> str:
    """Escaped ``text``, cut to ``limit`` characters with an ellipsis."""
    return MISSING if text is None else esc(shorten(str(text), limit))


def note(text: str) -> str:
    return f'<p class="memlab-note">{esc(text)}</p>'


def heading(text: str) -> str:
    return f"<h4 style='margin:6px 0 2px 0'>{esc(text)}</h4>"


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, empty: str = "nothing to show") -> str:
    """A table of already-rendered cells (escape with :func:`esc` first); ``empty`` when there are no rows."""
    body = ["<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows]
    if not body:
        return note(empty)
    head = "<tr>" + "".join(f"<th>{esc(column)}</th>" for column in columns) + "</tr>"
    return f'<table class="memlab-table">{head}{"".join(body)}</table>'


def pairs(items: Iterable[tuple[str, str]]) -> str:
    """A two-column table: escaped labels, rendered values."""
    rows = "".join(f"<tr><th>{esc(label)}</th><td>{value}</td></tr>" for label, value in items)
    return f'<table class="memlab-table">{rows}</table>'


def value(obj: Any) -> str:
    """Any JSON-like value as HTML: dicts as label/value tables, lists of dicts as tables, the rest as text."""
    if isinstance(obj, Mapping):
        if not obj:
            return MISSING
        return pairs((str(key), value(item)) for key, item in obj.items())
    if isinstance(obj, (list, tuple)):
        if not obj:
            return '<span class="memlab-note">none</span>'
        if all(isinstance(item, Mapping) for item in obj):
            columns = list(dict.fromkeys(key for item in obj for key in item))
            return table(columns, [[value(item.get(column)) for column in columns] for item in obj])
        return ", ".join(value(item) for item in obj)
    return esc(obj)


def page(*parts: str) -> str:
    """The HTML of one pane: the shared style, then ``parts``."""
    return STYLE + "".join(parts)
