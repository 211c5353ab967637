"""The ``recall()`` and ``search()`` flows of a :class:`~memlab.MemoryStack` (SPEC §9).

recall: the scope gives ordered sources (:func:`memlab.retrievers.resolve_sources`);
sources run one after another and their results are concatenated:

* ``session``: the session's turns ranked by the manager's session retriever
  (``SESSION_RETRIEVER``; the default ``keyword`` is SPEC §9.2), each with
  ``matched_tokens`` and the retriever's ``score``; with short-circuit on, a
  non-empty session result skips every later source;
* ``graph``: the datasets the user may read (all of them, or ``datasets`` /
  ``dataset_ids``, each checked for read permission), the warm-up marker
  (SPEC §9.4), the search type (explicit, else routed, else hybrid) and its
  retriever; a routed ``CHUNKS_LEXICAL`` / ``CODING_RULES`` that finds nothing
  is retried as ``HYBRID_COMPLETION``; a completion type (not ``only_context``)
  runs as a session turn exactly as ``search()`` runs it (:mod:`memlab.flows.turn`:
  the analysis mode, history and guidance in the prompt, the rewrite lane, the turn
  lock, the stored turn with its record, usage), in ``session_id`` or, without one,
  the default session of the named dataset (else of the user's main_dataset); its
  result carries ``raw["turn"]``, ``raw["session_id"]`` and ``raw["qa_id"]``.
  Retrieval-only types store nothing (as upstream, whose graph lane is its search);
* ``session_context``: the session's usable guidance for the query, as the
  answer would be served it but read-only (nothing stamped), as one
  ``SessionContextRecallResponse`` (the rendered block and its entries); none
  when the session has no usable guidance;
* ``trace``: the session's agent trace steps (:meth:`~memlab.session.SessionManager.get_traces`)
  matched by keyword as the ``session`` source's ``keyword`` rule (SPEC §9.2) over
  ``origin_function``, ``status``, ``memory_query``, ``memory_context``,
  ``session_feedback``, ``error_message`` and the JSON of ``method_params`` /
  ``method_return_value``: score = shared query tokens, kept when > 0, best first,
  ties oldest first, ``top_k``; none for a query without tokens
  (:class:`~memlab.models.TraceRecallResponse`);
* ``tools``, ``code``: refused with a ``ValidationError`` before anything runs
  (memlab has no tool connections and no code graph; ``"all"`` never implies them).

Skills found by the skill gate (SPEC §9.5) are appended last, even when the
session short-circuit skipped the graph.

``distinct="data_id"`` (recall and search) asks for one result per source document
from the retrievers that return document pieces (``CHUNKS``, ``SUMMARIES``,
``CHUNKS_LEXICAL``: the best piece of each document, so one long document cannot
fill ``top_k``); other search types ignore it, and session turns are unique anyway.
A value other than None or ``"data_id"`` raises ``ValidationError``.

search: one retriever; a completion type runs a session turn through the
analysis mode (:mod:`memlab.flows.turn`): history (+ guidance) in the prompt, the turn
stored with the graph elements the answer used and its record (mode, LLM calls,
tokens), returned as ``raw["turn"]``. ``query_text`` may be a list of queries (a
batch): each runs as a sequential turn, in order, and the results are concatenated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memlab.config import RecallConfig
from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import SessionParameterValidationError, ValidationError
from memlab.flows.recall_options import RecallOptions
from memlab.flows.turn import TurnResult, TurnRunner
from memlab.flows.warmup import WarmupProbe
from memlab.models import (
    Dataset,
    GraphRecallResponse,
    RecallResponse,
    SessionContextRecallResponse,
    SessionRecallResponse,
    SkillRecallResponse,
    TraceRecallResponse,
)
from memlab.retrievers import (
    Completion,
    RetrievalScope,
    Retrievers,
    SearchResultItem,
    SearchType,
    check_distinct,
    no_usage,
    normalize_scope,
    parse_search_type,
    resolve_sources,
    route_query,
    should_search_skills,
)
from memlab.session import SessionManager, matched_tokens, tokenize
from memlab.users import Users
from memlab.validation import check_id, check_text

if TYPE_CHECKING:
    from memlab.graph import PermanentMemory

logger = logging.getLogger("memlab.recall")



def _check_top_k(top_k: Any) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValidationError(f"top_k must be an int >= 1, got {top_k!r}")
    return top_k


def _check_query(query_text: Any) -> str:
    return check_text("query_text", query_text)


def _check_names(name: str, values: Any) -> list[Any] | None:
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValidationError(f"{name} must be a list, got {values!r}")
    for value in values:
        if isinstance(value, str):
            check_text(f"{name} item", value)
    return list(values)


def _check_dataset_ids(values: Any) -> list[uuid.UUID] | None:
    """``dataset_ids`` as UUIDs: each a UUID or the string of one (names go in ``datasets``); ``ValidationError`` otherwise."""
    checked = _check_names("dataset_ids", values)
    if checked is None:
        return None
    ids: list[uuid.UUID] = []
    for value in checked:
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = uuid.UUID(value)
        if not isinstance(value, uuid.UUID):
            raise ValidationError(f"dataset_ids must be UUIDs (or their strings), got {value!r}; pass names as datasets")
        ids.append(value)
    return ids


def _check_session_id(session_id: Any) -> None:
    if session_id is not None:
        check_id("session_id", session_id, error=SessionParameterValidationError)


#: recall sources memlab does not implement -> why (refused, never answered with an empty list)
UNSERVED_SOURCES = {
    "tools": "memlab has no tool connections (cognee's tools scope runs text-to-SQL over registered databases)",
    "code": "memlab has no code graph (cognee's code scope queries a code graph built from repositories)",
}


def _refuse_unserved(sources: Sequence[str]) -> None:
    """A :class:`~memlab.exceptions.ValidationError` for the first source in :data:`UNSERVED_SOURCES`."""
    for source in sources:
        if source in UNSERVED_SOURCES:
            raise ValidationError(f"recall scope {source!r} is not served: {UNSERVED_SOURCES[source]}")


def _check_response_model(response_model: Any) -> type[BaseModel] | None:
    if response_model is not None and not (isinstance(response_model, type) and issubclass(response_model, BaseModel)):
        raise ValidationError(f"response_model must be a pydantic model class, got {response_model!r}")
    return response_model


def item_response(item: SearchResultItem, search_type: SearchType) -> GraphRecallResponse:
    """A retrieved item as a ``recall()`` result."""
    return GraphRecallResponse(
        kind=item.kind,
        text=item.text,
        id=item.id,
        score=item.score,
        search_type=search_type.value,
        dataset_id=item.dataset_id,
        raw={"data_ids": item.data_ids, "node_ids": item.node_ids, "edge_ids": item.edge_ids, **item.raw},
    )


def answer_response(completion: Completion, search_type: SearchType) -> GraphRecallResponse:
    """A completion as a ``recall()`` result: the answer, with what it was built from in ``raw``."""
    return GraphRecallResponse(
        kind="answer",
        text=completion.text,
        search_type=search_type.value,
        structured=completion.structured,
        raw={
            "used_node_ids": completion.used_node_ids,
            "used_edge_ids": completion.used_edge_ids,
            "context_ids": [item.id for item in completion.context],
            "context_texts": [item.text for item in completion.context],
            "usage": completion.usage,
        },
    )


@dataclass(frozen=True)
class _TurnAsk:
    """What a recall's graph lane needs to run a completion as a session turn."""

    acting: Any
    session_id: str | None
    named: bool
    response_model: type[BaseModel] | None


