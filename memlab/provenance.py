"""Provenance-exact cleanup of cached sessions after a delete, with receipts (SPEC §7).

Every deletion of permanent memory (``forget()``, ``datasets.delete_data()``,
``datasets.empty_dataset()``) goes through :class:`~memlab.flows.forget.ForgetFlow`:
permanent memory deletes the data and returns a :class:`ForgetEvent`, then the flow
calls :meth:`SessionCleaner.after_forget` with it; for ``forget(everything=True)`` the
flow also calls :meth:`SessionCleaner.forget_user`. Both return a
:class:`~memlab.models.CleanupReceipt`.

* **Dataset-level** (``whole_dataset``): every session attributed to the dataset
  (its recorded ``dataset_id`` in ``session_records``, or the name
  ``default_session_<dataset_id>``), of every user, is deleted whole; a session
  attributed elsewhere whose turns read the dataset (``session_datasets``) gets the
  targeted pass below with every removed element.
* **Single document**: the candidate sessions are the dataset's, those recorded
  without a dataset, and those whose turns read the dataset (``session_datasets``:
  a turn records every dataset it searches). In each, :func:`contaminated` gives the turns whose
  ``used_graph_element_ids`` overlap the removed nodes or edges, closed under
  turn -> feedback referencing it -> guidance distilled from that feedback ->
  later turns that used that guidance, to a fixpoint; exactly those entries are
  deleted, and each persist watermark is lowered by the removed turns it had
  counted (it never rises).
* **Best effort**: a cache or metadata error never fails the delete; it is logged
  and listed in ``receipt.failures``; the other sessions are still cleaned.
* **Dry run**: the same reads and the same receipt, no write (and no lock taken).
* **Deletes racing turns**: the cleaner cleans each session while holding its turn
  lock (:meth:`~memlab.session.SessionManager.turn_lock`, the lock a ``search()`` or
  session ``recall()`` turn holds from reading the history to storing itself, in this
  process and across processes). A turn is recorded in ``session_records`` before it
  reads permanent memory, and the graph delete completes before the cleaner lists the
  sessions; so a turn that may have read a removed element is either still running in
  a listed session (the cleaner waits for it to be stored, then cleans it: it is in
  the receipt like any other) or started after the delete (it cites nothing removed).
  Once ``forget()`` and every turn that was running have returned, no stored turn
  cites a removed id. A turn that holds its lock longer than the lock timeout is the
  one exception: the session is cleaned without the lock and the receipt lists a
  ``turn_lock`` failure for it (that turn may store citing removed ids after the
  receipt was made).

Rows of other kinds (watermarks, agent traces) are never followed; a row with no
explicit ``kind`` is ignored, as in cognee. Agent trace steps (rows of ``kind="trace"``)
hold their memory context as text without graph element ids, so the targeted pass never
removes them: a session it cleans lists them as ``kept_trace_ids`` with
``kept_trace_reason`` (:data:`~memlab.models.KEPT_TRACE_REASON`); a whole-session
delete removes them and lists them as ``trace_ids``. The ``tapes`` mirror never sees
deletes (it is append-only by design).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memlab.cache import CacheBackend
from memlab.exceptions import SessionLockTimeout
from memlab.models import KEPT_TRACE_REASON, CleanupFailure, CleanupReceipt, SessionCleanup, SessionQAEntry
from memlab.relational import RelationalStore

__all__ = ["PERSIST_WATERMARK_KIND", "ForgetEvent", "SessionCleaner", "contaminated", "lowered_watermark"]

logger = logging.getLogger("memlab.provenance")

#: ``kind`` of the context row counting the turns of a session already bridged into a dataset
PERSIST_WATERMARK_KIND = "session_persist_watermark_state"


@dataclass(frozen=True)
class ForgetEvent:
    """One deletion: the dataset, the documents, and the graph elements that disappeared (or would, on a dry run).

    ``whole_dataset`` is True when the dataset's whole memory went (``forget(dataset=...)``,
    ``memory_only``, ``empty_dataset``), so dataset-level invalidation applies.
    """

    dataset_id: uuid.UUID
    data_ids: frozenset[str]
    node_ids: frozenset[str]
    edge_ids: frozenset[str]
    whole_dataset: bool
    dry_run: bool = False


def _ids(value: Any) -> set[str]:
    return {str(item) for item in value} if isinstance(value, (list, tuple, set, frozenset)) else set()


def contaminated(
    turns: Sequence[SessionQAEntry], context: Sequence[Mapping[str, Any]], node_ids: Iterable[str], edge_ids: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The turns and context rows a delete of ``node_ids`` / ``edge_ids`` contaminates: ``(qa_ids, context_ids)``.

    Seeds: turns whose ``used_graph_element_ids`` share a node or an edge id with the
    removed ones. Then, to a fixpoint: a ``kind="feedback"`` row whose
    ``referenced_qa_ids`` names a contaminated turn; a ``kind="context"`` row whose
    ``source_feedback_ids`` names a contaminated feedback row; a turn whose
    ``used_session_context_ids`` names a contaminated row. Ids come back in session
    order (turns) and first-insert order (context rows).
    """
    nodes, edges = set(node_ids), set(edge_ids)
    bad_qa: set[str] = set()
    for turn in turns:
        used = turn.used_graph_element_ids or {}
        if turn.qa_id and (nodes & set(used.get("node_ids") or ()) or edges & set(used.get("edge_ids") or ())):
            bad_qa.add(turn.qa_id)
    if not bad_qa:
        return [], []
    feedback = [(str(row["id"]), _ids(row.get("referenced_qa_ids"))) for row in context if row.get("kind") == "feedback" and "id" in row]
    lessons = [(str(row["id"]), _ids(row.get("source_feedback_ids"))) for row in context if row.get("kind") == "context" and "id" in row]
    consumers = [(turn.qa_id, set(turn.used_session_context_ids or ())) for turn in turns if turn.qa_id]
    bad_ctx: set[str] = set()
    changed = True
    while changed:
        before = len(bad_qa) + len(bad_ctx)
        bad_ctx.update(entry for entry, refs in feedback if refs & bad_qa)
        bad_ctx.update(entry for entry, sources in lessons if sources & bad_ctx)
        bad_qa.update(qa_id for qa_id, used in consumers if used & bad_ctx)
        changed = len(bad_qa) + len(bad_ctx) != before
    qa_ids = [turn.qa_id for turn in turns if turn.qa_id in bad_qa]
    context_ids = [str(row["id"]) for row in context if str(row.get("id")) in bad_ctx]
    return qa_ids, context_ids


