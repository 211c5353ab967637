"""FrameGrid: a data grid over a DataFrame (turns, sessions, usage, a Grid's results) with paging, sorting and filtering.

**Why an anywidget grid that pages on the Python side.** The grid is an `anywidget
<https://anywidget.dev>`_ (a maintained, dependency-light way to ship a Jupyter widget:
its front end is one ES module, ``static/grid.js``, shipped inside memlab, so it works
offline, in the front ends anywidget supports: JupyterLab, Notebook 7, VS Code, Voilà).
The frame stays in the kernel: filtering, sorting and paging run in pandas there, and
only the page on screen (25 rows by default) is formatted and sent to the browser. The alternatives send the whole
frame to the browser first: itables (DataTables) formats every cell through pandas
before the first row shows (measured on this machine: 0.52 s of Python for 10,000 turns,
then 1.6 MB of JSON for the browser to parse), and ipydatagrid serialises the whole
frame too, draws on a canvas (no DOM for a test or a screen reader to read) and
renders nothing in an exported page. Paging in the kernel keeps the first page's cost
independent of the frame's size. Measured on a 10,000-turn session (``scripts/bench_grid.py``,
2 CPUs at load average 2.4, medians of 5; :data:`FIRST_PAGE_MS`): ``SessionExplorer.refresh()``
reads the session and builds the grid in 207 ms, of which the grid's first page (the
turns as a frame, then page one formatted) is 41 ms; Chromium draws that page from the
widget's state in 184 ms (the page and its module loaded); a sort, a filter or a search
recomputes a page in 2 to 7 ms in the kernel, and a header click comes back redrawn in
132 ms. The first page is on screen well under 1 s. Exported without widget state (a
notebook saved without it, GitHub's viewer), the grid shows the page on screen as a
static HTML table (:meth:`FrameGrid.to_html`, in its mime bundle).
The state a person changes (page, page size, sort, filters, search, selection) is a
synced trait of :attr:`FrameGrid.widget`, so code and tests drive the grid exactly
as a click does, and observers see every change.

Filtering, per column (``filters`` trait, or :meth:`FrameGrid.filter`):

* numeric columns (counts, ratios, ms, ...): ``>10``, ``>=10``, ``<5``, ``<=5``, ``=3``,
  ``!=3``, a bare number (equal), or a range ``1..9`` (inclusive);
* ``yes`` / ``no`` columns: ``yes`` or ``no``;
* every other column: a case-insensitive substring of its text (``=text``: the whole text).

``search`` is a case-insensitive substring over every text column. A filter that
cannot be read is ignored and named in ``message``. Sorting is by one column, on the
values (numbers as numbers, missing values last), stable. Cells are formatted by kind
(:func:`memlab.charts.format_value`); list columns (lanes, guidance ids) show their
length and dict columns the number of ids they hold.
"""

from __future__ import annotations

import functools
import math
import pathlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlab._format import MISSING, format_value, frame_kinds
from memlab._html import shorten
from memlab.exceptions import ValidationError
from memlab.widgets import _html as h
from memlab.widgets._base import require_ipywidgets

if TYPE_CHECKING:
    import pandas

__all__ = ["FIRST_PAGE_MS", "FrameGrid", "NUMERIC_KINDS"]

#: the first page of a 10,000-turn session's turns grid, ms, measured by ``scripts/bench_grid.py`` (2 CPUs, load 2.4):
#: ``load`` SessionExplorer.refresh() (read the session, build the grid), ``kernel`` the grid's part of it (the turns
#: as a frame, page one formatted), ``browser`` headless Chromium drawing page one from the widget's state
FIRST_PAGE_MS = {"load": 207.0, "kernel": 41.0, "browser": 184.0}
NUMERIC_KINDS = frozenset({"count", "ratio", "ms", "s", "us", "number", "usd"})
#: the longest text a cell shows (the full value is in the frame, and in the cell's tooltip up to this length)
CELL_TEXT = 120
_STATIC = pathlib.Path(__file__).parent / "static"
_COMPARISON = re.compile(r"^\s*(>=|<=|!=|>|<|=)?\s*([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)\s*$")
_RANGE = re.compile(r"^\s*([-+]?[\d,]*\.?\d+)\s*\.\.\s*([-+]?[\d,]*\.?\d+)\s*$")
_QUERY_TRAITS = ("page", "page_size", "sort_by", "descending", "filters", "search")


