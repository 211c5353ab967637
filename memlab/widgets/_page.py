"""ExplorerPage: the explorers of one stack laid out as a page to keep open (``memlab ui`` serves it): sessions, the open session, refresh."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab._format import format_value
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer

if TYPE_CHECKING:
    from memlab.stack import MemoryStack
    from memlab.widgets._session import SessionExplorer
    from memlab.widgets._usage import UsageExplorer

#: seconds between two reloads while "auto-refresh" is ticked
AUTO_REFRESH_SECONDS = 10.0


class ExplorerPage(Explorer):
    """The explorers of one stack on one page: the sessions grid, the usage per model (folded), the open session below.

    Built from a :class:`~memlab.widgets.UsageExplorer` (``usage``) and laid out for a
    page kept open: ``header`` (the data root, how many sessions, when they were read),
    ``refresh_button``, ``auto_refresh`` (a Checkbox: reload every ``interval`` seconds
    while ticked), the sessions grid (``usage.session_grid``), the cost by model and the
    per-model usage grid in a folded ``details`` Accordion, then the open session
    (``session``: ``usage.explorer``, a :class:`~memlab.widgets.SessionExplorer`: the turns
    grid; a clicked turn opens its :class:`~memlab.widgets.TurnInspector`). Selecting a
    row of either grid opens that session.

    ``await page.refresh()`` reads the sessions, the usage and the cost again and
    reloads the open session, keeping every grid's page, sort, filters and selection;
    the first time (or with ``latest=True``) it opens the most recently active session,
    its row selected. :meth:`from_env` builds the page on ``MemoryStack.from_env()`` and
    reads everything once (``memlab ui``'s notebook does so before a browser asks for the
    page: the imports and first reads are then done); :meth:`close` closes a stack it opened.

    In a notebook (top-level await)::

        page = ExplorerPage(stack)
        await page.refresh()
        page
    """

    def __init__(self, stack: "MemoryStack", *, data_root: Path | str | None = None, interval: float = AUTO_REFRESH_SECONDS,
                 page_size: int = 15) -> None:
        super().__init__()
        from memlab.widgets._usage import UsageExplorer

        w = self._w
        self.stack = stack
        self.data_root = Path(data_root if data_root is not None else stack.config.data_root).resolve()
        self.interval = interval
        self.usage: "UsageExplorer" = UsageExplorer(stack, page_size=page_size)
        self.loaded_at: dt.datetime | None = None
        self._owned = False
        self._follow: "asyncio.Task[None] | None" = None
        self.header = w.HTML()
        self.refresh_button = w.Button(description="Refresh", tooltip="read the sessions and the open session again")
        self.auto_refresh = w.Checkbox(value=False, description=f"auto-refresh every {interval:g} s", indent=False)
        self.sessions_box = w.VBox([])
        self._details_box = w.VBox([self.usage.range_select, self.usage.cost])
        self.details = w.Accordion(children=[self._details_box], titles=("usage per model and cost",), selected_index=None)
        self.widget = w.VBox([
            w.HBox([self.header, self.refresh_button, self.auto_refresh], layout=w.Layout(align_items="center")),
            self.sessions_box,
            self.details,
            self.usage.explorer_box,
            self.usage.status,
            self.status,
        ])
        self.widget.add_class("memlab-ui")
        self.refresh_button.on_click(lambda _: self._schedule(self.refresh))
        self._observe(self.auto_refresh, self._follow_changed)
        self._render_header()

    @classmethod
    async def from_env(cls, **options: Any) -> "ExplorerPage":
        """A page on ``MemoryStack.from_env()``, opened and read once (:meth:`close` closes the stack); ``options`` as the constructor's."""
        from memlab.stack import MemoryStack

        stack = MemoryStack.from_env()
        await stack.open()
        page = cls(stack, **options)
        page._owned = True
        await page.refresh()  # the imports, the grids, the first reads: done before a browser asks (a preheated kernel)
        return page

    @property
    def session(self) -> "SessionExplorer | None":
        """The open session's explorer (None before the first refresh, or when there is no session)."""
        return self.usage.explorer

    async def refresh(self, *, latest: bool = False) -> None:
        """Read everything again (see the class docstring); ``latest``: open the most recently active session."""
        usage = self.usage
        await usage.refresh()
        grid, frame = usage.session_grid, usage.sessions_frame
        assert grid is not None and usage.usage_grid is not None and frame is not None
        if not self.sessions_box.children:  # the grids exist from the first refresh on
            self.sessions_box.children = (grid.widget,)
            self._details_box.children = (*self._details_box.children, usage.usage_grid.widget)
        newest = str(frame["row_key"].iloc[0]) if len(frame) else None  # sessions come most recently active first
        if newest is not None and (latest or usage.explorer is None) and grid.widget.selected != newest:
            grid.select(newest)  # the sessions grid's selection opens it (UsageExplorer)
            await usage.settle()
        elif usage.explorer is not None:
            await usage.explorer.refresh()
            await usage.explorer.settle()
        self.loaded_at = dt.datetime.now().astimezone()
        self._render_header()

    def _render_header(self) -> None:
        frame = self.usage.sessions_frame
        parts = [f"<b>memlab ui</b> · data root <code>{h.esc(self.data_root)}</code>"]
        if frame is not None:
            parts.append(f"{h.esc(format_value(len(frame), 'count'))} session{'' if len(frame) == 1 else 's'}")
        parts.append(f"read at {h.esc(f'{self.loaded_at:%H:%M:%S}' if self.loaded_at else 'not yet')}")
        self.header.value = f'<div class="memlab-ui-header" style="margin-right:1em">{" · ".join(parts)}</div>'

    # -- auto-refresh -------------------------------------------------------------------------

    def _follow_changed(self) -> None:
        if self.auto_refresh.value and self._follow is None:
            self._follow = asyncio.get_running_loop().create_task(self._follow_loop())
        elif not self.auto_refresh.value and self._follow is not None:
            self._follow.cancel()
            self._follow = None

    async def _follow_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self._guarded(self.refresh())

    async def close(self) -> None:
        """Stop auto-refresh; close the stack when :meth:`from_env` opened it."""
        follow, self._follow = self._follow, None
        if follow is not None:
            follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follow
        if self._owned:
            await self.stack.close()
