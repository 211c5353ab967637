"""``remember()`` and ``improve()``: documents into permanent memory, text into a session, sessions into the graph.

:class:`RememberFlows` receives its collaborators (users, datasets, the session
manager, the relational store and an accessor for the permanent memory, which its
owner builds on first use) and owns the background self-improvement tasks:
``remember(text, session_id=...)`` with ``self_improvement`` schedules one per
(dataset, session, user), coalescing repeated requests; :meth:`RememberFlows.finish`
waits for them (bounded) when the stack closes.

``improve(dataset=..., session_ids=[...])`` also distills each distinct session's
gated guidance into the same dataset (the ``distiller`` it is given,
:meth:`memlab.flows.distill.DistillFlow.distill`), after the turns are bridged. A
session whose distillation fails does not undo or hide the bridging: a warning is
logged and its entry in ``ImproveResult.distilled`` has status ``failed`` with the
``error`` (for :class:`~memlab.exceptions.DistillationCallsFailedError`, the partial
result it carries). Background self-improvement distills too, after bridging: the same
gate and watermark as ``distill_session`` (only accepted guidance not yet sealed), so a
session's lessons reach permanent memory without an explicit call; a failure is logged
and the bridging stays. ``self_improvement=False`` leaves both to ``improve()``. With
``recall.feedback_influence`` above 0 both also apply the sessions' rated turns to the
graph elements' feedback weights (:mod:`memlab.flows.feedback`).

Agent trace steps are bridged beside the turns: each step becomes one document
(:func:`trace_text`: its function, status, query, params, return value, error and
outcome line; its ``memory_context`` is left out, since it came from memory).
``improve()`` bridges every step of the named sessions (content-hash dedup skips those
already stored; ``ImproveResult.traces`` counts them); a background run bridges the
steps not yet sealed by the session's trace watermark (a context row
``agent_trace_persist_watermark_state:<dataset_id>`` listing the bridged
``sealed_ids``), then seals them. A step replaced in place under a sealed
``trace_id`` is not bridged again by the background run (``improve()`` bridges it).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from memlab.datasets import Datasets
from memlab.exceptions import DistillationCallsFailedError, ValidationError
from memlab.models import Dataset, DistillResult, ImproveResult, RememberResult, SessionAgentTraceEntry
from memlab.provenance import PERSIST_WATERMARK_KIND
from memlab.relational import RelationalStore
from memlab.session import SessionManager
from memlab.users import Users
from memlab.validation import check_text

if TYPE_CHECKING:
    from memlab.flows.feedback import FeedbackWeights
    from memlab.graph import Document, PermanentMemory

__all__ = ["TRACE_WATERMARK_KIND", "RememberFlows", "trace_text"]

#: ``kind`` of the context row listing the agent trace steps of a session already bridged into a dataset
TRACE_WATERMARK_KIND = "agent_trace_persist_watermark_state"

logger = logging.getLogger("memlab.stack")


def _text_of(data: Any) -> str:
    if isinstance(data, str):
        return check_text("data", data)
    if isinstance(data, Sequence) and not isinstance(data, (bytes, bytearray)) and all(isinstance(item, str) for item in data):
        return check_text("data", "\n\n".join(data))
    raise ValidationError(f"remember() with session_id takes a str or a list of str, got {type(data).__name__}")


def _turn_text(question: str, answer: str) -> str:
    return f"Question: {question}\nAnswer: {answer}" if question.strip() else answer


def trace_text(step: SessionAgentTraceEntry) -> str:
    """The document an agent trace step becomes in permanent memory (``memory_context`` left out: it came from memory)."""
    returned = json.dumps(step.method_return_value, sort_keys=True) if step.method_return_value is not None else ""
    fields = (
        ("Query", step.memory_query),
        ("Params", json.dumps(step.method_params, sort_keys=True) if step.method_params else ""),
        ("Returned", returned),
        ("Error", step.error_message),
        ("Outcome", step.session_feedback),
    )
    return "\n".join([f"Agent step: {step.origin_function} ({step.status})"] + [f"{label}: {value}" for label, value in fields if value])


def _sealed(rows: Sequence[dict[str, Any]], mark_id: str) -> set[str]:
    """The trace ids the watermark row ``mark_id`` lists as bridged (none when absent or malformed)."""
    for row in rows:
        if row.get("id") == mark_id and row.get("kind") == TRACE_WATERMARK_KIND and isinstance(row.get("sealed_ids"), list):
            return {str(item) for item in row["sealed_ids"]}
    return set()


def _session_tags(sessions: Sequence[str]) -> list[str]:
    return [f"session:{session}" for session in sessions]


class RememberFlows:
    """remember(), improve() and background self-improvement over the given collaborators."""

    def __init__(
        self,
        *,
        users: Users,
        datasets: Datasets,
        sessions: SessionManager,
        store: RelationalStore,
        memory: Callable[[], "PermanentMemory"],
        distiller: Callable[..., Awaitable[DistillResult]] | None = None,
        feedback: "FeedbackWeights | None" = None,
    ) -> None:
        self.users = users
        self.datasets = datasets
        self.sessions = sessions
        self.store = store
        self.memory = memory
        #: ``distiller(session_id, dataset=..., user=...)`` distills a session in improve() (None: improve does not distill)
        self.distiller = distiller
        #: applies rated turns to graph elements' feedback weights in improve() and in the background (None: not applied)
        self.feedback = feedback
        self._improving: dict[tuple, asyncio.Task] = {}
        self._improve_again: set[tuple] = set()

    async def remember(
        self, data: Any, *, dataset: Any, session_id: str | None, user: Any, self_improvement: bool, tags: Sequence[str], progress: bool | None
    ) -> RememberResult:
        """See :meth:`memlab.MemoryStack.remember`."""
        if session_id is None:
            from memlab.graph import load_documents

            if isinstance(tags, str) or not all(isinstance(tag, str) and tag.strip() for tag in tags):
                raise ValidationError(f"tags must be a list of non-blank strings, got {tags!r}")
            documents = await asyncio.to_thread(load_documents, data)
            target = await self.datasets.resolve(dataset, user, "write", create=True)
            return await self.memory().remember(target, documents, tags=[tag.strip() for tag in tags], progress=progress)
        text = _text_of(data)
        session = self.sessions.resolve_session_id(session_id)
        resolved = await self.users.resolve(user)
        if not text.strip():
            return RememberResult(status="skipped_blank", session_id=session)
        qa_id = await self.sessions.add_qa(resolved.id, question="", answer=text, session_id=session)
        if qa_id is None:
            return RememberResult(status="cache_unavailable", session_id=session)
        if self_improvement:
            self._schedule(dataset, session, resolved)
        return RememberResult(status="session_stored", session_id=session, data_ids=[qa_id])

    async def improve(self, *, dataset: Any, session_ids: Sequence[str], user: Any) -> ImproveResult:
        """See :meth:`memlab.MemoryStack.improve`."""
        if isinstance(session_ids, str) or not isinstance(session_ids, Sequence) or not session_ids:
            raise ValidationError(f"session_ids must be a non-empty list of session ids, got {session_ids!r}")
        target, sessions, turns, traces, documents = await self._session_documents(dataset, session_ids, user)
        await self._apply_feedback(sessions, user)
        if not turns and not traces:
            distilled = await self._distill(target, sessions, user)
            return ImproveResult(status="nothing_to_improve", dataset_id=target.id, session_ids=sessions, distilled=distilled)
        result = await self.memory().remember(target, documents, tags=_session_tags(sessions))
        return ImproveResult(
            status="completed",
            dataset_id=target.id,
            session_ids=sessions,
            turns=turns,
            traces=traces,
            data_ids=result.data_ids,
            new_data_ids=result.new_data_ids,
            distilled=await self._distill(target, sessions, user),
        )

    async def _apply_feedback(self, sessions: Sequence[str], user: Any) -> None:
        """Apply each session's rated turns to the feedback weights (:mod:`memlab.flows.feedback`), when on."""
        if self.feedback is None:
            return
        resolved = await self.users.resolve(user)
        for session in dict.fromkeys(sessions):
            applied = await self.feedback.apply(resolved.id, session)
            if applied.turns:
                logger.info("feedback of session %r: %d rated turn(s) moved %d graph element weight(s)", session, applied.turns, applied.elements)

    async def _distill(self, target: Dataset, sessions: Sequence[str], user: Any) -> list[DistillResult]:
        """Distill each distinct session into ``target``, one after another; a failure becomes a ``failed`` result."""
        if self.distiller is None:
            return []
        results = []
        for session in dict.fromkeys(sessions):
            try:
                results.append(await self.distiller(session, dataset=target, user=user))
            except Exception as exc:  # the bridging is done: record the failure instead of raising it
                logger.warning("improve(): distillation of session %r into dataset %s failed: %s: %s", session, target.id, type(exc).__name__, exc)
                partial = exc.result if isinstance(exc, DistillationCallsFailedError) else None
                if isinstance(partial, DistillResult):
                    results.append(partial)
                else:
                    results.append(DistillResult(status="failed", session_id=session, dataset_id=target.id, error=f"{type(exc).__name__}: {exc}"))
        return results

    async def _session_documents(
        self, dataset: Any, session_ids: Sequence[str], user: Any
    ) -> tuple[Dataset, list[str], int, int, list["Document"]]:
        """The dataset to write (created when missing), the resolved session ids, the answered-turn and trace-step
        counts, and those turns and steps as documents."""
        from memlab.graph import load_documents

        resolved = await self.users.resolve(user)
        target = await self.datasets.resolve(dataset, resolved, "write", create=True)
        sessions = [self.sessions.resolve_session_id(session_id) for session_id in session_ids]
        texts: list[str] = []
        steps: list[str] = []
        for session in sessions:
            entries = await self.sessions.get_session(resolved.id, session_id=session)
            texts.extend(_turn_text(entry.question, entry.answer) for entry in entries if entry.answer.strip())
            steps.extend(trace_text(step) for step in await self.sessions.get_traces(resolved.id, session))
        documents = await asyncio.to_thread(load_documents, texts + steps) if texts or steps else []
        return target, sessions, len(texts), len(steps), documents

    async def _improve_in_background(self, dataset: Any, session: str, user: Any) -> None:
        """Bridge the session's turns after its persist watermark, and its trace steps not yet sealed, into ``dataset``,
        raise the watermarks, then distill.

        The watermark (a context row ``session_persist_watermark_state:<dataset_id>``
        holding ``count``) is the number of the session's turns, in order, already
        bridged into that dataset, so a run reads every turn but makes documents of
        the new ones only; a dataset already holding all of them runs no pipeline
        (content-hash dedup). A delete that removes bridged turns lowers it by as
        many (:mod:`memlab.provenance`).
        """
        from memlab.graph import load_documents

        started = asyncio.get_running_loop().time()
        resolved = await self.users.resolve(user)
        target = await self.datasets.resolve(dataset, resolved, "write", create=True)
        mark_id = f"{PERSIST_WATERMARK_KIND}:{target.id}"
        rows = await self.sessions.get_context_entries(resolved.id, session_id=session)
        done = next((row.get("count") for row in rows if row.get("id") == mark_id), 0)
        done = done if isinstance(done, int) and not isinstance(done, bool) and done >= 0 else 0
        entries = await self.sessions.get_session(resolved.id, session_id=session)
        texts = [_turn_text(entry.question, entry.answer) for entry in entries[done:] if entry.answer.strip()]
        trace_mark_id = f"{TRACE_WATERMARK_KIND}:{target.id}"
        sealed = _sealed(rows, trace_mark_id)
        steps = [step for step in await self.sessions.get_traces(resolved.id, session) if step.trace_id not in sealed]
        bridged = texts + [trace_text(step) for step in steps]
        documents = await asyncio.to_thread(load_documents, bridged) if bridged else []
        hashes = {document.content_hash for document in documents}
        new = len(hashes) - len(await self.store.data.known_hashes(target.id, hashes))
        if new:
            await self.memory().remember(target, documents, tags=_session_tags([session]))
        if len(entries) > done:
            mark = {"id": mark_id, "kind": PERSIST_WATERMARK_KIND, "dataset_id": str(target.id), "count": len(entries)}
            await self.sessions.add_context_entry(resolved.id, mark, session_id=session)
        if steps:
            sealed_ids = sorted(sealed | {step.trace_id for step in steps})
            seal = {"id": trace_mark_id, "kind": TRACE_WATERMARK_KIND, "dataset_id": str(target.id), "sealed_ids": sealed_ids}
            await self.sessions.add_context_entry(resolved.id, seal, session_id=session)
        distilled = await self._distill(target, [session], resolved)
        await self._apply_feedback([session], resolved)
        logger.info(
            "self-improvement of session %r into dataset %s: %d new turn(s), %d new trace step(s), %d new document(s) chunked, "
            "extracted and embedded, distillation %s, in %.2f s",
            session, target.id, len(texts), len(steps), new, distilled[0].status if distilled else "off",
            asyncio.get_running_loop().time() - started,
        )

    def _schedule(self, dataset: Any, session: str, user: Any) -> None:
        """Improve one session in the background (:meth:`_improve_in_background`); coalesces repeated requests."""
        key = (str(dataset), session, str(user.id))
        if key in self._improving:
            self._improve_again.add(key)
            return

        async def run() -> None:
            try:
                while True:
                    self._improve_again.discard(key)
                    try:
                        await self._improve_in_background(dataset, session, user)
                    except Exception as exc:  # background work: log, never raise into the caller
                        logger.warning("self-improvement of session %r into %r failed: %s: %s", session, dataset, type(exc).__name__, exc)
                    if key not in self._improve_again:
                        return
            finally:
                self._improving.pop(key, None)

        self._improving[key] = asyncio.get_running_loop().create_task(run())

    @property
    def pending(self) -> int:
        """Background self-improvement runs not finished yet."""
        return len(self._improving)

    async def wait(self, timeout: float | None) -> int:
        """Wait for background self-improvement, at most ``timeout`` seconds (None: no bound); how many still run."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._improving:  # a run may schedule another round of its session: wait for those too
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            _, pending = await asyncio.wait(list(self._improving.values()), timeout=remaining)
            if pending:
                break
        return len(self._improving)

    async def finish(self, timeout: float | None) -> None:
        """:meth:`wait`, then cancel what still runs; a warning names each session it had not bridged.

        Those sessions' turns stay in the session cache for a later ``improve()``.
        """
        if not self._improving:
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        logger.info("close(): waiting for self-improvement of %d session(s) (at most %s s)", len(self._improving), timeout)
        if not await self.wait(timeout):
            logger.info("close(): self-improvement finished in %.2f s", loop.time() - started)
            return
        unfinished = dict(self._improving)
        for task in unfinished.values():
            task.cancel()
        await asyncio.gather(*unfinished.values(), return_exceptions=True)
        for dataset, session, user_id in unfinished:
            logger.warning(
                "close(): self-improvement of session %r into dataset %r (user %s) did not finish within %s s and "
                "was cancelled; its turns are still in the session cache: run improve(dataset=..., session_ids=[%r]) "
                "to bridge them",
                session, dataset, user_id, timeout, session,
            )