@functools.cache
def _view_class() -> type:
    """The anywidget class of the grid (anywidget imported here, on first use)."""
    require_ipywidgets()
    try:
        import anywidget
        import traitlets
    except ImportError as exc:
        raise ImportError("memlab's FrameGrid needs anywidget: pip install 'memlab[widgets]'") from exc

    class GridView(anywidget.AnyWidget):
        _esm = _STATIC / "grid.js"
        _css = _STATIC / "grid.css"
        columns = traitlets.List(traitlets.Dict()).tag(sync=True)
        rows = traitlets.List(traitlets.List(traitlets.Unicode())).tag(sync=True)
        row_keys = traitlets.List(traitlets.Unicode()).tag(sync=True)
        total = traitlets.Int(0).tag(sync=True)
        count = traitlets.Int(0).tag(sync=True)
        page = traitlets.Int(0).tag(sync=True)
        page_size = traitlets.Int(25).tag(sync=True)
        sort_by = traitlets.Unicode("").tag(sync=True)
        descending = traitlets.Bool(False).tag(sync=True)
        filters = traitlets.Dict(value_trait=traitlets.Unicode()).tag(sync=True)
        search = traitlets.Unicode("").tag(sync=True)
        selected = traitlets.Unicode("").tag(sync=True)
        message = traitlets.Unicode("").tag(sync=True)
        title = traitlets.Unicode("").tag(sync=True)

    GridView.__name__ = GridView.__qualname__ = "GridView"
    return GridView