def lowered_watermark(count: int, turns: Sequence[SessionQAEntry], removed: set[str]) -> int:
    """A persist watermark of ``count`` turns after ``removed`` turns go: minus those among the first ``count``."""
    return count - sum(1 for turn in turns[:count] if turn.qa_id in removed)


def _listed(row: Mapping[str, Any]) -> bool:
    """Whether a context row is an entry a receipt names (feedback or guidance), not bookkeeping."""
    return row.get("kind") in ("context", "feedback") and "id" in row


def _trace_ids(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The ``trace_id`` of every agent trace step among context rows, in order."""
    return [str(row.get("trace_id") or row.get("id")) for row in rows if row.get("kind") == "trace"]


def _kept(cleanup: SessionCleanup, rows: Iterable[Mapping[str, Any]]) -> SessionCleanup:
    """``cleanup`` naming the session's trace steps a targeted pass keeps, and why."""
    kept = _trace_ids(rows)
    if kept:
        cleanup.kept_trace_ids, cleanup.kept_trace_reason = kept, KEPT_TRACE_REASON
    return cleanup


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class SessionCleaner:
    """Cleans the session cache after deletes (see the module docstring).

    ``cache`` is the stack's backend (None: caching off, nothing to clean);
    ``records`` the metadata store holding ``session_records``; ``default_session_id``
    the prefix of dataset-scoped default sessions; ``turn_lock(user_id, session_id)``
    the sessions' turn lock (the session manager's), held while a session is cleaned.
    """

    def __init__(
        self,
        cache: CacheBackend | None,
        records: RelationalStore,
        *,
        default_session_id: str,
        turn_lock: Callable[[str, str], contextlib.AbstractAsyncContextManager[None]],
    ) -> None:
        self.cache = cache
        self.records = records
        self.default_session_id = default_session_id
        self.turn_lock = turn_lock

    async def after_forget(self, event: ForgetEvent) -> CleanupReceipt:
        """Clean the sessions ``event`` reaches; never raises (failures go to the receipt)."""
        if self.cache is None or (not event.whole_dataset and not event.node_ids and not event.edge_ids):
            return CleanupReceipt()
        try:
            candidates = await self.records.sessions.of_dataset(
                event.dataset_id, f"{self.default_session_id}_{event.dataset_id}", include_unattributed=not event.whole_dataset
            )
            readers = await self.records.sessions.reading(event.dataset_id)
        except Exception as exc:  # best effort by contract: the delete itself has completed
            logger.warning("session cleanup after deleting from dataset %s could not list sessions: %s", event.dataset_id, _error(exc))
            return CleanupReceipt(failures=[CleanupFailure(operation="list_sessions", error=_error(exc))])
        pairs = list(dict.fromkeys((str(record.user_id), record.session_id) for record in candidates))
        if not event.whole_dataset:
            return await self._delete_contaminated(list(dict.fromkeys(pairs + readers)), event.node_ids, event.edge_ids, event.dry_run)
        whole = await self._delete_whole(pairs, event.dry_run)
        attributed = set(pairs)
        others = [pair for pair in dict.fromkeys(readers) if pair not in attributed]
        return whole.merged(await self._delete_contaminated(others, event.node_ids, event.edge_ids, event.dry_run))

    async def forget_user(self, user_id: uuid.UUID, *, dry_run: bool = False) -> CleanupReceipt:
        """Delete every session recorded for ``user_id`` (``forget(everything=True)``); never raises."""
        if self.cache is None:
            return CleanupReceipt()
        try:
            records = await self.records.sessions.of_user(user_id)
        except Exception as exc:
            logger.warning("session cleanup of user %s could not list sessions: %s", user_id, _error(exc))
            return CleanupReceipt(failures=[CleanupFailure(user_id=str(user_id), operation="list_sessions", error=_error(exc))])
        return await self._delete_whole([(str(user_id), record.session_id) for record in records], dry_run)

    async def _ready(self) -> CacheBackend:
        cache = self.cache
        assert cache is not None  # checked by the public methods
        await cache.open()
        return cache

    @contextlib.asynccontextmanager
    async def _holding(self, receipt: CleanupReceipt, user_id: str, session_id: str, dry_run: bool) -> AsyncIterator[None]:
        """The session's turn lock around its cleaning (not for a dry run); a timeout is listed, and the session cleaned anyway."""
        if dry_run:
            yield
            return
        async with contextlib.AsyncExitStack() as held:
            try:
                await held.enter_async_context(self.turn_lock(user_id, session_id))
            except SessionLockTimeout as exc:  # a turn still runs: clean what is stored, and say so
                self._failed(receipt, user_id, session_id, "turn_lock", exc)
            yield

    async def _delete_whole(self, pairs: list[tuple[str, str]], dry_run: bool) -> CleanupReceipt:
        receipt = CleanupReceipt(sessions_considered=len(pairs))
        for user_id, session_id in pairs:
            async with self._holding(receipt, user_id, session_id, dry_run):
                await self._delete_one_whole(receipt, user_id, session_id, dry_run)
        return receipt

    async def _delete_one_whole(self, receipt: CleanupReceipt, user_id: str, session_id: str, dry_run: bool) -> None:
        operation = "read_session"
        try:
            cache = await self._ready()
            turns = await cache.get_all_qa_entries(user_id, session_id)
            rows = await cache.get_session_context_entries(user_id, session_id)
            if not turns and not rows:
                return
            if not dry_run:
                operation = "delete_session"
                await cache.delete_session(user_id, session_id)
        except Exception as exc:  # best effort: any failure is reported, never raised
            self._failed(receipt, user_id, session_id, operation, exc)
            return
        receipt.sessions.append(
            SessionCleanup(
                user_id=user_id,
                session_id=session_id,
                qa_ids=[turn.qa_id for turn in turns if turn.qa_id],
                context_ids=[str(row["id"]) for row in rows if _listed(row)],
                trace_ids=_trace_ids(rows),
                whole_session=True,
            )
        )

    async def _delete_contaminated(
        self, pairs: list[tuple[str, str]], node_ids: frozenset[str], edge_ids: frozenset[str], dry_run: bool
    ) -> CleanupReceipt:
        receipt = CleanupReceipt(sessions_considered=len(pairs))
        for user_id, session_id in pairs:
            async with self._holding(receipt, user_id, session_id, dry_run):
                await self._clean_one(receipt, user_id, session_id, node_ids, edge_ids, dry_run)
        return receipt

    async def _clean_one(
        self, receipt: CleanupReceipt, user_id: str, session_id: str, node_ids: frozenset[str], edge_ids: frozenset[str], dry_run: bool
    ) -> None:
        try:
            cache = await self._ready()
            turns = await cache.get_all_qa_entries(user_id, session_id)
            rows = await cache.get_session_context_entries(user_id, session_id) if turns else []
        except Exception as exc:  # best effort: any failure is reported, never raised
            self._failed(receipt, user_id, session_id, "read_session", exc)
            return
        qa_ids, context_ids = contaminated(turns, rows, node_ids, edge_ids)
        if not qa_ids and not context_ids:
            return
        if dry_run:
            receipt.sessions.append(_kept(SessionCleanup(user_id=user_id, session_id=session_id, qa_ids=qa_ids, context_ids=context_ids), rows))
            return
        removed = await self._remove(receipt, cache, user_id, session_id, qa_ids, context_ids)
        if removed.qa_ids or removed.context_ids:
            receipt.sessions.append(_kept(removed, rows))
        if removed.qa_ids:
            await self._lower_watermarks(receipt, cache, user_id, session_id, turns, rows, set(removed.qa_ids))

    async def _remove(
        self, receipt: CleanupReceipt, cache: CacheBackend, user_id: str, session_id: str, qa_ids: list[str], context_ids: list[str]
    ) -> SessionCleanup:
        """Delete the entries one by one; the returned record lists those actually removed."""
        done = SessionCleanup(user_id=user_id, session_id=session_id)
        for qa_id in qa_ids:
            try:
                if await cache.delete_qa_entry(user_id, session_id, qa_id):
                    done.qa_ids.append(qa_id)
            except Exception as exc:  # best effort: any failure is reported, never raised
                self._failed(receipt, user_id, session_id, f"delete_qa {qa_id}", exc)
        for entry_id in context_ids:
            try:
                if await cache.delete_session_context_entry(user_id, session_id, entry_id):
                    done.context_ids.append(entry_id)
            except Exception as exc:  # best effort: any failure is reported, never raised
                self._failed(receipt, user_id, session_id, f"delete_context {entry_id}", exc)
        return done

    async def _lower_watermarks(
        self,
        receipt: CleanupReceipt,
        cache: CacheBackend,
        user_id: str,
        session_id: str,
        turns: list[SessionQAEntry],
        rows: list[dict[str, Any]],
        removed: set[str],
    ) -> None:
        for row in rows:
            count = row.get("count")
            if row.get("kind") != PERSIST_WATERMARK_KIND or isinstance(count, bool) or not isinstance(count, int):
                continue
            lowered = lowered_watermark(count, turns, removed)
            if lowered == count:
                continue
            try:
                await cache.update_session_context_entry(user_id, session_id, str(row["id"]), {"count": lowered})
            except Exception as exc:  # best effort: any failure is reported, never raised
                self._failed(receipt, user_id, session_id, f"lower_watermark {row['id']}", exc)

    @staticmethod
    def _failed(receipt: CleanupReceipt, user_id: str, session_id: str, operation: str, exc: BaseException) -> None:
        logger.warning("session cleanup of %r (user %s) failed at %s: %s", session_id, user_id, operation, _error(exc))
        receipt.failures.append(CleanupFailure(user_id=user_id, session_id=session_id, operation=operation, error=_error(exc)))
