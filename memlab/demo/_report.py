"""A self-contained HTML report: a title, the machine it ran on, notes, tables, charts (no external files, nothing from a CDN).

Tables are formatted by kind (:func:`memlab.charts.format_value`: counts as integers,
ratios and ms to a sensible precision) and scroll sideways inside their own box when
they are wider than the page. Charts are plotly figures (interactive, plotly.js inlined
once from the installed package) or PNG ``data:`` URIs (static).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab._format import format_frame, format_value, kind_for_unit, value_kind

if TYPE_CHECKING:
    import pandas

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
.machine { border: 1px solid #ccd; background: #f6f7fb; padding: 0.5em 1em; margin: 0 0 1em 0; }
.machine table { margin: 0; }
.machine th, .machine td { border: 0; padding: 0.1em 1em 0.1em 0; text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; margin: 1em 0; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; }
th:first-child, td:first-child { text-align: left; }
.scroll th:first-child, .scroll td:first-child { position: sticky; left: 0; background: #fff; }
.scroll thead th:first-child { background: #f4f4f4; }
.machine th { background: none; }
td.text { text-align: left; }
img { max-width: 100%; }
figure { margin: 1em 0; }
.note { color: #555; }
"""


def write_report(
    path: str | Path,
    title: str,
    *,
    context: Sequence[tuple[str, str]] = (),
    notes: Sequence[str] = (),
    tables: Sequence[tuple[str, "pandas.DataFrame"]] = (),
    plots: Sequence[tuple[str, Any]] = (),
    images: Sequence[tuple[str, str]] = (),
    details: Sequence[tuple[str, "pandas.DataFrame"]] = (),
    units: Mapping[str, str] | None = None,
) -> Path:
    """Write the report to ``path`` (parent directories created) and return its resolved path.

    ``context``: (label, value) pairs shown first, in a box (the machine: CPUs, load,
    embedder); ``notes``: paragraphs (plain text, escaped); ``tables``: (heading, frame)
    shown open; ``plots``: (caption, plotly figure), interactive; ``images``: (caption,
    ``data:`` URI) e.g. from :func:`memlab.charts.figure_data_uri`; ``details``: (heading,
    frame) in collapsed ``<details>`` blocks. ``units``: column (metric) -> unit, for the
    kind of each column (a frame with ``value`` and ``unit`` columns formats each value
    by its own row's unit). The file is written whole to a temporary name and renamed,
    so a reader never sees half a report.
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    if context:
        rows = "".join(f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>" for label, value in context)
        parts.append(f"<section class='machine' id='machine'><table>{rows}</table></section>")
    parts += [f"<p class='note'>{html.escape(note)}</p>" for note in notes]
    for heading, frame in tables:
        parts.append(f"<h2>{html.escape(heading)}</h2>{_table(frame, units or {})}")
    for index, (caption, figure) in enumerate(plots):
        from memlab.plotly_charts import figure_html

        parts.append(f"<figure class='plot'>{figure_html(figure, include_plotlyjs=index == 0)}"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    for caption, uri in images:
        if not uri.startswith("data:image/"):
            raise ValueError(f"an image must be a data:image/ URI, got {uri[:30]!r}")
        parts.append(f"<figure><img src='{html.escape(uri, quote=True)}' alt='{html.escape(caption, quote=True)}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    for heading, frame in details:
        parts.append(f"<details><summary>{html.escape(heading)}</summary>{_table(frame, units or {})}</details>")
    parts.append("</body></html>\n")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(target.name + ".tmp")
    scratch.write_text("".join(parts), encoding="utf-8")
    scratch.replace(target)
    return target.resolve()


def _table(frame: Any, units: Mapping[str, str]) -> str:
    """``frame`` as an HTML table in a box that scrolls sideways: cells formatted by kind and escaped, missing values as ``-``."""
    kinds = {str(column): value_kind(str(column), unit=units[str(column)]) for column in frame.columns if str(column) in units}
    shown = format_frame(frame, kinds, missing="-")
    if "value" in frame.columns and "unit" in frame.columns:  # a long metric frame: each value by its own unit
        shown["value"] = [format_value(value, kind_for_unit(unit) or "number", missing="-")
                          for value, unit in zip(frame["value"].tolist(), frame["unit"].tolist())]
    text = {str(column) for column in frame.columns if value_kind(str(column), dtype=frame[column].dtype) == "text" and str(column) not in kinds}
    head = "".join(f"<th>{html.escape(str(column))}</th>" for column in shown.columns)
    body = "".join(
        "<tr>" + "".join(f"<td class='text'>{html.escape(cell)}</td>" if str(column) in text else f"<td>{html.escape(cell)}</td>"
                         for column, cell in zip(shown.columns, row)) + "</tr>"
        for row in shown.itertuples(index=False)
    )
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
