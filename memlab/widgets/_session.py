"""SessionExplorer: browse a stack's users, sessions and turns (a paged, sortable, filterable grid); add or delete feedback."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from memlab._format import format_value
from memlab._html import shorten
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer
from memlab.widgets._elements import ElementLookup, element_cells
from memlab.widgets._grid import FrameGrid

if TYPE_CHECKING:
    import pandas

    from memlab.models import SessionQAEntry, SessionUsage, User
    from memlab.stack import MemoryStack
    from memlab.widgets._turn import TurnInspector

NO_SCORE = 0
#: the columns of the turns grid (:meth:`SessionExplorer.turn_frame`), in order
TURN_GRID_COLUMNS = (
    "turn", "question", "source", "mode", "answered", "latency_ms", "llm_calls", "tokens_in", "tokens_out", "guidance",
    "elements", "feedback", "time", "qa_id",
)


class SessionExplorer(Explorer):
    """Pick a user and a session; browse its turns in a grid; a selected turn shows its feedback, guidance, elements and its TurnInspector.

    In a notebook (top-level await)::

        explorer = SessionExplorer(stack)
        await explorer.refresh()   # loads users, sessions, the first session's turns
        explorer                   # displays explorer.widget

    Users listed: ``user`` (None: the stack's default user), the users in ``users``,
    and every user owning a session they may see (``stack.usage.list_sessions``, up to
    ``limit`` sessions each). ``session_id``: the session selected first (else the most
    recently active). Sessions appear once they have a usage record (their first turn).

    Controls (tests drive them, then ``await explorer.settle()``): ``user_select`` and
    ``session_select`` (Dropdowns, values: user id str / session id), ``turn_grid`` (a
    :class:`~memlab.widgets.FrameGrid` of :meth:`turn_frame`, one row per turn, keyed by
    qa id: page, sort, filter, and select a turn by clicking it or with
    ``turn_grid.select(qa_id)`` / :meth:`select_turn`), ``feedback_text`` (Text),
    ``feedback_score`` (Dropdown, 0 = no score, 1..5), ``save_button`` and
    ``delete_button`` (act on the selected turn). Selecting a turn fills ``turn_detail``
    (answer, feedback, guidance served, graph elements with their documents) and opens
    it in a :class:`~memlab.widgets.TurnInspector` (``inspector``, shown below; its load
    is awaited by :meth:`settle`). Panes (``ipywidgets.HTML``): ``summary`` (status,
    tokens, cost per model), ``turn_detail``, ``status``. Loaded data: ``entries``, ``usage``.
    :meth:`open` jumps to a session (the usage view, :class:`~memlab.widgets.UsageExplorer`, calls it).
    """

    def __init__(
        self,
        stack: "MemoryStack",
        *,
        user: Any = None,
        users: Any = (),
        session_id: str | None = None,
        limit: int = 200,
        page_size: int = 25,
    ) -> None:
        super().__init__()
        w = self._w
        self.stack = stack
        self._viewer, self._extra_users, self._first_session, self._limit = user, list(users), session_id, limit
        self.users: dict[str, "User"] = {}
        self.sessions: dict[str, list["SessionUsage"]] = {}
        self.entries: list["SessionQAEntry"] = []
        self.usage: "SessionUsage | None" = None
        self.inspector: "TurnInspector | None" = None
        self._context: dict[str, dict[str, Any]] = {}
        self._elements: ElementLookup | None = None
        self._load_generation = 0

        self.user_select = w.Dropdown(description="user", options=[])
        self.session_select = w.Dropdown(description="session", options=[])
        self.turn_grid = FrameGrid(self.turn_frame(), key="qa_id", columns=TURN_GRID_COLUMNS, page_size=page_size, title="turns")
        self.turn_grid.widget.add_class("memlab-turn-grid")  # a hook for page CSS and browser tests (memlab ui)
        self.turn_grid.on_select(lambda key, row: self._turn_changed())
        self.feedback_text = w.Text(description="feedback", placeholder="what was good or wrong")
        self.feedback_score = w.Dropdown(description="score", options=[("no score", NO_SCORE)] + [(str(n), n) for n in range(1, 6)])
        # text labels only: icon fonts are not loaded in every front end (JupyterLab 4 shows their glyphs as empty boxes)
        self.save_button = w.Button(description="Save feedback", tooltip="store the text and score on the selected turn")
        self.delete_button = w.Button(description="Delete feedback", tooltip="remove the selected turn's feedback")
        self.summary, self.turn_detail = w.HTML(), w.HTML()
        self.inspector_box = w.VBox([])
        self.widget = w.VBox(
            [
                w.HBox([self.user_select, self.session_select]),
                self.summary,
                self.turn_grid.widget,
                self.turn_detail,
                w.HBox([self.feedback_text, self.feedback_score, self.save_button, self.delete_button]),
                self.inspector_box,
                self.status,
            ]
        )
        self._observe(self.user_select, lambda: self._schedule(self._user_changed))
        self._observe(self.session_select, lambda: self._schedule(self._load_session))
        self.save_button.on_click(lambda _: self._schedule(self._save_feedback))
        self.delete_button.on_click(lambda _: self._schedule(self._delete_feedback))

    # -- loading ---------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Reload users and their sessions, keep the selection where it still exists, reload the selected session."""
        stack = self.stack
        viewer = await stack.users.resolve(self._viewer)
        listed = [viewer] + [await stack.users.resolve(user) for user in self._extra_users]
        users: dict[str, "User"] = {str(user.id): user for user in listed}
        sessions: dict[str, dict[str, "SessionUsage"]] = {user_id: {} for user_id in users}
        for user in listed:
            page = await stack.usage.list_sessions(user, limit=self._limit)
            for item in page.items:
                owner = str(item.user_id)
                if owner not in users:
                    found = await stack.users.get(item.user_id)
                    if found is None:
                        continue
                    users[owner] = found
                sessions.setdefault(owner, {}).setdefault(item.session_id, item)
        self.users = users
        self.sessions = {user_id: list(by_id.values()) for user_id, by_id in sessions.items()}
        current = self.user_select.value
        if current not in users:
            current = self._owner_of(self._first_session) or str(viewer.id)
        with self._programmatic():
            self.user_select.options = [(f"{user.name} ({str(user.id)[:8]})", user_id) for user_id, user in users.items()]
            self.user_select.value = current
        self._fill_sessions()
        await self._load_session()

    def _fill_sessions(self) -> None:
        items = self.sessions.get(self.user_select.value or "", [])
        ids = [item.session_id for item in items]
        first = self._first_session
        if first is not None and self._owner_of(first) is None and self.user_select.value == next(iter(self.users), None):
            ids.append(first)  # no usage record (yet): offered to the viewing user
        current = self.session_select.value
        if current not in ids:
            current = self._first_session if self._first_session in ids else (ids[0] if ids else None)
        by_id = {item.session_id: item for item in items}
        with self._programmatic():
            self.session_select.options = [(self._session_label(sid, by_id.get(sid)), sid) for sid in ids]
            self.session_select.value = current

    def _owner_of(self, session_id: str | None) -> str | None:
        """The listed user owning ``session_id`` (the first, when several do), or None."""
        return next((uid for uid, items in self.sessions.items() if any(item.session_id == session_id for item in items)), None)

    @staticmethod
    def _session_label(session_id: str, usage: "SessionUsage | None") -> str:
        return session_id if usage is None else f"{session_id} · {usage.effective_status}"

    def _user(self) -> "User":
        return self.users[self.user_select.value]

    async def _user_changed(self) -> None:
        self._fill_sessions()
        await self._load_session()

    async def _load_session(self, keep_turn: str | None = None) -> None:
        """Read the selected session's turns, usage, context rows and graph elements, then render."""
        self._load_generation += 1
        generation = self._load_generation
        session_id = self.session_select.value
        if session_id is None or self.user_select.value is None:
            self.entries, self.usage, self._context, self._elements = [], None, {}, None
            self._render(keep_turn)
            return
        stack, user = self.stack, self._user()
        entries = await stack.session.get_session(session_id=session_id, user=user)
        usage = await stack.usage.get(session_id, user)
        user_id, resolved = await stack.session.resolve(session_id, user)
        context = {str(row["id"]): row for row in await stack.session_manager.get_context_entries(user_id, session_id=resolved)}
        elements = None
        if any(entry.used_graph_element_ids for entry in entries):
            elements = await ElementLookup.load(stack, user, usage.dataset_id if usage is not None else None)
        if generation != self._load_generation:  # a newer selection started loading meanwhile
            return
        self.entries, self.usage, self._context, self._elements = entries, usage, context, elements
        self._render(keep_turn)

    # -- feedback ----------------------------------------------------------------------------

    async def open(self, session_id: str, user_id: Any = None) -> None:
        """Show ``session_id`` of the user ``user_id`` (a User, a UUID or its text; None: the first listed owner), loading it."""
        if not self.users:
            await self.refresh()
        owner = str(getattr(user_id, "id", user_id)) if user_id is not None else self._owner_of(session_id)
        if owner is not None and owner not in self.users:
            found = await self.stack.users.get(uuid.UUID(owner))
            if found is None:
                raise ValueError(f"no user {owner}")
            self.users[owner] = found
            self.sessions.setdefault(owner, [])
            with self._programmatic():
                self.user_select.options = [*self.user_select.options, (f"{found.name} ({owner[:8]})", owner)]
        with self._programmatic():
            if owner is not None:
                self.user_select.value = owner
            self._first_session = session_id
            self._fill_sessions()
            if session_id not in [value for _, value in self.session_select.options]:
                self.session_select.options = [*self.session_select.options, (session_id, session_id)]
            self.session_select.value = session_id
        await self._load_session()

    # -- the turns grid ------------------------------------------------------------------------

    def turn_frame(self) -> "pandas.DataFrame":
        """The loaded session's turns as the grid shows them: one row per entry, oldest first (columns :data:`TURN_GRID_COLUMNS`).

        ``source``: ``search`` / ``recall`` for a search turn, ``stored`` for an entry
        ``remember(session_id=...)`` wrote; ``guidance`` and ``elements``: how many
        guidance entries and graph elements the turn used; ``feedback``: score and text.
        """
        import pandas as pd

        rows = []
        for index, entry in enumerate(self.entries, start=1):
            meta = entry.memify_metadata or {}
            traced = "turn_mode" in meta
            rows.append({
                "turn": index,
                "question": entry.question or f"(stored) {shorten(entry.answer or '', 100)}",
                "source": str(meta.get("turn_source") or "search") if traced else "stored",
                "mode": meta.get("turn_mode"),
                "answered": meta.get("turn_answered") if traced else None,
                "latency_ms": meta.get("turn_latency_ms"),
                "llm_calls": (_count(meta.get("turn_answer_calls")) + _count(meta.get("turn_analysis_calls"))) if traced else None,
                "tokens_in": meta.get("turn_tokens_in"),
                "tokens_out": meta.get("turn_tokens_out"),
                "guidance": len(entry.used_session_context_ids or []),
                "elements": sum(len(ids) for ids in (entry.used_graph_element_ids or {}).values()),
                "feedback": _feedback_text(entry),
                "time": entry.time,
                "qa_id": entry.qa_id,
            })
        types = {"turn": "Int64", "question": "string", "source": "string", "mode": "string", "answered": "boolean",
                 "latency_ms": "Float64", "llm_calls": "Int64", "tokens_in": "Int64", "tokens_out": "Int64", "guidance": "Int64",
                 "elements": "Int64", "feedback": "string", "qa_id": "string"}
        frame = pd.DataFrame(rows, columns=list(TURN_GRID_COLUMNS))
        frame["time"] = pd.to_datetime(frame["time"], utc=True, format="mixed") if len(frame) else pd.Series(dtype="datetime64[us, UTC]")
        return frame.astype(types)

    def select_turn(self, qa_id: str | None) -> None:
        """Select the turn ``qa_id`` (None clears), as clicking its row does."""
        self.turn_grid.select(qa_id)

    def _selected(self) -> "SessionQAEntry | None":
        key = self.turn_grid.widget.selected
        return next((entry for entry in self.entries if entry.qa_id == key), None) if key else None

    async def _save_feedback(self) -> None:
        entry = self._selected()
        if entry is None or entry.qa_id is None:
            self._say("pick a turn first")
            return
        text = self.feedback_text.value.strip() or None
        score = self.feedback_score.value or None
        if text is None and score is None:
            self._say("nothing to save: type feedback or pick a score")
            return
        saved = await self.stack.session.add_feedback(
            self.session_select.value, entry.qa_id, feedback_text=text, feedback_score=score, user=self._user()
        )
        await self._load_session(keep_turn=entry.qa_id)
        self._say(f"feedback saved on turn {entry.qa_id}" if saved else f"turn {entry.qa_id} is no longer stored")

    async def _delete_feedback(self) -> None:
        entry = self._selected()
        if entry is None or entry.qa_id is None:
            self._say("pick a turn first")
            return
        deleted = await self.stack.session.delete_feedback(self.session_select.value, entry.qa_id, user=self._user())
        await self._load_session(keep_turn=entry.qa_id)
        self._say(f"feedback deleted from turn {entry.qa_id}" if deleted else f"turn {entry.qa_id} is no longer stored")

    # -- rendering ---------------------------------------------------------------------------

    def _render(self, keep_turn: str | None = None) -> None:
        """Show the loaded session: the summary, the turns grid (sort, filters and page kept), the selected turn."""
        self.summary.value = self._summary_html()
        previous = self.turn_grid.widget.selected or None
        self.turn_grid.update(self.turn_frame())  # a selected turn no longer there is unselected (and its inspector closed)
        ids = {entry.qa_id for entry in self.entries}
        wanted = keep_turn if keep_turn in ids else previous if previous in ids else None
        if (self.turn_grid.widget.selected or None) != wanted:
            self.turn_grid.select(wanted)  # on_select calls _turn_changed
        else:
            self._turn_changed()  # the same turn, read again (its feedback may have changed)

    def _turn_changed(self) -> None:
        entry = self._selected()
        with self._programmatic():
            self.feedback_text.value = (entry.feedback_text or "") if entry else ""
            self.feedback_score.value = (entry.feedback_score or NO_SCORE) if entry else NO_SCORE
        self.turn_detail.value = self._detail_html(entry)
        if entry is None or entry.qa_id is None:
            self.inspector = None
            self.inspector_box.children = ()
        elif self.inspector is None or (self.inspector.session_id, self.inspector.qa_id) != (self.session_select.value, entry.qa_id):
            self._schedule(lambda: self._inspect(entry))

    async def _inspect(self, entry: "SessionQAEntry") -> None:
        """Open ``entry`` in a TurnInspector below the grid (the entry already read: the inspector reads only its graph)."""
        from memlab.widgets._turn import TurnInspector

        session_id = self.session_select.value
        inspector = TurnInspector(self.stack, session_id, str(entry.qa_id), user=self._user(), entry=entry)
        await inspector.refresh()
        current = self._selected()
        if current is None or (current.qa_id, self.session_select.value) != (entry.qa_id, session_id):
            return  # another turn (or session) was selected meanwhile
        self.inspector = inspector
        self.inspector_box.children = (inspector.widget,)

    def _summary_html(self) -> str:
        session_id = self.session_select.value
        if session_id is None:
            return h.page(h.note("this user has no sessions yet"))
        usage = self.usage
        facts = [("session", h.esc(session_id)), ("user", h.ident(self.user_select.value, 36)), ("turns", h.esc(format_value(len(self.entries), "count")))]
        if usage is None:
            return h.page(h.pairs(facts), h.note("no usage record for this session"))
        facts += [
            ("dataset", h.ident(usage.dataset_id, 36)),
            ("status", h.esc(usage.effective_status if usage.effective_status == usage.status else f"{usage.status} ({usage.effective_status})")),
            ("started", h.esc(f"{usage.started_at:%Y-%m-%d %H:%M:%S}")),
            ("last activity", h.esc(f"{usage.last_activity_at:%Y-%m-%d %H:%M:%S}")),
            ("tokens in / out", h.esc(f"{format_value(usage.tokens_in, 'count')} / {format_value(usage.tokens_out, 'count')}")),
            ("cost", h.esc(_cost(usage))),
            ("errors", h.esc(usage.error_count)),
        ]
        models = h.table(
            ["model", "kind", "calls", "tokens in", "tokens out", "cost", "usage source"],
            [
                [h.esc(m.model), h.esc(m.kind), h.esc(format_value(m.calls, "count")), h.esc(format_value(m.tokens_in, "count")),
                 h.esc(format_value(m.tokens_out, "count")), h.esc("unpriced" if m.cost_usd is None else format_value(m.cost_usd, "usd")),
                 h.esc(m.usage_source)]
                for m in usage.models
            ],
            empty="no model calls recorded",
        )
        return h.page(h.pairs(facts), models)

    def _detail_html(self, entry: "SessionQAEntry | None") -> str:
        if entry is None:
            return h.page(h.note("select a turn in the grid: its answer, feedback, guidance and graph elements show here, "
                                 "and its lanes and phases in the TurnInspector below")) if self.entries else ""
        meta = entry.memify_metadata or {}
        facts = [
            ("qa id", h.esc(entry.qa_id)),
            ("time", h.esc(entry.time)),
            ("question", h.esc(entry.question)),
            ("answer", h.esc(entry.answer)),
            ("feedback", _feedback(entry)),
        ]
        if "turn_mode" in meta:
            facts += [
                ("mode", h.esc(meta["turn_mode"])),
                ("latency", h.esc(f"{format_value(meta.get('turn_latency_ms'), 'ms')} ms")),
                ("LLM calls (answer + analysis)", h.esc(f"{meta.get('turn_answer_calls', 0)} + {meta.get('turn_analysis_calls', 0)}")),
            ]
        guidance_rows = []
        for context_id in entry.used_session_context_ids or []:
            row = self._context.get(context_id)
            guidance_rows.append(
                [h.ident(context_id), h.esc(row.get("section")), h.esc(row.get("content"))]
                if row is not None
                else [h.ident(context_id), h.esc(None), h.note("(no longer stored)")]
            )
        element_rows = []
        for group, ids in (entry.used_graph_element_ids or {}).items():
            for element_id in ids:
                element_rows.append(
                    [h.ident(element_id), h.esc(group.removesuffix("_ids")), *element_cells(self._elements, element_id, 90)]
                )
        return h.page(
            h.heading("turn"),
            h.pairs(facts),
            h.heading("guidance served"),
            h.table(["id", "section", "content"], guidance_rows, empty="no guidance served to this turn"),
            h.heading("graph elements used"),
            h.table(["id", "group", "kind", "text", "documents"], element_rows, empty="no graph elements used"),
        )


def _cost(usage: "SessionUsage") -> str:
    if usage.cost_usd is None:
        return f"unpriced ({format_value(usage.unpriced_tokens_in, 'count')} in / {format_value(usage.unpriced_tokens_out, 'count')} out tokens)"
    cost = format_value(usage.cost_usd, "usd")
    if usage.partially_priced:
        return f"{cost} + {format_value(usage.unpriced_tokens_in + usage.unpriced_tokens_out, 'count')} unpriced tokens"
    return cost


def _count(value: Any) -> int:
    """A stored call count as an int (0 when absent or not a number)."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _feedback_text(entry: "SessionQAEntry") -> str | None:
    """A turn's feedback as one line: ``"5/5 · text"``, the score or the text alone, None without feedback."""
    if entry.feedback_score is None and not entry.feedback_text:
        return None
    score = f"{entry.feedback_score}/5" if entry.feedback_score is not None else ""
    return " · ".join(part for part in (score, entry.feedback_text or "") if part)


def _feedback(entry: "SessionQAEntry") -> str:
    return h.esc(_feedback_text(entry))
