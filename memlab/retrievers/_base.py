"""The ``Retriever`` contract: one class per :class:`SearchType`.

A retriever reads permanent memory (a :class:`~memlab.graph.PermanentMemory`)
over one or more datasets and returns ranked :class:`SearchResultItem` s.
Completion retrievers additionally build a prompt from that context and call
the LLM layer (:class:`~memlab.llm.LLMClient`).

Contract (every retriever, checked by ``tests/retrievers``):

* ``await get_context(query, scope)`` returns at most ``scope.top_k`` items,
  best first, each with a stable ``id`` (the graph element id: same memory,
  same query → same ids in the same order) and a distance ``score`` (lower is
  better, ``>= 0``). An empty memory or a blank query gives ``[]``.
* ``await get_completion(query, scope, response_model=None)`` (completion
  retrievers only, ``completes`` True) returns a :class:`Completion`: the
  answer text, the validated ``response_model`` instance when one was given,
  the context it used, the node / edge ids of the graph elements it actually
  put in the prompt, and the LLM usage of the call(s).
* ``scope.distinct="data_id"`` asks for one result per source document: a
  retriever that declares ``distinct_sources`` (``CHUNKS``, ``SUMMARIES``,
  ``CHUNKS_LEXICAL``) then returns the best item of each document and skips
  every later item supported by a document already shown, still filling up to
  ``top_k`` from further down the ranking (:func:`one_per_source`); other
  retrievers ignore it.
* Retrievers hold no state between calls; they are safe to share.
"""

from __future__ import annotations

import abc
import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from memlab.exceptions import ValidationError
from memlab.retrievers._types import SearchType

__all__ = [
    "ANSWER_INSTRUCTIONS",
    "Completion",
    "DISTINCT_KEYS",
    "NEUTRAL_WEIGHT",
    "RetrievalScope",
    "Retriever",
    "SearchResultItem",
    "add_usage",
    "answer",
    "best_per_id",
    "context_lines",
    "dataset_graphs",
    "element_item",
    "has_element_item",
    "vector_hits",
    "check_distinct",
    "feedback_blend",
    "feedback_ranked",
    "no_usage",
    "one_per_source",
    "vector_items",
]

#: the values ``RetrievalScope.distinct`` (``recall(distinct=...)``) accepts besides None
DISTINCT_KEYS = ("data_id",)


def check_distinct(distinct: Any) -> str | None:
    """``distinct`` when it is None or one of :data:`DISTINCT_KEYS`; :class:`~memlab.ValidationError` otherwise."""
    if distinct is not None and (not isinstance(distinct, str) or distinct not in DISTINCT_KEYS):
        raise ValidationError(f"distinct must be None or one of {', '.join(map(repr, DISTINCT_KEYS))}, got {distinct!r}")
    return distinct

#: system instructions of a grounded answer
ANSWER_INSTRUCTIONS = (
    "Answer the question using only the context. Be brief. "
    "If the context does not contain the answer, say that you don't know."
)


class SearchResultItem(BaseModel):
    """One retrieved element.

    ``kind``: ``chunk``, ``summary``, ``entity``, ``triplet`` (a relationship edge)
    or ``document``. ``data_ids`` are the documents supporting the element;
    ``node_ids`` / ``edge_ids`` the graph elements it stands for (a triplet: its
    edge and both endpoints).
    """

    id: str
    kind: str
    text: str
    score: float
    dataset_id: uuid.UUID
    data_ids: list[str] = Field(default_factory=list)
    node_ids: list[str] = Field(default_factory=list)
    edge_ids: list[str] = Field(default_factory=list)
    raw: dict[str, Any] = Field(default_factory=dict)


def no_usage() -> dict[str, int]:
    return {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0}


def add_usage(usage: dict[str, int], result: Any) -> None:
    """Count one :class:`~memlab.llm.LLMResult` into ``usage``."""
    usage["llm_calls"] += 1
    usage["tokens_in"] += result.tokens_in
    usage["tokens_out"] += result.tokens_out


@dataclass
class Completion:
    """What a completion retriever answered, from which context, at what LLM cost."""

    text: str
    context: list[SearchResultItem]
    structured: Any = None
    used_node_ids: list[str] = field(default_factory=list)
    used_edge_ids: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=no_usage)


