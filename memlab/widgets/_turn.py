"""TurnInspector: one search turn's lanes, analysis verdicts and phase timings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlab._format import format_value
from memlab.exceptions import SessionParameterValidationError
from memlab.flows.turn import turn_trace
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer
from memlab.widgets._elements import ElementLookup, element_cells

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from memlab.models import SessionQAEntry
    from memlab.stack import MemoryStack

LANES = ("raw", "rewrite", "merged")
#: the turn facts shown in ``facts``: ``memify_metadata`` key (``turn_<name>``) and label
_FACTS = (
    ("mode", "mode (what ran)"),
    ("requested_mode", "requested mode"),
    ("fallback_reason", "fallback reason"),
    ("answered", "answered"),
    ("effective_query", "effective query"),
    ("rewrite", "rewrite (query of the rewrite lane)"),
    ("latency_ms", "latency ms"),
    ("answer_calls", "answer calls"),
    ("analysis_calls", "analysis calls"),
    ("tokens_in", "tokens in"),
    ("tokens_out", "tokens out"),
    ("analysis_error", "analysis error"),
    ("lane_error", "lane error"),
)


def _fact(name: str, value: Any) -> Any:
    """A turn fact as shown: timings and counts formatted by kind (:func:`memlab.charts.format_value`), the rest as stored."""
    if value is None or isinstance(value, bool):
        return value
    if name.endswith("_ms"):
        return format_value(value, "ms")
    if name.endswith(("_calls", "tokens_in", "tokens_out")):
        return format_value(value, "count")
    return value


class TurnInspector(Explorer):
    """One turn of a session: raw lane vs rewrite lane vs merged list, the analysis verdicts, timings per phase.

    In a notebook (top-level await)::

        inspector = TurnInspector(stack, "chat", qa_id)
        await inspector.refresh()   # SessionParameterValidationError when the session has no turn qa_id
        inspector                   # displays inspector.widget

    Panes (``ipywidgets.HTML``): ``facts`` (question, answer, mode, fallback, effective
    query, rewrite, calls, tokens), ``lanes`` (a dict ``raw`` / ``rewrite`` / ``merged``:
    rank, id, kind, text, supporting documents; merged rows say which lane(s) held the
    element), ``analysis`` (the verdicts :func:`memlab.flows.turn.turn_trace` returns),
    ``phases`` (phase, start, ms, end); ``timeline`` (``ipywidgets.Image`` of ``figure``,
    the :func:`memlab.charts.phase_timeline_figure`). A turn without a trace (stored by
    ``remember``, or before traces existed) shows a message instead. ``user``: the
    session's owner (None: the default user). ``entry``: the turn already read (the
    :class:`SessionExplorer` passes it): ``refresh()`` then reads only the graph its lanes
    name, not the whole session again. Loaded data: ``entry``, ``trace``.
    """

    def __init__(self, stack: "MemoryStack", session_id: str, qa_id: str, *, user: Any = None, entry: "SessionQAEntry | None" = None) -> None:
        super().__init__()
        w = self._w
        self.stack, self.session_id, self.qa_id, self._user = stack, session_id, qa_id, user
        if entry is not None and entry.qa_id != qa_id:
            raise SessionParameterValidationError(f"entry {entry.qa_id!r} is not turn {qa_id!r}")
        self._given = entry
        self.entry: "SessionQAEntry | None" = None
        self.trace: dict[str, Any] | None = None
        self.figure: "Figure | None" = None
        self.facts, self.analysis, self.phases = w.HTML(), w.HTML(), w.HTML()
        self.lanes = {lane: w.HTML(layout=w.Layout(width="33%")) for lane in LANES}
        self.timeline = w.Image(format="png", layout=w.Layout(max_width="760px"))
        self.widget = w.VBox(
            [
                self.facts,
                w.HBox([self.lanes[lane] for lane in LANES]),
                self.analysis,
                self.timeline,
                self.phases,
                self.status,
            ]
        )
        self.widget.add_class("memlab-turn-inspector")  # hooks for page CSS and browser tests (memlab ui)
        for lane, pane in self.lanes.items():
            pane.add_class(f"memlab-lane-{lane}")
        self.phases.add_class("memlab-phases")

    async def refresh(self) -> None:
        """Read the turn (and the graph its lanes name) and render it."""
        stack = self.stack
        user = await stack.users.resolve(self._user)
        entry = self._given
        if entry is None:
            entries = await stack.session.get_session(session_id=self.session_id, user=user)
            entry = next((item for item in entries if item.qa_id == self.qa_id), None)
        if entry is None:
            raise SessionParameterValidationError(f"session {self.session_id!r} has no turn with qa_id {self.qa_id!r}")
        meta = entry.memify_metadata or {}
        trace = turn_trace(meta) if "turn_mode" in meta else None
        lookup = None
        if trace is not None and trace["lanes"]:
            usage = await stack.usage.get(self.session_id, user)
            lookup = await ElementLookup.load(stack, user, usage.dataset_id if usage is not None else None)
        self.entry, self.trace = entry, trace
        self._render(lookup)

    def _render(self, lookup: ElementLookup | None) -> None:
        from memlab.charts import figure_png, phase_timeline_figure

        entry, trace = self.entry, self.trace
        assert entry is not None
        meta = entry.memify_metadata or {}
        facts = [("qa id", h.esc(entry.qa_id)), ("question", h.esc(entry.question)), ("answer", h.esc(entry.answer))]
        if trace is None:
            self.facts.value = h.page(
                h.pairs(facts),
                h.note("This turn has no trace: it was not stored by a search turn (remember() writes such entries), "
                       "so there are no lanes, verdicts or phases to show."),
            )
            for pane in (*self.lanes.values(), self.analysis, self.phases):
                pane.value = ""
            self.figure, self.timeline.value = None, b""
            return
        facts += [(label, h.esc(_fact(name, meta.get(f"turn_{name}")))) for name, label in _FACTS]
        self.facts.value = h.page(h.heading("turn"), h.pairs(facts))
        lanes = trace["lanes"]
        for lane in LANES:
            self.lanes[lane].value = self._lane_html(lane, lanes, lookup)
        verdicts = trace["analysis"]
        self.analysis.value = h.page(
            h.heading("analysis verdicts"),
            h.value(verdicts) if verdicts is not None else h.note(
                "no verdicts: the analysis did not run on this turn (mode off, or gated), or it failed open"
                + (f" ({meta['turn_analysis_error']})" if meta.get("turn_analysis_error") else "")
            ),
        )
        phases = trace["phases"]
        self.phases.value = h.page(
            h.heading("phases"),
            h.table(
                ["phase", "start ms", "ms", "end ms"],
                [
                    [h.esc(p.get("phase")), h.esc(format_value(p.get("start_ms", 0), "ms")), h.esc(format_value(p.get("ms", 0), "ms")),
                     h.esc(format_value(p.get("start_ms", 0) + p.get("ms", 0), "ms"))]
                    for p in phases
                ],
                empty="no phases recorded",
            ),
        )
        self.figure = phase_timeline_figure(phases, title=f"turn {str(entry.qa_id)[:8]} ({meta.get('turn_mode')})")
        self.timeline.value = figure_png(self.figure)

    @staticmethod
    def _lane_html(lane: str, lanes: dict[str, Any] | None, lookup: ElementLookup | None) -> str:
        title = {"raw": "raw lane", "rewrite": "rewrite lane", "merged": "merged (what the answer saw)"}[lane]
        if lanes is None:
            return h.page(h.heading(title), h.note("no retrieval: the turn was gated (answered without a search)"))
        ids = lanes.get(lane)
        if ids is None:
            return h.page(h.heading(title), h.note("this lane did not run on this turn"))
        raw, rewrite = set(lanes.get("raw") or ()), set(lanes.get("rewrite") or ())
        columns = ["#", "id", "kind", "text", "documents"] + (["from"] if lane == "merged" else [])
        rows = []
        for rank, element_id in enumerate(ids, start=1):
            row = [h.esc(rank), h.ident(element_id), *element_cells(lookup, element_id, 70)]
            if lane == "merged":
                origin = "both" if element_id in raw and element_id in rewrite else "raw" if element_id in raw else "rewrite" if element_id in rewrite else "?"
                row.append(h.esc(origin))
            rows.append(row)
        return h.page(h.heading(f"{title}: {len(ids)}"), h.table(columns, rows, empty="no elements"))
