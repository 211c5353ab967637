"""The session turn runner: one completion turn of ``search()`` or ``recall()`` under an analysis mode (SPEC §6).

:class:`TurnRunner` is built from its collaborators (session manager, analysis
mode, merge policy, LLM client), picks the mode (:meth:`TurnRunner.choose`),
takes the session's turn lock (:meth:`~memlab.session.SessionManager.turn_lock`: in
this process and across processes, so turns sent to one session at once are stored
one after the other, none lost), records the session's activity before anything is
retrieved (so a delete racing the turn finds the session: :mod:`memlab.provenance`) and
runs the mode over a :class:`SessionTurn`, the :class:`~memlab.analysis.TurnPort`
of one turn. A session whose record and reads are already written is not written
again before the turn: its activity moves with the turn's usage, in one metadata
transaction after the turn (or in a write of its own when no usage was recorded).

Fallback to sequential (the seed's list): a ``concurrent`` stack runs a turn
``sequential`` when the search type is ``FEELING_LUCKY`` (``"feeling_lucky"``),
the query is one of a batch (``"batch"``), the turn has no session (caching off:
``"no_session"``), or the retriever does not declare itself eligible
(:meth:`~memlab.retrievers.Retriever.runs_concurrently`: the four classes the seed
names, exactly; their subclasses fall back: ``"retriever"``).
``only_context=True`` searches are not turns at all (``search()`` retrieves with
the raw query only: no analysis, no rewrite, nothing stored).

Each turn's record (``TurnResult.record``, returned as ``raw["turn"]`` of the
search result) holds ``mode`` (what ran), ``requested_mode``, ``fallback_reason``,
``llm_calls`` (``{"answer": n, "analysis": n}``), ``tokens_in`` / ``tokens_out``
(both calls), ``latency_ms`` (wall-clock from taking the lock to storing),
``source`` (``"search"`` or ``"recall"``, the entry point), ``search_type``, ``usage``
(what the session's usage record made of the turn: ``recorded``, ``post_end`` (the
session had ended: nothing counted), ``off`` (tracking or caching off), ``failed``,
``none``; see :mod:`memlab.usage`),
``effective_query``, ``rewrite`` (the rewrite lane's query, None when it did not
run), ``analysis_error`` (None, or why the analysis failed open), ``lane_error``
(a failed retrieval lane), ``answered`` (False for a gated turn), ``guidance_ids``
(the guidance served to the answer, also stored as ``used_session_context_ids``),
``history_ids`` (the turns the answer's prompt held as history, oldest first),
``lanes`` (``{"raw": ids, "rewrite": ids or None, "merged": ids}``: the element ids
each retrieval lane ranked and the merged list the answer saw; None for a gated
turn), ``analysis`` (the turn analysis' verdicts as a dict, None when none ran or it
failed) and ``phases`` (``[{"phase", "start_ms", "ms"}]``: when each step started,
relative to the lock, and how long it took; ``load``, ``analysis``, ``apply``,
``guidance``, ``history``, then ``answer`` for a single-lane turn (retrieval and the
answer call) or ``retrieve_raw`` / ``retrieve_rewrite`` / ``merge`` / ``answer`` for a
dual-query one). The stored turn carries the same facts flat in ``memify_metadata`` as
``turn_<name>`` (``turn_answer_calls``, ``turn_analysis_calls``, ``turn_lane_<lane>``,
``turn_analysis`` / ``turn_phases`` as JSON text; None values and ``guidance_ids`` omitted),
which :meth:`memlab.frames.Frames.turns` reads and :func:`turn_trace` decodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from memlab.analysis import AnalysisMode, TurnPort, TurnState, analyze_turn
from memlab.retrievers import Completion, RetrievalScope, SearchType
from memlab.session import HISTORY_LAST_N, ServedGuidance, SessionManager

if TYPE_CHECKING:
    from memlab.llm import LLMClient
    from memlab.merge import MergePolicy
    from memlab.usage import UsageRecorder

__all__ = ["SessionTurn", "TurnResult", "TurnRunner", "turn_metadata", "turn_trace"]

logger = logging.getLogger("memlab.turn")

_T = TypeVar("_T")
_OPTIONAL_FACTS = ("search_type", "usage", "fallback_reason", "effective_query", "rewrite", "analysis_error", "lane_error")
_LANES = ("raw", "rewrite", "merged")


@dataclass
class TurnResult:
    """One finished turn: the stored answer, the completion (None for a gated turn), the qa id, the record."""

    text: str
    completion: Completion | None
    qa_id: str | None
    record: dict[str, Any]


def turn_metadata(record: dict[str, Any]) -> dict[str, Any]:
    """The record flattened for ``memify_metadata`` (``turn_<name>``; None values omitted)."""
    metadata = {
        "turn_source": record["source"],
        "turn_mode": record["mode"],
        "turn_requested_mode": record["requested_mode"],
        "turn_answered": record["answered"],
        "turn_answer_calls": record["llm_calls"]["answer"],
        "turn_analysis_calls": record["llm_calls"]["analysis"],
        "turn_tokens_in": record["tokens_in"],
        "turn_tokens_out": record["tokens_out"],
        "turn_latency_ms": record["latency_ms"],
    }
    metadata.update({f"turn_{name}": record[name] for name in _OPTIONAL_FACTS if record.get(name)})
    if record.get("history_ids"):
        metadata["turn_history_ids"] = list(record["history_ids"])
    for lane, ids in (record.get("lanes") or {}).items():
        if ids is not None:
            metadata[f"turn_lane_{lane}"] = list(ids)
    for name in ("analysis", "phases"):
        if record.get(name):
            metadata[f"turn_{name}"] = json.dumps(record[name], separators=(",", ":"))
    return metadata


def turn_trace(memify_metadata: dict[str, Any] | None) -> dict[str, Any]:
    """A stored turn's ``lanes``, ``analysis`` and ``phases`` read back from its ``memify_metadata``.

    (``memify_metadata`` values are bool / int / str / list[str], so :func:`turn_metadata`
    keeps the lanes as ``turn_lane_<lane>`` lists and the analysis and phases as JSON
    text.) Missing facts read as None (``lanes``, ``analysis``) and ``[]`` (``phases``).
    """
    meta = memify_metadata or {}
    lanes = {lane: list(meta[f"turn_lane_{lane}"]) if f"turn_lane_{lane}" in meta else None for lane in _LANES}
    return {
        "lanes": lanes if any(ids is not None for ids in lanes.values()) else None,
        "analysis": json.loads(str(meta["turn_analysis"])) if "turn_analysis" in meta else None,
        "phases": json.loads(str(meta["turn_phases"])) if "turn_phases" in meta else [],
    }


def _single_dataset(scope: RetrievalScope) -> Any:
    """The dataset a turn answers from, when it searches exactly one (recorded as the session's dataset), else None."""
    return scope.dataset_ids[0] if len(scope.dataset_ids) == 1 else None


class SessionTurn(TurnPort):
    """The I/O of one turn (see :class:`~memlab.analysis.TurnPort`), done through its runner's collaborators."""

    def __init__(
        self,
        runner: "TurnRunner",
        query: str,
        retriever: Any,
        scope: RetrievalScope,
        *,
        user_id: str,
        session_id: str,
        mode: str,
        requested_mode: str,
        fallback_reason: str | None,
        source: str = "search",
        search_type: SearchType | None = None,
        response_model: Any = None,
    ) -> None:
        self.manager = runner.manager
        self.llm = runner.llm
        self.merge = runner.merge
        self.query = query
        self.retriever = retriever
        self.scope = scope
        self.user_id = user_id
        self.session_id = session_id
        self.response_model = response_model
        self.session_available = self.manager.available
        self.started = time.perf_counter()
        self._history_turns: list[Any] | None = None
        self.record: dict[str, Any] = {
            "source": source,
            "search_type": search_type.value if search_type is not None else None,
            "mode": mode,
            "requested_mode": requested_mode,
            "fallback_reason": fallback_reason,
            "llm_calls": {"answer": 0, "analysis": 0},
            "tokens_in": 0,
            "tokens_out": 0,
            "latency_ms": None,
            "effective_query": None,
            "rewrite": None,
            "analysis_error": None,
            "lane_error": None,
            "answered": None,
            "guidance_ids": [],
            "history_ids": [],
            "lanes": None,
            "analysis": None,
            "phases": [],
            "usage": None,
        }

    @contextlib.contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a step of the turn into ``record["phases"]``, kept in start order (recorded even when the step fails)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            ended = time.perf_counter()
            phases = self.record["phases"]
            phases.append({"phase": name, "start_ms": round((started - self.started) * 1000, 3), "ms": round((ended - started) * 1000, 3)})
            phases.sort(key=lambda phase: phase["start_ms"])  # in start order, though concurrent steps end in any order

    async def _timed(self, name: str, step: Awaitable[_T]) -> _T:
        with self._phase(name):
            return await step

    def note(self, **facts: Any) -> None:
        unknown = set(facts) - set(self.record)
        if unknown:
            raise ValueError(f"unknown turn facts {sorted(unknown)}")
        self.record.update(facts)

    def _count(self, kind: str, calls: int, tokens_in: int, tokens_out: int) -> None:
        self.record["llm_calls"][kind] += calls
        self.record["tokens_in"] += tokens_in
        self.record["tokens_out"] += tokens_out

    async def load(self) -> TurnState:
        """Also keeps the history turns it reads for :meth:`answer` (no turn is stored in between)."""
        if not self.session_available:
            return TurnState()
        with self._phase("load"):
            manager = self.manager
            self._history_turns = await manager.get_session(self.user_id, last_n=HISTORY_LAST_N, session_id=self.session_id)
            state = TurnState(self._history_turns[-2:])
            previous = state.previous
            if previous is not None and previous.used_session_context_ids:
                wanted = set(previous.used_session_context_ids)
                state.guidance_entries = await manager.guidance.load(self.user_id, self.session_id)
                state.served = [entry for entry in state.guidance_entries if entry.id in wanted]
        return state

    async def analyze(self, state: TurnState) -> Any:
        self._count("analysis", 1, 0, 0)  # counted when made, even if it then fails
        result = await self._timed("analysis", analyze_turn(self.llm, self.query, state.previous, state.served))
        self._count("analysis", 0, result.tokens_in, result.tokens_out)
        self.note(analysis=result.analysis.model_dump(mode="json"))
        return result.analysis

    async def apply(self, analysis: Any, state: TurnState) -> None:
        previous = state.previous
        update = self.manager.guidance.update(
            self.user_id,
            self.session_id,
            analysis,
            message=self.query,
            previous=previous,
            served_ids=list(previous.used_session_context_ids or []) if previous is not None else [],
        )
        await self._timed("apply", update)

    async def guidance(self, query: str, entries: list[Any] | None = None) -> ServedGuidance | None:
        if not self.session_available:
            return None
        return await self._timed("guidance", self.manager.guidance.serve(self.user_id, self.session_id, query, entries=entries))

    async def _history(self) -> str:
        """The answer's conversation history: from the turns :meth:`load` read, else read now."""
        manager = self.manager
        turns: list[Any] | None = self._history_turns
        if turns is None:
            read: list[Any] = await self._timed("history", manager.get_session(self.user_id, last_n=HISTORY_LAST_N, session_id=self.session_id))
            turns = self._history_turns = read
        self.record["history_ids"] = [turn.qa_id for turn in turns]
        return manager.format_entries(turns, include_context=False)

    async def answer(self, query: str, guidance: Any, *, rewrite: str | None = None) -> Completion:
        history = await self._history()
        block = guidance.block if guidance is not None else ""
        scope = dataclasses.replace(self.scope, history="\n\n".join(part for part in (block, history) if part))
        if rewrite is None:
            completion = await self._timed("answer", self.retriever.get_completion(query, scope, response_model=self.response_model))
            context_ids = [item.id for item in completion.context]
            self.note(lanes={"raw": context_ids, "rewrite": None, "merged": context_ids})
        else:
            completion = await self._answer_dual(query, rewrite, scope)
        usage = completion.usage
        self._count("answer", usage["llm_calls"], usage["tokens_in"], usage["tokens_out"])
        return completion

    async def _answer_dual(self, query: str, rewrite: str, scope: RetrievalScope) -> Completion:
        """Both lanes at once; a failed lane is dropped, both failing raises the raw lane's error (SPEC §6.3)."""
        retriever = self.retriever
        raw: Any
        rewritten: Any
        raw, rewritten = await asyncio.gather(
            self._timed("retrieve_raw", retriever.retrieve_lane(query, scope)),
            self._timed("retrieve_rewrite", retriever.retrieve_lane(rewrite, scope)),
            return_exceptions=True,
        )
        for outcome in (raw, rewritten):
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
        if isinstance(raw, Exception):
            if isinstance(rewritten, Exception):
                raise raw
            logger.warning("raw retrieval lane failed, using the rewrite lane: %s: %s", type(raw).__name__, raw)
            self.note(lane_error=f"raw: {type(raw).__name__}: {raw}")
            raw = None
        elif isinstance(rewritten, Exception):
            logger.warning("rewrite retrieval lane failed, using the raw lane: %s: %s", type(rewritten).__name__, rewritten)
            self.note(lane_error=f"rewrite: {type(rewritten).__name__}: {rewritten}")
            rewritten = None
        with self._phase("merge"):
            merged = retriever.merge_lanes(raw, rewritten, self.merge, scope.top_k)
        self.note(
            lanes={
                "raw": retriever.lane_ids(raw) if raw is not None else None,
                "rewrite": retriever.lane_ids(rewritten) if rewritten is not None else None,
                "merged": retriever.lane_ids(merged),
            }
        )
        return await self._timed("answer", retriever.answer_from(query, merged, scope, response_model=self.response_model))

    def _finish(self, answered: bool) -> None:
        self.note(answered=answered, latency_ms=round((time.perf_counter() - self.started) * 1000))

    async def commit(self, completion: Completion, guidance: Any) -> TurnResult:
        self._finish(True)
        ids = list(guidance.ids) if guidance is not None else []
        qa_id = await self.manager.add_qa(
            self.user_id,
            question=self.query,
            answer=completion.text,
            context="\n".join(item.text for item in completion.context),
            used_graph_element_ids={"node_ids": completion.used_node_ids, "edge_ids": completion.used_edge_ids},
            used_session_context_ids=ids or None,
            memify_metadata=turn_metadata(self.record),
            session_id=self.session_id,
            dataset_id=_single_dataset(self.scope),
            record_activity=False,
        )
        self.record["guidance_ids"] = ids
        return TurnResult(completion.text, completion, qa_id, self.record)

    async def acknowledge(self, text: str) -> TurnResult:
        self._finish(False)
        qa_id = await self.manager.add_qa(
            self.user_id,
            question=self.query,
            answer=text,
            memify_metadata=turn_metadata(self.record),
            session_id=self.session_id,
            dataset_id=_single_dataset(self.scope),
            record_activity=False,
        )
        self.record["guidance_ids"] = []
        return TurnResult(text, None, qa_id, self.record)


class TurnRunner:
    """Runs session turns (see the module docstring) with the collaborators it is given."""

    def __init__(
        self, manager: SessionManager, analysis: AnalysisMode, merge: "MergePolicy", llm: "LLMClient", usage: "UsageRecorder | None" = None
    ) -> None:
        self.manager = manager
        self.analysis = analysis
        self.merge = merge
        self.llm = llm
        #: records each turn's LLM and embedding calls as the session's usage (None: not recorded)
        self.usage = usage

    def choose(self, search_type: SearchType, retriever: Any, *, batch: bool) -> tuple[AnalysisMode, str | None]:
        """The mode a turn runs and why it fell back (None when it did not)."""
        requested = self.analysis
        fallback = requested.fallback()
        if fallback is requested:
            return requested, None
        if search_type is SearchType.FEELING_LUCKY:
            reason = "feeling_lucky"
        elif batch:
            reason = "batch"
        elif not self.manager.available:
            reason = "no_session"
        elif not retriever.runs_concurrently():
            reason = "retriever"
        else:
            return requested, None
        return fallback, reason

    async def run(
        self,
        query: str,
        search_type: SearchType,
        retriever: Any,
        scope: RetrievalScope,
        *,
        user_id: str,
        session_id: str,
        batch: bool = False,
        source: str = "search",
        response_model: Any = None,
    ) -> TurnResult:
        """Run one turn of ``query`` in the session, under its turn lock.

        ``source`` names the entry point (``"search"`` or ``"recall"``: the same turn
        either way); ``response_model`` is passed to the answer call.
        """
        mode, reason = self.choose(search_type, retriever, batch=batch)
        recorder = self.usage
        async with self.manager.turn_lock(user_id, session_id):
            port = SessionTurn(
                self,
                query,
                retriever,
                scope,
                user_id=user_id,
                session_id=session_id,
                mode=mode.name,
                requested_mode=self.analysis.name,
                fallback_reason=reason,
                source=source,
                search_type=search_type,
                response_model=response_model,
            )
            dataset = _single_dataset(scope)
            metering = recorder.metered(user_id, session_id, dataset) if recorder is not None else contextlib.nullcontext(None)
            deferred = False
            try:
                async with metering as metered:
                    tracked = metered is not None and metered.outcome != "off"
                    if not tracked:  # known before the turn is stored
                        port.note(usage="off")
                    # before retrieval (memlab.provenance): the session and what it reads are on record before anything is
                    # read. When they already are, nothing is written now: the usage write at the end moves the session's
                    # activity in its own transaction (one metadata write per turn)
                    deferred = not await self.manager.record_activity(user_id, session_id, dataset, read=scope.dataset_ids, only_new=tracked)
                    result = await mode.run(port)
            finally:
                if deferred and (metered is None or metered.outcome not in ("recorded", "post_end")):  # the usage write did not touch it
                    await self.manager.record_activity(user_id, session_id, dataset, read=scope.dataset_ids)
            if metered is not None and metered.outcome != "off":
                result.record["usage"] = metered.outcome
                if metered.outcome in ("post_end", "failed") and result.qa_id is not None:  # known only now: said on the stored turn
                    await self.manager.update_qa(user_id, result.qa_id, session_id=session_id, memify_metadata={"turn_usage": metered.outcome})
        return result