def _cell_count(value: Any) -> Any:
    """A list cell as its length, a dict of id lists as the number of ids, None as None."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return sum(len(item) if isinstance(item, (list, tuple)) else 1 for item in value.values())
    if isinstance(value, (list, tuple, set)) or hasattr(value, "__len__") and not isinstance(value, str):
        return len(value)
    return value


def _normalized(frame: "pandas.DataFrame", columns: Sequence[str] | None) -> "pandas.DataFrame":
    """The frame the grid shows: ``columns`` (all by default), list / dict columns as counts, a fresh 0..n-1 index."""
    import pandas as pd

    if columns is not None:
        unknown = [column for column in columns if column not in frame.columns]
        if unknown:
            raise ValidationError(f"no column {unknown[0]!r} in the frame; columns: {list(frame.columns)}")
        frame = frame[list(columns)]
    shown = frame.reset_index(drop=True).copy()
    for column in shown.columns:
        if shown[column].dtype == object:
            sample = next((value for value in shown[column].tolist() if value is not None and not isinstance(value, str)), None)
            if isinstance(sample, (list, tuple, set, Mapping)) or (sample is not None and hasattr(sample, "__len__")):
                shown[column] = pd.array([_cell_count(value) for value in shown[column].tolist()], dtype="Int64")
    return shown


class FrameGrid:
    """A paged, sortable, filterable grid of ``frame`` (see the module docstring); displays as its ``widget``.

    ``key``: the column whose value names a row (``selected`` holds it as text; default:
    the row's position in ``frame``); ``kinds``: column -> kind (:func:`memlab.charts.format_value`)
    where the inferred one (:func:`memlab.charts.value_kind`) is wrong; ``columns``: the
    columns shown, in order (all by default; ``key`` need not be one of them);
    ``page_size``: rows per page; ``title``: a line above the grid.

    State (traits of ``widget``, synced with the browser): ``page`` (0-based),
    ``page_size``, ``sort_by`` (a column, ``""`` unsorted), ``descending``, ``filters``
    (column -> text), ``search``, ``selected`` (a row's key, ``""`` none); read-only:
    ``rows`` (the page's cells as text), ``row_keys`` (their keys), ``total`` (rows passing
    the filters), ``count`` (all rows), ``message`` (a filter that could not be read).
    The methods below set the same traits. :meth:`on_select` registers a callback for
    selections, whether a click or code made them.
    """

    def __init__(
        self,
        frame: "pandas.DataFrame",
        *,
        key: str | None = None,
        kinds: Mapping[str, str] | None = None,
        columns: Sequence[str] | None = None,
        page_size: int = 25,
        title: str = "",
    ) -> None:
        if not hasattr(frame, "columns"):
            raise ValidationError(f"FrameGrid takes a pandas DataFrame, got {type(frame).__name__}")
        if key is not None and key not in frame.columns:
            raise ValidationError(f"no key column {key!r} in the frame; columns: {list(frame.columns)}")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValidationError(f"page_size must be an integer >= 1, got {page_size!r}")
        self._callbacks: list[Callable[[str | None, dict[str, Any] | None], None]] = []
        self._busy = False
        self._kind_overrides = dict(kinds or {})
        self._columns = list(columns) if columns is not None else None
        self.widget = _view_class()(page_size=page_size, title=title)
        self._key = key
        self._load(frame)
        self.widget.observe(self._query_changed, names=list(_QUERY_TRAITS))
        self.widget.observe(self._selection_changed, names=["selected"])

    # -- data ---------------------------------------------------------------------------------

    def _load(self, frame: "pandas.DataFrame") -> None:
        self.frame = frame.reset_index(drop=True)
        self.shown = _normalized(self.frame, self._columns)
        self.kinds = {**frame_kinds(self.shown), **{k: v for k, v in self._kind_overrides.items() if k in self.shown.columns}}
        keys = self.frame[self._key].astype("string").fillna("") if self._key is not None else None
        self._keys: list[str] = keys.tolist() if keys is not None else [str(index) for index in range(len(self.frame))]
        self._position = {key: index for index, key in enumerate(self._keys)}
        self._sort_keys: dict[str, Any] = {}
        self._lower: dict[str, Any] = {}
        self.widget.columns = [{"name": str(column), "kind": self.kinds[str(column)], "numeric": self.kinds[str(column)] in NUMERIC_KINDS}
                               for column in self.shown.columns]
        self.widget.count = len(self.shown)
        self._refresh()

    def update(self, frame: "pandas.DataFrame") -> None:
        """Show ``frame`` instead, keeping the sort, filters, search and (when its key is still there) the selection."""
        self._load(frame)
        if self.widget.selected and self.widget.selected not in self._position:
            self.widget.selected = ""

    # -- the query: filters and search, then the sort, then the page --------------------------------

    def _text(self, column: str) -> Any:
        """``column`` as lower-case text (cached: search and filters read it on every keystroke)."""
        found = self._lower.get(column)
        if found is None:
            series = self.shown[column]
            if self.kinds[column] == "datetime":
                text = series.map(lambda value: format_value(value, "datetime", missing=""))
            else:
                text = series.astype("string").fillna("")
            found = self._lower[column] = text.astype("string").str.lower()
        return found

    def _numbers(self, column: str) -> Any:
        import pandas as pd

        return pd.to_numeric(self.shown[column], errors="coerce").astype("Float64")

    def _column_mask(self, column: str, text: str) -> Any:
        """The rows ``text`` keeps in ``column``; ValueError naming what a filter of this column accepts."""
        kind = self.kinds[column]
        query = text.strip()
        if kind in NUMERIC_KINDS:
            values = self._numbers(column)
            found = _RANGE.match(query)
            if found:
                low, high = sorted(float(part.replace(",", "")) for part in found.groups())
                return ((values >= low) & (values <= high)).fillna(False)
            found = _COMPARISON.match(query)
            if not found:
                raise ValueError(f"{column}: use a number, >n, >=n, <n, <=n, =n, !=n or a range a..b")
            op, number = found.group(1) or "=", float(found.group(2).replace(",", ""))
            tests = {">": values > number, ">=": values >= number, "<": values < number, "<=": values <= number,
                     "=": values == number, "!=": values != number}
            return tests[op].fillna(op == "!=")
        if kind == "bool":
            wanted = {"yes": True, "true": True, "no": False, "false": False}.get(query.lower())
            if wanted is None:
                raise ValueError(f"{column}: use yes or no")
            return (self.shown[column].astype("boolean") == wanted).fillna(False)
        lowered = self._text(column)
        if query.startswith("="):
            return lowered == query[1:].strip().lower()
        return lowered.str.contains(query.lower(), regex=False)

    def _mask(self) -> tuple[Any, list[str]]:
        import pandas as pd

        mask = pd.Series(True, index=self.shown.index)
        problems = []
        for column, text in (self.widget.filters or {}).items():
            if not str(text).strip():
                continue
            if column not in self.kinds:
                problems.append(f"no column {column!r} to filter")
                continue
            try:
                mask &= self._column_mask(column, str(text))
            except ValueError as exc:
                problems.append(str(exc))
        search = self.widget.search.strip().lower()
        if search:
            text_columns = [column for column, kind in self.kinds.items() if kind in ("text", "datetime")]
            hits = pd.Series(False, index=self.shown.index)
            for column in text_columns:
                hits |= self._text(column).str.contains(search, regex=False).fillna(False)
            mask &= hits
        return mask.astype(bool), problems

    def _sort_key(self, column: str) -> Any:
        found = self._sort_keys.get(column)
        if found is None:
            kind = self.kinds[column]
            if kind in NUMERIC_KINDS:
                found = self._numbers(column)
            elif kind == "text":
                found = self._text(column)
            else:
                found = self.shown[column]
            self._sort_keys[column] = found
        return found

    def _query(self) -> tuple[list[int], list[str]]:
        """The positions passing the filters and search, in sort order, and the filters that could not be read."""
        mask, problems = self._mask()
        by = self.widget.sort_by if self.widget.sort_by in self.kinds else ""
        if not by and bool(mask.all()):
            return list(range(len(self.shown))), problems
        kept = mask[mask].index
        if by:
            keys = self._sort_key(by).loc[kept]
            kept = keys.sort_values(ascending=not self.widget.descending, kind="stable", na_position="last").index
        return [int(position) for position in kept], problems

    def positions(self) -> list[int]:
        """The positions (in ``frame``) of the rows passing the filters and search, in the grid's sort order: every page."""
        return self._query()[0]

    def view_frame(self) -> "pandas.DataFrame":
        """The rows of ``frame`` the grid currently lets through, in its order (all pages, every column of ``frame``)."""
        return self.frame.iloc[self.positions()]

    def _refresh(self) -> None:
        """Recompute the page from the query traits and send it (the page's cells only)."""
        view = self.widget
        positions, problems = self._query()
        total = len(positions)
        size = max(1, view.page_size)
        pages = max(1, math.ceil(total / size))
        page = min(max(0, view.page), pages - 1)
        chosen = positions[page * size : (page + 1) * size]
        rows = self._cells(chosen)
        self._busy = True
        try:
            with view.hold_sync():
                view.page_size = size
                view.page = page
                view.total = total
                view.message = "; ".join(problems)
                view.row_keys = [self._keys[position] for position in chosen]
                view.rows = rows
        finally:
            self._busy = False

    def _set(self, **values: Any) -> None:
        """Set query traits together, then recompute the page once."""
        self._busy = True
        try:
            with self.widget.hold_sync():
                for name, value in values.items():
                    setattr(self.widget, name, value)
        finally:
            self._busy = False
        self._refresh()

    def _cells(self, positions: Sequence[int]) -> list[list[str]]:
        block = self.shown.iloc[list(positions)]
        out = []
        for row in block.itertuples(index=False, name=None):
            cells = []
            for column, value in zip(self.shown.columns, row):
                text = format_value(value, self.kinds[str(column)], missing="")
                cells.append(shorten(text, CELL_TEXT) if len(text) > CELL_TEXT else text)
            out.append(cells)
        return out

    def _query_changed(self, change: dict[str, Any]) -> None:
        if not self._busy:
            self._refresh()

    # -- selection --------------------------------------------------------------------------------

    def _selection_changed(self, change: dict[str, Any]) -> None:
        key = change["new"] or None
        row = self.row(key) if key is not None else None
        for callback in list(self._callbacks):
            callback(key, row)

    def on_select(self, callback: Callable[[str | None, dict[str, Any] | None], None]) -> None:
        """Call ``callback(key, row)`` whenever the selection changes (``row``: that row of ``frame`` as a dict; both None when cleared)."""
        self._callbacks.append(callback)

    def row(self, key: str) -> dict[str, Any] | None:
        """The row of ``frame`` named ``key`` as a dict (None when no row has it)."""
        position = self._position.get(str(key))
        return None if position is None else self.frame.iloc[position].to_dict()

    @property
    def selected(self) -> dict[str, Any] | None:
        """The selected row of ``frame`` as a dict, or None."""
        return self.row(self.widget.selected) if self.widget.selected else None

    # -- what a click does, from code ------------------------------------------------------------

    def select(self, key: Any) -> None:
        """Select the row named ``key`` (None clears); ``ValidationError`` when no row has it."""
        if key is None:
            self.widget.selected = ""
            return
        if str(key) not in self._position:
            raise ValidationError(f"no row with key {key!r}")
        self.widget.selected = str(key)

    def sort(self, column: str | None, *, descending: bool = False) -> None:
        """Sort by ``column`` (None: the frame's own order) and go to the first page."""
        if column is not None and column not in self.kinds:
            raise ValidationError(f"no column {column!r} to sort by; columns: {list(self.kinds)}")
        self._set(sort_by=column or "", descending=bool(descending), page=0)

    def filter(self, column: str, text: str | None) -> None:
        """Filter ``column`` by ``text`` (see the module docstring; None or ``""`` removes the filter) and go to the first page."""
        if column not in self.kinds:
            raise ValidationError(f"no column {column!r} to filter; columns: {list(self.kinds)}")
        filters = {name: value for name, value in self.widget.filters.items() if name != column}
        if text is not None and str(text).strip():
            filters[column] = str(text)
        self._set(filters=filters, page=0)

    def search(self, text: str) -> None:
        """Keep the rows with ``text`` (case-insensitive) in any text column (``""``: all) and go to the first page."""
        self._set(search=str(text), page=0)

    def clear_filters(self) -> None:
        """Remove every filter and the search."""
        self._set(filters={}, search="", page=0)

    def go_to(self, page: int) -> None:
        """Show ``page`` (0-based; clamped to the pages there are)."""
        self.widget.page = max(0, int(page))

    @property
    def pages(self) -> int:
        """How many pages the rows passing the filters fill (at least 1)."""
        return max(1, math.ceil(self.widget.total / max(1, self.widget.page_size)))

    @property
    def page_rows(self) -> list[dict[str, str]]:
        """The page on screen: one dict per row, column -> the text its cell shows."""
        names = [column["name"] for column in self.widget.columns]
        return [dict(zip(names, cells)) for cells in self.widget.rows]

    # -- display ----------------------------------------------------------------------------------

    def to_html(self) -> str:
        """The page on screen as a static HTML table (what an exported notebook without widget state shows)."""
        view = self.widget
        start = view.page * view.page_size
        caption = f"rows {start + 1 if view.total else 0}–{min(view.total, start + view.page_size)} of {view.total:,}"
        if view.total != view.count:
            caption += f" (filtered from {view.count:,})"
        columns = [column["name"] for column in view.columns]
        table = h.table(columns, ([h.esc(cell) if cell else MISSING for cell in row] for row in view.rows), empty="no rows")
        return h.page(h.heading(view.title) if view.title else "", f'<div style="overflow-x:auto">{table}</div>', h.note(caption))

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):
            data, metadata = bundle
            return {**data, "text/html": self.to_html()}, metadata
        if isinstance(bundle, dict):
            return {**bundle, "text/html": self.to_html()}
        return bundle


def grid_columns(names: Iterable[str], frame: "pandas.DataFrame") -> list[str]:
    """The names of ``names`` that ``frame`` has, in that order (a grid's columns when some frames lack a few)."""
    return [name for name in names if name in frame.columns]