@dataclass
class RetrievalScope:
    """Where and how much to retrieve.

    ``memory`` is the stack's ``PermanentMemory`` (``await memory.graph(id)``,
    ``await memory.vectors(id)``, ``memory.embedder``), or the view of it a search call
    reads through (:meth:`~memlab.graph.PermanentMemory.pinned`: one snapshot check per
    dataset per call); ``llm`` the stack's
    ``LLMClient``; ``history`` the formatted session history a completion
    prompt should include ("" for none); ``system_prompt`` replaces the
    instructions of the answer call (None: each retriever's own); ``distinct`` ``"data_id"`` asks the
    retrievers that declare ``distinct_sources`` for one result per source
    document (None: every item on its own rank).
    """

    memory: Any
    dataset_ids: Sequence[uuid.UUID]
    top_k: int
    llm: Any
    history: str = ""
    system_prompt: str | None = None
    #: how much feedback weights move graph ranking (0: off, nothing read); see :func:`feedback_ranked`
    feedback_influence: float = 0.0
    #: reads the stored weights of element ids (None: no weights)
    feedback_weights: "Callable[[Iterable[str]], Awaitable[dict[str, float]]] | None" = None
    #: the retriever of a search type, for retrievers that delegate (FEELING_LUCKY); None: not available
    retrievers: "Callable[[SearchType], Retriever] | None" = None
    distinct: str | None = None
    _embedded: dict[str, asyncio.Future] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        check_distinct(self.distinct)

    async def embed(self, text: str) -> Any:
        """The query vector of ``text``, embedded once per scope; concurrent first calls share it (a failed one is redone)."""
        pending = self._embedded.get(text)
        if pending is None or (pending.done() and (pending.cancelled() or pending.exception() is not None)):
            pending = self._embedded[text] = asyncio.ensure_future(self.memory.embedder.embed([text]))
        return (await asyncio.shield(pending))[0]