class RecallFlows:
    """recall() and search() over the collaborators they are given.

    ``memory`` returns the permanent memory (built on first use by its owner);
    ``retrievers`` gives each search type's retriever; ``turns`` runs completion
    turns; ``warmup`` is the warm-up probe; ``config`` the recall settings.
    """

    def __init__(
        self,
        *,
        users: Users,
        datasets: Datasets,
        sessions: SessionManager,
        memory: Callable[[], "PermanentMemory"],
        llm: Any,
        retrievers: Retrievers,
        turns: TurnRunner,
        warmup: WarmupProbe,
        config: RecallConfig,
        feedback_weights: "Callable[[Any], Awaitable[dict[str, float]]] | None" = None,
    ) -> None:
        self.users = users
        self.datasets = datasets
        self.sessions = sessions
        self.memory = memory
        self.llm = llm
        self.retrievers = retrievers
        self.turns = turns
        self.warmup = warmup
        self.config = config
        #: reads graph elements' feedback weights for ranking (None: no weights)
        self.feedback_weights = feedback_weights

    def _scope(
        self, targets: list[Dataset], top_k: int, distinct: str | None = None, *, system_prompt: str | None = None,
        feedback_influence: float | None = None,
    ) -> RetrievalScope:
        return RetrievalScope(  # one pinned view per call: each dataset's snapshot is checked once, not at every read
            self.memory().pinned(), [dataset.id for dataset in targets], top_k, self.llm, retrievers=self.retrievers.get, distinct=distinct,
            system_prompt=system_prompt,
            feedback_influence=self.config.feedback_influence if feedback_influence is None else feedback_influence,
            feedback_weights=self.feedback_weights,
        )

    # -- recall ------------------------------------------------------------------------
    async def recall(
        self,
        query_text: Any,
        query_type: Any,
        *,
        datasets: Any,
        dataset_ids: Any,
        top_k: Any,
        auto_route: bool,
        scope: Any,
        session_id: str | None,
        user: Any,
        only_context: bool,
        response_model: Any,
        distinct: Any = None,
        options: RecallOptions = RecallOptions(),
    ) -> list[RecallResponse]:
        query = _check_query(query_text)
        _check_session_id(session_id)
        top_k = _check_top_k(top_k)
        distinct = check_distinct(distinct)
        search_type = parse_search_type(query_type) if query_type is not None else None
        sources_asked = normalize_scope(scope)
        datasets = _check_names("datasets", datasets)
        dataset_ids = _check_dataset_ids(dataset_ids)
        response_model = _check_response_model(response_model)
        if response_model is not None and only_context:
            raise ValidationError("response_model needs an answer; it cannot be combined with only_context=True")
        if not query.strip():
            return []
        acting = await self.users.resolve(user)
        explicit = datasets is not None or dataset_ids is not None
        sources, short_circuit = resolve_sources(
            sources_asked, session_id=session_id, has_datasets=explicit, has_query_type=search_type is not None
        )
        _refuse_unserved(sources)
        targets = await self._targets(acting, datasets, dataset_ids) if "graph" in sources else []
        scope = self._scope(targets, top_k, distinct, system_prompt=options.system_prompt, feedback_influence=options.feedback_influence)
        skills = self._start_skill_gate(query, search_type, sources, targets, explicit, scope, only_context)
        results: list[RecallResponse] = []
        try:
            for source in sources:
                if source == "session":
                    hits = await self._session_hits(acting, query, session_id, top_k)
                    results.extend(hits)
                    if short_circuit and hits:
                        break
                elif source == "graph":
                    turn = _TurnAsk(acting, session_id, explicit, response_model)
                    found = await self._graph(
                        query, search_type, targets, scope, turn, auto_route=auto_route, only_context=only_context, sole=sources == ["graph"]
                    )
                    results.extend(found)
                elif source == "session_context":
                    results.extend(await self._session_context(acting, query, session_id, options.context_profile))
                elif source == "trace":
                    results.extend(await self._trace_hits(acting, query, session_id, top_k))
        finally:
            found_skills = await skills if skills is not None else []
        return results + found_skills

    async def _targets(self, acting: Any, datasets: list[Any] | None, dataset_ids: list[uuid.UUID] | None) -> list[Dataset]:
        """The datasets to search, each readable by ``acting`` (PermissionDeniedError otherwise)."""
        if datasets is None and dataset_ids is None:
            return await self.datasets.list(acting, "read")
        found: dict[uuid.UUID, Dataset] = {}
        for name in datasets or []:
            if not isinstance(name, str):
                raise ValidationError(f"datasets must be names (str), got {name!r}; pass ids as dataset_ids")
            dataset = await self.datasets.resolve(name, acting, "read")
            found.setdefault(dataset.id, dataset)
        for dataset_id in dataset_ids or []:
            dataset = await self.datasets.resolve(dataset_id, acting, "read")
            found.setdefault(dataset.id, dataset)
        return list(found.values())

    async def _session_hits(self, acting: Any, query: str, session_id: str | None, top_k: int) -> list[SessionRecallResponse]:
        manager = self.sessions
        session = await self._session_id(acting, session_id, None)
        hits = await manager.search(acting.id, query, session_id=session, top_k=top_k)
        tokens = tokenize(query)
        return [
            SessionRecallResponse(
                session_id=session,
                matched_tokens=matched_tokens(tokens, entry),
                score=float(score),
                **entry.model_dump(exclude={"memify_metadata"}),
            )
            for entry, score in hits
        ]

    async def _trace_hits(self, acting: Any, query: str, session_id: str | None, top_k: int) -> list[TraceRecallResponse]:
        """The session's trace steps sharing tokens with ``query``: most shared first, ties oldest first, at most ``top_k``."""
        tokens = tokenize(query)
        if not tokens:
            return []
        session = await self._session_id(acting, session_id, None)
        scored = [(len(tokens & tokenize(step.search_text())), step) for step in await self.sessions.get_traces(acting.id, session)]
        ranked = sorted((pair for pair in scored if pair[0] > 0), key=lambda pair: -pair[0])[:top_k]
        return [
            TraceRecallResponse(session_id=session, matched_tokens=count, score=float(count), **step.model_dump(exclude={"kind"}))
            for count, step in ranked
        ]

    async def _session_context(self, acting: Any, query: str, session_id: str | None, profile: str) -> list[SessionContextRecallResponse]:
        session = await self._session_id(acting, session_id, None)
        guidance = self.sessions.guidance
        entries = await guidance.load(str(acting.id), session)
        served = await guidance.serve(str(acting.id), session, query, entries=entries, stamp_served=False, profile=profile)
        if not served.ids:
            return []
        chosen = set(served.ids)
        return [
            SessionContextRecallResponse(
                session_id=session, content=served.block, context_profile=profile, entries=[e for e in entries if e.id in chosen]
            )
        ]

    async def _turn_session(self, acting: Any, session_id: str | None, targets: list[Dataset], named: bool) -> str:
        """The session a completion turn is stored in: ``session_id``, else the default session of the
        one named dataset searched (named datasets: the first), else of the user's main_dataset."""
        return await self._session_id(acting, session_id, targets[0] if named and targets else None)

    async def _session_id(self, acting: Any, session_id: str | None, dataset: Dataset | None) -> str:
        """``session_id``, else the dataset-scoped default session (``dataset``, else the user's main_dataset).

        ``session_id`` was checked where it entered (``recall()`` / ``search()``): it is used as is.
        """
        manager = self.sessions
        if session_id is not None:
            return session_id
        dataset = dataset or await self.datasets.get(MAIN_DATASET, acting)
        return manager.resolve_session_id(None, dataset.id if dataset else None)

    async def _graph(
        self,
        query: str,
        search_type: SearchType | None,
        targets: list[Dataset],
        scope: RetrievalScope,
        turn: "_TurnAsk",
        *,
        auto_route: bool,
        only_context: bool,
        sole: bool,
    ) -> list[RecallResponse]:
        if self.config.warmup_shortcircuit and not only_context:
            marker = await self.warmup.marker([dataset.id for dataset in targets])
            if marker is not None:
                return [marker] if sole else []
        if not targets:
            return []
        routed = False
        if search_type is None:
            if auto_route:
                decision = route_query(query)
                search_type, routed = decision.search_type, decision.rule != "default"
            else:
                search_type = SearchType.HYBRID_COMPLETION
        found = await self._run(search_type, query, targets, scope, turn, only_context=only_context)
        if not found and routed and self.retrievers.get(search_type).hybrid_retry_when_empty:
            logger.info("routed %s found nothing; retrying as %s", search_type.value, SearchType.HYBRID_COMPLETION.value)
            found = await self._run(SearchType.HYBRID_COMPLETION, query, targets, scope, turn, only_context=only_context)
        return found

    async def _run(
        self, search_type: SearchType, query: str, targets: list[Dataset], scope: RetrievalScope, turn: "_TurnAsk", *, only_context: bool
    ) -> list[RecallResponse]:
        """One search type's results: a completion runs as a session turn (as ``search()`` runs it), the rest retrieve."""
        retriever = self.retrievers.get(search_type)
        if retriever.completes and not only_context:
            session = await self._turn_session(turn.acting, turn.session_id, targets, turn.named)
            result = await self.turns.run(
                query, search_type, retriever, scope, user_id=str(turn.acting.id), session_id=session, source="recall",
                response_model=turn.response_model,
            )
            return [turn_response(result, search_type, session)]
        if turn.response_model is not None:
            raise ValidationError(f"response_model needs a completion search type; {search_type.value} only retrieves")
        return [item_response(item, search_type) for item in await retriever.get_context(query, scope)]

    def _start_skill_gate(
        self,
        query: str,
        search_type: SearchType | None,
        sources: list[str],
        targets: list[Dataset],
        explicit: bool,
        scope: RetrievalScope,
        only_context: bool,
    ) -> asyncio.Task | None:
        """The skill lookup over ``scope`` as a task, when the gate's conditions hold (SPEC §9.5); it never raises."""
        if (
            "graph" not in sources
            or only_context
            or (search_type is not None and not self.retrievers.get(search_type).skill_gate)
            or not self.config.skill_gate_enabled
            or not explicit
            or len(targets) != 1
            or not should_search_skills(query).fired
        ):
            return None

        async def lookup() -> list[SkillRecallResponse]:
            try:
                items = await self.retrievers.get(SearchType.SKILLS).get_context(query, scope)
            except Exception as exc:  # additive and fail-safe
                logger.warning("skill lookup failed, adding no skills: %s: %s", type(exc).__name__, exc)
                return []
            return [
                SkillRecallResponse(text=item.text, skill=str(item.raw.get("skill", item.text)), score=item.score, dataset_id=item.dataset_id)
                for item in items
            ]

        return asyncio.get_running_loop().create_task(lookup())

    # -- search ------------------------------------------------------------------------
    async def search(
        self,
        query_text: Any,
        query_type: Any,
        *,
        session_id: str | None,
        datasets: Any,
        dataset_ids: Any = None,
        top_k: Any,
        user: Any,
        only_context: bool,
        distinct: Any = None,
    ) -> list[RecallResponse]:
        batch = isinstance(query_text, Sequence) and not isinstance(query_text, str)
        queries = [_check_query(query) for query in query_text] if batch else [_check_query(query_text)]
        _check_session_id(session_id)
        top_k = _check_top_k(top_k)
        distinct = check_distinct(distinct)
        search_type = parse_search_type(query_type)
        datasets = _check_names("datasets", datasets)
        dataset_ids = _check_dataset_ids(dataset_ids)
        queries = [query for query in queries if query.strip()]
        if not queries:
            return []
        acting = await self.users.resolve(user)
        targets = await self._targets(acting, datasets, dataset_ids)
        retriever = self.retrievers.get(search_type)
        scope = self._scope(targets, top_k, distinct)
        results: list[RecallResponse] = []
        if not retriever.completes or only_context:  # retrieval only: no turn, no history read or written
            for query in queries:
                results.extend(item_response(item, search_type) for item in await retriever.get_context(query, scope))
            return results
        session = await self._turn_session(acting, session_id, targets, datasets is not None or dataset_ids is not None)
        for query in queries:  # a batch runs its queries as sequential turns, in order
            turn = await self.turns.run(query, search_type, retriever, scope, user_id=str(acting.id), session_id=session, batch=batch)
            results.append(turn_response(turn, search_type, session))
        return results


def turn_response(turn: TurnResult, search_type: SearchType, session: str) -> GraphRecallResponse:
    """A session turn as a ``search()`` result: the answer (or a gated turn's acknowledgement) with the turn record."""
    if turn.completion is not None:
        response = answer_response(turn.completion, search_type)
    else:
        response = GraphRecallResponse(
            kind="answer",
            text=turn.text,
            search_type=search_type.value,
            raw={"used_node_ids": [], "used_edge_ids": [], "context_ids": [], "usage": no_usage()},
        )
    response.raw.update({"session_id": session, "qa_id": turn.qa_id, "turn": turn.record})
    return response
