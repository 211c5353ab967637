"""LangGraph adapters: a ``BaseStore`` backed by memlab, and remember / recall tools for agents.

Needs ``pip install 'memlab[langgraph]'`` (langgraph, langchain-core)::

    from langgraph.graph import StateGraph
    from memlab.integrations.langgraph import MemlabStore, memlab_tools

    async with MemoryStack.from_config(cfg) as stack:
        store = MemlabStore(stack, index={"fields": ["text"]})   # semantic search through stack.embedder
        graph = builder.compile(store=store)
        tools = memlab_tools(stack)                               # remember(text), recall(query, top_k)

**Where items live.** Each namespace is one memlab session of the store's user (the
default user when ``user`` is None), id ``<prefix>:<sha256 of the namespace>``; each
item is a session-context entry of it (upserted by a hash of its key, holding the
namespace, key, value and timestamps); an indexed item's vectors are an entry of the
namespace's vector session (``<namespace session>:vectors``), so ``get`` and plain
searches never parse them. A catalog session
(``<prefix>:catalog``) lists the namespaces written, so ``list_namespaces`` and
prefix searches know where to look. Every memlab cache backend (``sqlite``,
``postgres``, ``redis``, ``fs``, ``memory``) therefore holds a store, and several
processes on a shared backend see one store.

**Cost.** A ``get`` reads its namespace's items (memlab reads a session's context
entries together) and a search reads every namespace under its prefix: measured on
SQLite with 1,000 items in one namespace, a ``get`` takes about 16 ms, a semantic search
about 0.2 s and a batch of 1,000 puts about 1 s (100 items: 1.2 ms, 20 ms). Namespaces
of thousands of items suit it; millions do not.

**TTL.** ``supports_ttl`` is False: per-item ``ttl`` on ``put`` raises
``NotImplementedError`` (LangGraph's own check), ``ttl=`` in the constructor is not
taken, and ``refresh_ttl`` is ignored. Items expire with their namespace's session,
under the stack's TTL policy: ``SESSION_TTL_SECONDS`` after the namespace's last write
(``sliding`` exact, ``lazy_slack`` within its slack; reads do not extend it). A store
meant to keep memories indefinitely runs on a stack with ``SESSION_TTL_SECONDS=0``
(policy ``none``).

**Semantics** (LangGraph's documented ``BaseStore`` contract, checked in
``tests/integrations/test_langgraph_store.py``): ``put`` upserts (``created_at`` kept,
``updated_at`` now) and ``value=None`` deletes; ``get`` of a missing key is None;
``search(prefix, query=..., filter=..., limit, offset)`` covers the namespaces that
start with ``prefix``; ``filter`` matches a field (a dotted path reaches nested ones)
by equality or with ``$eq $ne $gt $gte $lt $lte``; with a ``query`` and an ``index``
the items are ranked by cosine similarity of the query to the item's best-matching
field (``score``, higher is closer), items stored with ``index=False`` after them with
``score`` None; without a query the most recently updated come first.
``list_namespaces(prefix=, suffix=, max_depth=, limit=, offset=)`` matches ``"*"``
as any one label, truncates to ``max_depth`` and de-duplicates, sorted. In one
``batch`` every read sees the store as it was before the batch, and the batch's
writes are applied after them, the last write to a (namespace, key) winning; a batch
is not one transaction (a failure part way leaves the earlier writes).

**index.** ``{"fields": [...], "dims": N, "embed": ...}``, all optional: ``embed``
defaults to the stack's embedder (``stack.embedder``, the one memlab's vector search
uses) and may be anything LangGraph accepts (a LangChain ``Embeddings``, a sync or
async function of a list of texts); ``fields`` are JSON paths (LangGraph's syntax,
``"$"`` the whole value, the default); ``dims``, when given, is checked against the
vectors. ``put(..., index=[...])`` picks the fields of one item, ``index=False``
stores it unindexed. An ``embed`` string (a provider name) is not resolved here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

try:
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        validate_op_namespace,
    )
    from langgraph.store.base.embed import ensure_embeddings, get_text_at_path
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("memlab.integrations.langgraph needs langgraph: pip install 'memlab[langgraph]'") from exc

import numpy as np
from pydantic import BaseModel, Field

from memlab.exceptions import ValidationError
from memlab.integrations._bridge import StackBridge

__all__ = ["MemlabStore", "memlab_tools"]

#: ``kind`` of the context entries this store writes (items and catalog rows)
ITEM_KIND = "langgraph_store_item"
NAMESPACE_KIND = "langgraph_store_namespace"
VECTORS_KIND = "langgraph_store_vectors"

_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le,
}
_MISSING = object()


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()[:40]


def _field(value: Mapping[str, Any], path: str) -> Any:
    found: Any = value
    for part in path.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return _MISSING
        found = found[part]
    return found


def _matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """``value`` satisfies every condition of a LangGraph search ``filter``."""
    for path, wanted in (conditions or {}).items():
        found = _field(value, path)
        if isinstance(wanted, Mapping) and wanted and all(str(op).startswith("$") for op in wanted):
            for op, operand in wanted.items():
                compare = _OPERATORS.get(op)
                if compare is None:
                    raise ValidationError(f"unknown filter operator {op!r}; supported: {', '.join(_OPERATORS)}")
                if found is _MISSING:
                    return False
                try:
                    if not compare(found, operand):
                        return False
                except TypeError:  # an ordering between types that have none
                    return False
        elif found is _MISSING or found != wanted:
            return False
    return True


def _path_matches(namespace: tuple[str, ...], path: Sequence[str], *, suffix: bool) -> bool:
    if len(path) > len(namespace):
        return False
    part = namespace[len(namespace) - len(path):] if suffix else namespace[: len(path)]
    return all(want == "*" or want == have for want, have in zip(path, part))


def _best_cosine(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> float:
    """The highest cosine similarity of ``query`` to any of ``vectors`` (0 for zero vectors)."""
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    sims = np.divide(m @ q, norms, out=np.zeros(len(m)), where=norms > 0)
    return float(sims.max())


def _item(row: Mapping[str, Any], cls: type[Item] = Item, **extra: Any) -> Any:
    return cls(
        namespace=tuple(row["namespace"]),
        key=row["key"],
        value=row["value"],
        created_at=datetime.fromisoformat(row["created_at"]),
        updated_at=datetime.fromisoformat(row["updated_at"]),
        **extra,
    )


class MemlabStore(BaseStore):
    """LangGraph ``BaseStore`` whose items are memlab session-context entries (see the module docstring).

    ``stack``: an open :class:`~memlab.MemoryStack`. ``index``: semantic search
    (:class:`~langgraph.store.base.IndexConfig`; ``embed`` defaults to the stack's
    embedder). ``user``: whose sessions hold the store. ``prefix``: the session id
    prefix (two stores with different prefixes are independent). ``loop``: the stack's
    event loop, for the sync methods (default: the loop running here).
    """

    supports_ttl = False

    def __init__(
        self,
        stack: Any,
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        user: Any = None,
        prefix: str = "langgraph-store",
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not isinstance(prefix, str) or not prefix.strip() or ":" in prefix:
            raise ValidationError(f"prefix must be a non-blank str without ':', got {prefix!r}")
        self.stack = stack
        self.user = user
        self.prefix = prefix
        self.index_config: dict[str, Any] | None = dict(index) if index is not None else None
        self._fields: list[str] = list((self.index_config or {}).get("fields") or ["$"])
        self._embeddings: Any = None
        if self.index_config is not None and self.index_config.get("embed") is not None:
            if isinstance(self.index_config["embed"], str):
                raise ValidationError("index['embed'] as a provider string is not supported; pass an Embeddings or a function")
            self._embeddings = ensure_embeddings(self.index_config["embed"])
        self._bridge = StackBridge(loop)
        self._user_id: str | None = None

    def __repr__(self) -> str:
        return f"MemlabStore(prefix={self.prefix!r}, indexed={self.index_config is not None})"

    # -- memlab sessions ---------------------------------------------------------------

    def _session(self, namespace: Sequence[str]) -> str:
        return f"{self.prefix}:{_digest(list(namespace))}"

    def _vector_session(self, namespace: Sequence[str]) -> str:
        return f"{self._session(namespace)}:vectors"

    @property
    def _catalog(self) -> str:
        return f"{self.prefix}:catalog"

    async def _uid(self) -> str:
        if self._user_id is None:
            self._user_id, _ = await self.stack.session.resolve(self._catalog, self.user)
        return self._user_id

    async def _rows(self, namespace: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """The live items of ``namespace``: entry id -> stored row."""
        entries = await self.stack.session_manager.get_context_entries(await self._uid(), self._session(namespace))
        return {row["id"]: row for row in entries if row.get("kind") == ITEM_KIND and tuple(row.get("namespace", ())) == namespace}

    async def _namespaces(self) -> list[tuple[str, ...]]:
        """Every namespace ever written and not pruned (the catalog)."""
        entries = await self.stack.session_manager.get_context_entries(await self._uid(), self._catalog)
        return [tuple(row["namespace"]) for row in entries if row.get("kind") == NAMESPACE_KIND]

    # -- embeddings --------------------------------------------------------------------

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._embeddings is not None:
            vectors = [list(map(float, v)) for v in await self._embeddings.aembed_documents(texts)]
        else:
            vectors = [list(map(float, v)) for v in (await self.stack.embedder.embed(texts)).tolist()]
        dims = (self.index_config or {}).get("dims")
        if dims is not None and any(len(v) != dims for v in vectors):
            raise ValidationError(f"index['dims'] is {dims} but the embedder returned vectors of {len(vectors[0])}")
        return vectors

    def _texts(self, value: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
        texts: list[str] = []
        for path in fields:
            if path == "$":
                texts.append(json.dumps(value, ensure_ascii=False, sort_keys=True))
            else:
                texts.extend(text for text in get_text_at_path(value, path) if text)
        return texts

    # -- batch ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (reads first against the prior state, then the writes), blocking; see :meth:`abatch`."""
        batch = list(ops)
        return self._bridge.run(lambda: self._batch(batch), name="batch")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``: every read sees the store before the batch; writes follow, last per (namespace, key) wins."""
        batch = list(ops)
        return await self._bridge.arun(lambda: self._batch(batch))

    async def _batch(self, ops: list[Op]) -> list[Result]:
        for op in ops:
            validate_op_namespace(op)
        results: list[Result] = []
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                row = (await self._rows(tuple(op.namespace))).get(_digest(op.key))
                results.append(_item(row) if row is not None else None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list(op))
            elif isinstance(op, PutOp):
                writes[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise ValidationError(f"unknown store operation {type(op).__name__}")
        await self._apply(list(writes.values()))
        return results

    async def _apply(self, puts: list[PutOp]) -> None:
        if not puts:
            return
        user_id, manager = await self._uid(), self.stack.session_manager
        for op in puts:
            if op.value is not None and not isinstance(op.value, Mapping):
                raise ValidationError(f"a store value must be a dict, got {type(op.value).__name__}")
            if op.ttl is not None:
                raise NotImplementedError("MemlabStore does not support per-item TTL (items expire with memlab's session TTL)")
        to_embed: list[tuple[int, str]] = []  # (put index, text)
        for i, op in enumerate(puts):
            if op.value is not None and self.index_config is not None and op.index is not False:
                to_embed.extend((i, text) for text in self._texts(op.value, op.index or self._fields))
        vectors = await self._embed([text for _, text in to_embed])
        by_put: dict[int, list[list[float]]] = {}
        for (i, _), vector in zip(to_embed, vectors):
            by_put.setdefault(i, []).append(vector)
        now = self.stack.clock.now().isoformat()  # the stack's clock (a FakeClock in tests), as memlab's own stamps
        existing: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
        catalogued: set[tuple[str, ...]] = set()
        for i, op in enumerate(puts):
            namespace, entry_id = tuple(op.namespace), _digest(op.key)
            session = self._session(namespace)
            if op.value is None:  # the item, then its vectors (an orphan vector entry is never read)
                await manager.delete_context_entry(user_id, entry_id, session_id=session)
                await manager.delete_context_entry(user_id, entry_id, session_id=self._vector_session(namespace))
                continue
            if namespace not in existing:
                existing[namespace] = await self._rows(namespace)
            before = existing[namespace].get(entry_id)
            row = {
                "id": entry_id, "kind": ITEM_KIND, "namespace": list(namespace), "key": op.key, "value": dict(op.value),
                "created_at": before["created_at"] if before else now, "updated_at": now,
            }
            if i in by_put:  # vectors before the item: an item marked indexed always has them
                row["indexed"] = True
                vector_entry = {"id": entry_id, "kind": VECTORS_KIND, "vectors": by_put[i]}
                await manager.add_context_entry(user_id, vector_entry, session_id=self._vector_session(namespace))
            elif before is not None and before.get("indexed"):
                await manager.delete_context_entry(user_id, entry_id, session_id=self._vector_session(namespace))
            if namespace not in catalogued:  # before the item: a crash in between leaves a catalogued empty namespace, not a lost item
                catalogued.add(namespace)
                entry = {"id": _digest(list(namespace)), "kind": NAMESPACE_KIND, "namespace": list(namespace)}
                await manager.add_context_entry(user_id, entry, session_id=self._catalog)
            await manager.add_context_entry(user_id, row, session_id=session)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        rows: list[dict[str, Any]] = []
        ranking = bool(op.query) and self.index_config is not None
        vectors: dict[tuple[tuple[str, ...], str], list[list[float]]] = {}
        for namespace in await self._namespaces():
            if namespace[: len(prefix)] != prefix:
                continue
            found = [row for row in (await self._rows(namespace)).values() if _matches(row["value"], op.filter)]
            rows.extend(found)
            if ranking and any(row.get("indexed") for row in found):
                entries = await self.stack.session_manager.get_context_entries(await self._uid(), self._vector_session(namespace))
                vectors.update({(namespace, e["id"]): e["vectors"] for e in entries if e.get("kind") == VECTORS_KIND})
        rows.sort(key=lambda row: row["updated_at"], reverse=True)
        if ranking:
            [query] = await self._embed_query(str(op.query))
            scored: list[tuple[float, dict[str, Any]]] = []
            unscored: list[dict[str, Any]] = []
            for row in rows:
                item_vectors = vectors.get((tuple(row["namespace"]), row["id"])) if row.get("indexed") else None
                if item_vectors:
                    scored.append((_best_cosine(query, item_vectors), row))
                else:
                    unscored.append(row)
            scored.sort(key=lambda pair: pair[0], reverse=True)
            ranked = [_item(row, SearchItem, score=score) for score, row in scored]
            ranked += [_item(row, SearchItem) for row in unscored]
        else:
            ranked = [_item(row, SearchItem) for row in rows]
        return ranked[op.offset : op.offset + op.limit]

    async def _embed_query(self, query: str) -> list[list[float]]:
        if self._embeddings is not None:
            return [list(map(float, await self._embeddings.aembed_query(query)))]
        return await self._embed([query])

    async def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        user_id, manager = await self._uid(), self.stack.session_manager
        for namespace in await self._namespaces():
            if not all(_path_matches(namespace, c.path, suffix=c.match_type == "suffix") for c in op.match_conditions or ()):
                continue
            if not await self._rows(namespace):  # emptied by deletes or expired: drop it from the catalog
                await manager.delete_context_entry(user_id, _digest(list(namespace)), session_id=self._catalog)
                continue
            found.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(found)[op.offset : op.offset + op.limit]


# -- tools --------------------------------------------------------------------------------


class _RememberArgs(BaseModel):
    text: str = Field(description="the fact or note to store in long-term memory")


class _RecallArgs(BaseModel):
    query: str = Field(description="what to look up in memory, as a question or keywords")
    top_k: int = Field(default=5, ge=1, le=50, description="how many results at most")


def memlab_tools(
    stack: Any,
    *,
    dataset: str = "main_dataset",
    session_id: str | None = None,
    user: Any = None,
    query_type: Any = "CHUNKS",
    loop: asyncio.AbstractEventLoop | None = None,
) -> list[BaseTool]:
    """``[remember, recall]`` as LangChain tools over ``stack`` (for ``create_react_agent`` and any tool-calling agent).

    ``remember(text)`` stores ``text`` as a document of ``dataset`` (``stack.remember``;
    extraction and embedding run before it returns) and answers with the status;
    ``recall(query, top_k=5)`` runs ``stack.recall(query, query_type, datasets=[dataset],
    session_id=session_id, ...)`` and answers with the results' text, one per line
    (``"(nothing found)"`` when empty). Both work sync and async (the stack's loop as in
    :class:`MemlabStore`); memlab's errors reach the agent as the tool's error.
    """
    bridge = StackBridge(loop)

    async def remember(text: str) -> str:
        result = await stack.remember(text, dataset=dataset, user=user)
        return f"remembered in {dataset} ({result.status})"

    async def recall(query: str, top_k: int = 5) -> str:
        results = await stack.recall(
            query, query_type, datasets=[dataset], top_k=top_k, session_id=session_id, user=user
        )
        lines = []
        for found in results[:top_k]:
            text = getattr(found, "text", None) or getattr(found, "answer", None) or getattr(found, "content", None)
            if found.source != "system" and text:
                lines.append(f"- {text}")
        return "\n".join(lines) or "(nothing found)"

    def sync(fn: Callable[..., Any], name: str) -> Callable[..., str]:
        def call(**kwargs: Any) -> str:
            return bridge.run(lambda: fn(**kwargs), name=name)

        return call

    async def a_remember(text: str) -> str:
        return await bridge.arun(lambda: remember(text))

    async def a_recall(query: str, top_k: int = 5) -> str:
        return await bridge.arun(lambda: recall(query, top_k))

    return [
        StructuredTool.from_function(
            func=sync(remember, "remember"), coroutine=a_remember, name="remember", args_schema=_RememberArgs,
            description="Store a fact or note in long-term memory so it can be recalled in later conversations.",
        ),
        StructuredTool.from_function(
            func=sync(recall, "recall"), coroutine=a_recall, name="recall", args_schema=_RecallArgs,
            description="Look up long-term memory for facts relevant to a question.",
        ),
    ]
