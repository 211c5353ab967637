"""CleanupViewer: the session-cache receipt of a delete (``ForgetResult.cleanup``)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from memlab.exceptions import MemlabError, ValidationError
from memlab.models import ForgetResult
from memlab.widgets import _html as h
from memlab.widgets._base import Explorer

if TYPE_CHECKING:
    from memlab.stack import MemoryStack


class CleanupViewer(Explorer):
    """A deletion receipt: what a ``forget()`` removed (or, for a dry run, would remove) from the session cache.

    ``CleanupViewer(result)`` renders at once and displays as its ``widget``. With
    ``stack=``, ``await viewer.refresh()`` also reads the removed turns' questions and
    context rows' content while they are still stored (a dry run; after a real delete
    they are gone and say so).

    Panes (``ipywidgets.HTML``): ``summary`` (dry run or real, counts of datasets,
    documents, graph nodes and edges, sessions, turns, context rows, failures),
    ``sessions`` (one row per cleaned session), ``failures``, ``detail`` (the session
    picked in ``session_select``, a Dropdown whose values are indexes into
    ``result.cleanup.sessions``: its removed qa ids and context ids).
    """

    def __init__(self, forget_result: ForgetResult, *, stack: "MemoryStack | None" = None) -> None:
        if not isinstance(forget_result, ForgetResult):
            raise ValidationError(f"CleanupViewer takes a ForgetResult (what stack.forget() returns), got {type(forget_result).__name__}")
        super().__init__()
        w = self._w
        self.result, self.stack = forget_result, stack
        #: qa id / context id -> its question / content, read by :meth:`refresh` (needs ``stack``)
        self.questions: dict[str, str] = {}
        self.contexts: dict[str, str] = {}
        self._looked_up = False
        self.summary, self.sessions, self.failures, self.detail = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        self.session_select = w.Dropdown(description="session", options=[], layout=w.Layout(width="60%"))
        self.widget = w.VBox([self.summary, self.sessions, self.failures, self.session_select, self.detail, self.status])
        self._observe(self.session_select, self._render_detail)
        self._render()

    async def refresh(self) -> None:
        """With a ``stack``: read what is still stored of the removed entries, then re-render (without: re-render)."""
        if self.stack is not None:
            questions: dict[str, str] = {}
            contexts: dict[str, str] = {}
            for cleaned in self.result.cleanup.sessions:
                try:
                    user = await self.stack.users.get(uuid.UUID(cleaned.user_id))
                    if user is None:
                        continue
                    for entry in await self.stack.session.get_session(session_id=cleaned.session_id, user=user):
                        if entry.qa_id in cleaned.qa_ids:
                            questions[entry.qa_id] = entry.question or f"(stored) {entry.answer}"
                    rows = await self.stack.session_manager.get_context_entries(cleaned.user_id, session_id=cleaned.session_id)
                except (MemlabError, ValueError):  # an owner or session that no longer resolves: ids only
                    continue
                for row in rows:
                    if str(row.get("id")) in cleaned.context_ids:
                        contexts[str(row["id"])] = str(row.get("content") or row.get("raw_text") or row.get("kind") or "")
            self.questions, self.contexts, self._looked_up = questions, contexts, True
        self._render()

    def _render(self) -> None:
        result, receipt = self.result, self.result.cleanup
        turns = sum(len(cleaned.qa_ids) for cleaned in receipt.sessions)
        contexts = sum(len(cleaned.context_ids) for cleaned in receipt.sessions)
        whole = sum(1 for cleaned in receipt.sessions if cleaned.whole_session)
        headline = (
            "Dry run: nothing was changed. The same delete would remove:"
            if result.dry_run
            else "Deleted. Removed:"
        )
        counts = [
            ("datasets", len(result.dataset_ids)),
            ("documents", len(result.data_ids)),
            ("graph nodes", len(result.node_ids)),
            ("graph edges", len(result.edge_ids)),
            ("sessions with entries removed", len(receipt.sessions)),
            ("whole sessions", whole),
            ("turns", turns),
            ("context rows", contexts),
            ("sessions considered", receipt.sessions_considered),
            ("failures", len(receipt.failures)),
        ]
        self.summary.value = h.page(
            h.heading("dry run" if result.dry_run else "deletion receipt"),
            f"<p>{h.esc(headline)}</p>",
            h.pairs((label, h.esc(n)) for label, n in counts),
        )
        self.sessions.value = h.page(
            h.heading("sessions"),
            h.table(
                ["user", "session", "turns", "context rows", "whole session"],
                [
                    [h.ident(c.user_id), h.esc(c.session_id), h.esc(len(c.qa_ids)), h.esc(len(c.context_ids)), h.esc("yes" if c.whole_session else "no")]
                    for c in receipt.sessions
                ],
                empty="no session entries used the deleted data",
            ),
        )
        self.failures.value = h.page(
            h.heading("failures"),
            h.table(
                ["user", "session", "operation", "error"],
                [[h.ident(f.user_id), h.esc(f.session_id), h.esc(f.operation), h.esc(f.error)] for f in receipt.failures],
                empty="no failures",
            ),
        )
        current = self.session_select.value
        with self._programmatic():
            self.session_select.options = [
                (f"{c.session_id} ({c.user_id[:8]}): {len(c.qa_ids)} turns, {len(c.context_ids)} context rows", index)
                for index, c in enumerate(receipt.sessions)
            ]
            self.session_select.value = current if current is not None and current < len(receipt.sessions) else (0 if receipt.sessions else None)
        self._render_detail()

    def _render_detail(self) -> None:
        index = self.session_select.value
        if index is None:
            self.detail.value = ""
            return
        cleaned = self.result.cleanup.sessions[index]
        gone = "(no longer stored)" if self._looked_up else None
        self.detail.value = h.page(
            h.heading(f"session {cleaned.session_id}" + (" (the whole session)" if cleaned.whole_session else "")),
            h.table(
                ["qa id", "question"],
                [[h.esc(qa_id), h.esc(self.questions.get(qa_id, gone))] for qa_id in cleaned.qa_ids],
                empty="no turns",
            ),
            h.table(
                ["context id", "content"],
                [[h.esc(context_id), h.esc(self.contexts.get(context_id, gone))] for context_id in cleaned.context_ids],
                empty="no context rows",
            ),
        )
