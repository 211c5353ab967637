"""A self-contained HTML report: a title, notes, tables and charts inlined as PNG (no external files)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; }
.note { color: #555; }
"""


def write_report(
    path: str | Path,
    title: str,
    *,
    notes: Sequence[str] = (),
    tables: Sequence[tuple[str, "pandas.DataFrame"]] = (),
    images: Sequence[tuple[str, str]] = (),
    details: Sequence[tuple[str, "pandas.DataFrame"]] = (),
) -> Path:
    """Write the report to ``path`` (parent directories created) and return its resolved path.

    ``notes``: paragraphs (plain text, escaped); ``tables``: (heading, frame) shown open;
    ``images``: (caption, ``data:`` URI) e.g. from :func:`memlab.charts.figure_data_uri`;
    ``details``: (heading, frame) in collapsed ``<details>`` blocks. The file is written
    whole to a temporary name and renamed, so a reader never sees half a report.
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    parts += [f"<p class='note'>{html.escape(note)}</p>" for note in notes]
    for heading, frame in tables:
        parts.append(f"<h2>{html.escape(heading)}</h2>{_table(frame)}")
    for caption, uri in images:
        if not uri.startswith("data:image/"):
            raise ValueError(f"an image must be a data:image/ URI, got {uri[:30]!r}")
        parts.append(f"<figure><img src='{html.escape(uri, quote=True)}' alt='{html.escape(caption, quote=True)}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    for heading, frame in details:
        parts.append(f"<details><summary>{html.escape(heading)}</summary>{_table(frame)}</details>")
    parts.append("</body></html>\n")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(target.name + ".tmp")
    scratch.write_text("".join(parts), encoding="utf-8")
    scratch.replace(target)
    return target.resolve()


def _table(frame: Any) -> str:
    """``frame`` as an HTML table (values escaped by pandas), missing values as ``-``."""
    return str(frame.to_html(index=False, na_rep="-", float_format=lambda value: f"{value:,.2f}", border=0, escape=True))
