"""UsageExplorer: the usage view: every visible session with its tokens, cost and status, usage per model; a selected session opens below."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlab._format import format_frame
from memlab.usage import RANGES
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer
from memlab.widgets._grid import FrameGrid

if TYPE_CHECKING:
    import pandas

    from memlab.stack import MemoryStack
    from memlab.widgets._session import SessionExplorer

#: the columns of the sessions grid, in order (from :meth:`memlab.frames.Frames.sessions`)
SESSION_GRID_COLUMNS = (
    "session_id", "effective_status", "last_activity_at", "started_at", "tokens_in", "tokens_out", "cost_usd", "embedding_tokens",
    "error_count", "last_model", "user_id", "dataset_id",
)
#: the columns of the per-model usage grid (from :meth:`memlab.frames.Frames.usage`)
USAGE_GRID_COLUMNS = ("session_id", "model", "kind", "calls", "tokens_in", "tokens_out", "cost_usd", "usage_source", "updated_at", "user_id")
_KEY = "row_key"


class UsageExplorer(Explorer):
    """Sessions and their usage in grids; selecting a session (in either grid) opens it in a :class:`SessionExplorer` below.

    In a notebook (top-level await)::

        usage = UsageExplorer(stack)
        await usage.refresh()   # reads stack.frames.sessions / .usage / .cost_by_model
        usage

    ``user``: whose view (None: the default user; a user sees their own sessions and
    those of the users under them, as ``stack.usage`` rules); ``limit``: the most
    recently active sessions read. Shown: ``cost`` (HTML: cost by model over
    ``range_select``'s range, ``24h`` / ``7d`` / ``30d`` / ``all``), ``session_grid`` (a
    :class:`~memlab.widgets.FrameGrid`, one row per session: status, activity, tokens,
    cost, errors, model), ``usage_grid`` (one row per session, model and kind).
    Selecting a row of either (a click, or ``grid.select(key)`` / :meth:`open_session`)
    opens that session in ``explorer`` (a :class:`SessionExplorer`, built on first use,
    its load awaited by :meth:`settle`). Row keys are ``"<user id>/<session id>"``.
    Loaded data: ``sessions_frame``, ``usage_frame``, ``cost_frame``.
    """

    def __init__(self, stack: "MemoryStack", *, user: Any = None, limit: int = 1000, page_size: int = 15) -> None:
        super().__init__()
        w = self._w
        self.stack, self._viewer, self._limit = stack, user, limit
        self.sessions_frame: "pandas.DataFrame | None" = None
        self.usage_frame: "pandas.DataFrame | None" = None
        self.cost_frame: "pandas.DataFrame | None" = None
        self.explorer: "SessionExplorer | None" = None
        self.range_select = w.Dropdown(description="range", options=list(RANGES), value="30d")
        self.cost = w.HTML()
        self.session_grid: FrameGrid | None = None
        self.usage_grid: FrameGrid | None = None
        self._page_size = page_size
        self.grids = w.VBox([])
        self.explorer_box = w.VBox([])
        self.widget = w.VBox([self.range_select, self.cost, self.grids, self.explorer_box, self.status])
        self._observe(self.range_select, lambda: self._schedule(self._load_cost))

    async def refresh(self) -> None:
        """Read the sessions, the per-model usage and the cost by model again (grids keep their sort, filters and selection)."""
        frames = self.stack.frames
        sessions = await frames.sessions(self._viewer, limit=self._limit)
        usage = await frames.usage(user=self._viewer, limit=self._limit)
        self.sessions_frame = sessions.assign(**{_KEY: _keys(sessions)})
        self.usage_frame = usage.assign(**{_KEY: _keys(usage)})
        if self.session_grid is None or self.usage_grid is None:
            self.session_grid = FrameGrid(self.sessions_frame, key=_KEY, columns=SESSION_GRID_COLUMNS, page_size=self._page_size,
                                          title="sessions (select one to open it)")
            self.usage_grid = FrameGrid(self.usage_frame, key=_KEY, columns=USAGE_GRID_COLUMNS, page_size=self._page_size,
                                        title="usage per session, model and kind")
            self.session_grid.widget.add_class("memlab-session-grid")  # hooks for page CSS and browser tests (memlab ui)
            self.usage_grid.widget.add_class("memlab-usage-grid")
            self.session_grid.on_select(self._selected)
            self.usage_grid.on_select(self._selected)
            self.grids.children = (self.session_grid.widget, self.usage_grid.widget)
        else:
            self.session_grid.update(self.sessions_frame)
            self.usage_grid.update(self.usage_frame)
        await self._load_cost()

    async def _load_cost(self) -> None:
        range_ = self.range_select.value
        self.cost_frame = await self.stack.frames.cost_by_model(range_, user=self._viewer)
        shown = format_frame(self.cost_frame)
        rows = [[h.esc(value) for value in row] for row in shown.itertuples(index=False)]
        self.cost.value = h.page(h.heading(f"cost by model, last {range_}"),
                                 h.table([str(column) for column in shown.columns], rows, empty="no model calls in this range"))

    def _selected(self, key: str | None, row: dict[str, Any] | None) -> None:
        if key is None or row is None:
            return
        self._schedule(lambda: self._open(str(row["session_id"]), str(row["user_id"])))

    async def _open(self, session_id: str, user_id: str) -> None:
        await self.open_session(session_id, user_id)

    async def open_session(self, session_id: str, user_id: Any = None) -> "SessionExplorer":
        """Open ``session_id`` (of ``user_id``; None: the first listed owner) in ``explorer`` and return it."""
        if self.explorer is None:
            from memlab.widgets._session import SessionExplorer

            self.explorer = SessionExplorer(self.stack, user=self._viewer, session_id=session_id)
            await self.explorer.refresh()  # selects and loads session_id of its first listed owner
            self.explorer_box.children = (self.explorer.widget,)
            owner = str(getattr(user_id, "id", user_id)) if user_id is not None else None
            if self.explorer.session_select.value == session_id and owner in (None, self.explorer.user_select.value):
                await self.explorer.settle()
                return self.explorer  # already open: reading a long session twice would double the wait
        await self.explorer.open(session_id, user_id)
        await self.explorer.settle()
        return self.explorer


def _keys(frame: "pandas.DataFrame") -> list[str]:
    """``"<user id>/<session id>"`` per row: a session id alone may repeat across users."""
    return [f"{user}/{session}" for user, session in zip(frame["user_id"].tolist(), frame["session_id"].tolist())]