class Retriever(abc.ABC):
    """Base of every retriever. Subclasses set ``search_type`` and, for completion types, ``completes``.

    Capabilities are declared here, on the class:

    * ``completes``: :meth:`get_completion` answers (completion types);
    * ``concurrent_turns``: a session turn may run in concurrent mode with this
      retriever (SPEC §6.1). It counts only on the class that sets it
      (:meth:`runs_concurrently`): a subclass falls back to sequential unless it
      declares it again, the seed's "exact class" rule;
    * ``hybrid_retry_when_empty``: a *routed* query of this type that finds nothing
      is retried as ``HYBRID_COMPLETION`` (lexical and coding-rules types);
    * ``skill_gate``: recall's skill gate may run beside this type (not for the
      skills lookup itself, nor for agentic completion, which plans its own);
    * ``distinct_sources``: honours ``scope.distinct="data_id"`` (one item per
      source document, :func:`one_per_source`);
    * the lane protocol of a dual-query turn: :meth:`retrieve_lane` per query,
      :meth:`merge_lanes`, :meth:`answer_from`, :meth:`lane_ids`. The defaults treat a
      lane as the :meth:`get_context` list; a retriever whose context has another shape
      (hybrid sections) overrides all four.
    """

    search_type: ClassVar[SearchType]
    completes: ClassVar[bool] = False
    concurrent_turns: ClassVar[bool] = False
    hybrid_retry_when_empty: ClassVar[bool] = False
    skill_gate: ClassVar[bool] = True
    distinct_sources: ClassVar[bool] = False

    @classmethod
    def runs_concurrently(cls) -> bool:
        """True when this exact class declares ``concurrent_turns`` (inheriting it does not count)."""
        return bool(cls.__dict__.get("concurrent_turns", False))

    async def retrieve_lane(self, query: str, scope: RetrievalScope) -> Any:
        """The retrieved context of one query lane: :meth:`get_context`."""
        return await self.get_context(query, scope)

    def merge_lanes(self, raw: Any, rewrite: Any, policy: Any, limit: int) -> Any:
        """The raw and rewrite lanes (None: failed or absent) merged by ``policy`` under ``limit``."""
        return policy.merge(raw, rewrite, limit)

    def lane_ids(self, lane: Any) -> list[str]:
        """The element ids of a lane (or a merged lane), best first: what a turn record keeps of it."""
        return [item.id for item in lane]

    async def answer_from(self, query: str, lane: Any, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        """One answer call for ``query`` over a (merged) lane."""
        return await answer(query, lane, scope, response_model=response_model)

    @abc.abstractmethod
    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        """The ranked context items for ``query`` (at most ``scope.top_k``)."""

    async def get_completion(self, query: str, scope: RetrievalScope, *, response_model: type[BaseModel] | None = None) -> Completion:
        """Answer ``query`` from :meth:`get_context` (completion retrievers override this)."""
        raise NotImplementedError(f"{type(self).__name__} ({self.search_type.value}) retrieves only; it does not answer")


def context_lines(items: Iterable[SearchResultItem]) -> list[str]:
    """One prompt line per item: its text with newlines as spaces."""
    return [item.text.replace("\n", " ") for item in items]


#: the feedback weight of a graph element no rated turn has used
NEUTRAL_WEIGHT = 0.5


def feedback_blend(distance: float, weight: float, influence: float) -> float:
    """A distance in [0, 2] blended with a feedback weight in [0, 1]: ``2 * ((1 - f) * d / 2 + f * (1 - w))``."""
    return 2 * ((1 - influence) * min(max(distance, 0.0), 2.0) / 2 + influence * (1 - weight))


async def feedback_ranked(items: Sequence[SearchResultItem], scope: RetrievalScope) -> list[SearchResultItem]:
    """``items`` re-scored by :func:`feedback_blend` with the mean weight of each item's nodes and edges, re-sorted.

    Unchanged (and no weight read) when ``scope.feedback_influence`` is 0 or there is no weight reader.
    """
    influence, read = scope.feedback_influence, scope.feedback_weights
    if influence <= 0 or read is None or not items:
        return list(items)
    weights = await read({element for item in items for element in (*item.node_ids, *item.edge_ids)})

    def weight(item: SearchResultItem) -> float:
        elements = [*item.node_ids, *item.edge_ids]
        return sum(weights.get(element, NEUTRAL_WEIGHT) for element in elements) / len(elements) if elements else NEUTRAL_WEIGHT

    rescored = [item.model_copy(update={"score": feedback_blend(item.score, weight(item), influence)}) for item in items]
    return sorted(rescored, key=lambda item: item.score)


def best_per_id(items: Iterable[SearchResultItem]) -> list[SearchResultItem]:
    """One item per id (the first with its lowest score), sorted by score; ties keep the order ids first appeared in."""
    best: dict[str, SearchResultItem] = {}
    for item in items:
        if item.id not in best or item.score < best[item.id].score:
            best[item.id] = item
    return sorted(best.values(), key=lambda item: item.score)


async def dataset_graphs(scope: RetrievalScope, items: Iterable[SearchResultItem]) -> dict[uuid.UUID, Any]:
    """The graph of each dataset the ``items`` come from, read once each."""
    return {dataset_id: await scope.memory.graph(dataset_id) for dataset_id in dict.fromkeys(item.dataset_id for item in items)}


def element_item(graph: Any, dataset_id: uuid.UUID, element_id: str, score: float, **raw: Any) -> SearchResultItem | None:
    """The :class:`SearchResultItem` of a graph node or edge (None when the graph no longer has it)."""
    fields = _element_fields(graph, element_id)
    if fields is None:
        return None
    kind, text, data_ids, node_ids, edge_ids, base = fields
    return SearchResultItem(  # pydantic copies the lists: items never share them with the memo
        id=element_id,
        kind=kind,
        text=text,
        score=max(0.0, float(score)),
        dataset_id=dataset_id,
        data_ids=data_ids,
        node_ids=node_ids,
        edge_ids=edge_ids,
        raw={**base, **raw},
    )


def has_element_item(graph: Any, element_id: str) -> bool:
    """True when :func:`element_item` would return an item for ``element_id`` (the graph has it)."""
    return _element_fields(graph, element_id) is not None


_ElementFields = tuple[str, str, list[str], list[str], list[str], dict[str, Any]]


def _element_fields(graph: Any, element_id: str) -> _ElementFields | None:
    """What :func:`element_item` reads of an element, read from the graph once per element until the graph changes
    (:meth:`~memlab.graph.KnowledgeGraph.memo`; a graph without ``memo`` is read every time)."""
    memo: dict[str, _ElementFields | None] | None = graph.memo("retrieval.element_fields", _empty_memo) if hasattr(graph, "memo") else None
    if memo is not None and element_id in memo:
        return memo[element_id]
    fields: _ElementFields | None = None
    node = graph.node(element_id)
    if node is not None:
        fields = (node["type"], node.get("text") or node["name"], sorted(node["supporters"]), [element_id], [], {"name": node["name"]})
    elif (edge := graph.edge(element_id)) is not None:
        text = edge.get("text") or f"{edge['source']} {edge['relation']} {edge['target']}"
        fields = ("triplet", text, sorted(edge["supporters"]), [edge["source"], edge["target"]], [element_id], {"relation": edge["relation"]})
    if memo is not None:
        memo[element_id] = fields
    return fields


def _empty_memo(graph: Any) -> dict[str, Any]:
    return {}


def one_per_source(items: Iterable[SearchResultItem], limit: int | None = None) -> list[SearchResultItem]:
    """``items`` in their order, each source document shown once (``distinct="data_id"``).

    An item is skipped when any of its ``data_ids`` was already shown by an earlier
    item (so no document appears twice, even through an element several documents
    support); an item without ``data_ids`` is kept. At most ``limit`` items (None: all).
    """
    shown: set[str] = set()
    kept: list[SearchResultItem] = []
    for item in items:
        if limit is not None and len(kept) >= limit:
            break
        if shown.intersection(item.data_ids):
            continue
        shown.update(item.data_ids)
        kept.append(item)
    return kept


#: how many times ``limit`` a distinct vector search fetches first (then 4x more each round, up to the whole collection)
_DISTINCT_OVERFETCH = 4


async def vector_items(
    query: str, scope: RetrievalScope, collection: str, *, limit: int | None = None, distinct: str | None = None
) -> list[SearchResultItem]:
    """The ``limit`` (default ``scope.top_k``) elements of ``collection`` nearest ``query`` over every dataset of the scope.

    ``distinct="data_id"``: the nearest element of each source document (:func:`one_per_source`);
    each dataset's search fetches more neighbours until ``limit`` documents are found or
    the collection is exhausted.
    """
    if distinct is None:
        hits = await vector_hits(query, scope, collection, limit=limit)
        return [item for score, dataset_id, element_id, graph in hits if (item := element_item(graph, dataset_id, element_id, score)) is not None]
    limit = scope.top_k if limit is None else limit
    items: list[SearchResultItem] = []
    for dataset_id, graph, index, vector in await _searchable(query, scope, collection, limit):
        size = len(index)
        fetch = min(size, limit * _DISTINCT_OVERFETCH)
        while True:
            found = [
                item
                for element_id, distance in index.search(vector, fetch)
                if (item := element_item(graph, dataset_id, element_id, distance)) is not None
            ]
            found = one_per_source(found, limit)
            if len(found) >= limit or fetch >= size:
                break
            fetch = min(size, fetch * _DISTINCT_OVERFETCH)
        items.extend(found)
    items.sort(key=lambda item: item.score)
    return one_per_source(items, limit)


async def vector_hits(query: str, scope: RetrievalScope, collection: str, *, limit: int | None = None) -> list[tuple[float, uuid.UUID, str, Any]]:
    """What :func:`vector_items` (without ``distinct``) returns, as ``(score, dataset_id, element_id, graph)`` without
    building the items: the same elements in the same order, each one the graph has (:func:`element_item` of it is not None)."""
    limit = scope.top_k if limit is None else limit
    hits: list[tuple[float, uuid.UUID, str, Any]] = []
    for dataset_id, graph, index, vector in await _searchable(query, scope, collection, limit):
        hits.extend(
            (max(0.0, float(distance)), dataset_id, element_id, graph)  # the score element_item gives it
            for element_id, distance in index.search(vector, limit)
            if has_element_item(graph, element_id)
        )
    hits.sort(key=lambda hit: hit[0])
    return hits[:limit]


async def _searchable(query: str, scope: RetrievalScope, collection: str, limit: int) -> list[tuple[uuid.UUID, Any, Any, Any]]:
    """``(dataset_id, graph, index, query vector)`` of each dataset of the scope whose ``collection`` holds vectors;
    none for a blank query or a ``limit`` below 1 (the query is embedded once, on the first such dataset)."""
    if not query.strip() or limit < 1:
        return []
    found = []
    for dataset_id in scope.dataset_ids:
        vectors = await scope.memory.vectors(dataset_id)
        if collection not in vectors.names() or not len(vectors.collection(collection)):
            continue
        found.append((dataset_id, await scope.memory.graph(dataset_id), vectors.collection(collection), await scope.embed(query)))
    return found


async def answer(
    query: str,
    items: Sequence[SearchResultItem],
    scope: RetrievalScope,
    *,
    response_model: type[BaseModel] | None = None,
    instructions: str = ANSWER_INSTRUCTIONS,
    usage: dict[str, int] | None = None,
    lines: Sequence[str] | None = None,
) -> Completion:
    """One LLM call answering ``query`` from ``items`` (one context line each) and the scope's history.

    The instructions (``scope.system_prompt`` when the caller gave one) and the
    history go into the system message, the context and question into the
    user message (the offline provider's convention, an ordinary grounded prompt
    for real models). ``lines`` replaces the context lines when the caller
    rendered the context itself (sections, a summary); the completion's context
    and used ids stay those of ``items``. ``usage`` accumulates earlier calls of
    the same completion.
    """
    from memlab.llm import context_prompt

    system = (scope.system_prompt or instructions) + (f"\n\n{scope.history}" if scope.history else "")
    body = list(lines) if lines is not None else context_lines(items)
    messages = context_prompt(query, body, instructions=system)
    result = await scope.llm.complete(messages, response_model=response_model)
    usage = dict(usage) if usage is not None else no_usage()
    add_usage(usage, result)
    node_ids = list(dict.fromkeys(node for item in items for node in item.node_ids))
    edge_ids = list(dict.fromkeys(edge for item in items for edge in item.edge_ids))
    return Completion(result.text, list(items), result.structured, node_ids, edge_ids, usage)
