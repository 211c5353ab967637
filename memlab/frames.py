"""pandas exports. pandas is imported only when a frame is built."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pydantic

if TYPE_CHECKING:
    import pandas

    from memlab.bench.conversations import Benchmark
    from memlab.datasets import Datasets
    from memlab.graph import PermanentMemory
    from memlab.session import SessionAPI, SessionManager
    from memlab.usage import UsageAPI


def to_frame(rows: Iterable[pydantic.BaseModel | dict[str, Any]], columns: list[str] | None = None) -> "pandas.DataFrame":
    """A DataFrame with one row per model (or dict); ``columns`` fixes the columns of an empty result."""
    import pandas as pd

    records = [row.model_dump() if isinstance(row, pydantic.BaseModel) else dict(row) for row in rows]
    frame = pd.DataFrame.from_records(records)
    if columns is not None and frame.empty:
        return pd.DataFrame(columns=columns)
    return frame


class Frames:
    """``stack.frames``: coroutines returning DataFrames of what the stack stores.

    Built from the stack's session API and manager, datasets, an accessor for its
    permanent memory and its ``recall`` coroutine.
    """

    def __init__(
        self,
        session: "SessionAPI",
        manager: "SessionManager",
        datasets: "Datasets",
        memory: Callable[[], "PermanentMemory"],
        recall: Callable[..., Awaitable[list[Any]]],
        usage: "UsageAPI | None" = None,
    ) -> None:
        self._session = session
        self._manager = manager
        self._datasets = datasets
        self._memory = memory
        self._recall = recall
        self._usage = usage

    def _usage_api(self) -> "UsageAPI":
        if self._usage is None:
            raise RuntimeError("these frames were built without a usage API")
        return self._usage

    async def sessions(
        self,
        user: Any = None,
        *,
        status: str | None = None,
        order_by: str = "last_activity_at",
        descending: bool = True,
        limit: int = 1000,
        offset: int = 0,
    ) -> "pandas.DataFrame":
        """One row per session the caller may see (``stack.usage.list_sessions``), columns :data:`SESSION_COLUMNS`.

        Datetimes are UTC (``ended_at`` NaT while running), counts ``Int64``, costs ``float64``.
        """
        page = await self._usage_api().list_sessions(user, status=status, order_by=order_by, descending=descending, limit=limit, offset=offset)
        rows = [item.model_dump(exclude={"models"}) for item in page.items]
        return _typed(to_frame(rows, columns=list(SESSION_COLUMNS))[list(SESSION_COLUMNS)], SESSION_TYPES)

    async def usage(self, session_id: str | None = None, *, user: Any = None, limit: int = 1000) -> "pandas.DataFrame":
        """One row per (session, model, kind): calls, tokens, ``cost_usd`` (NaN: unpriced), ``priced``, ``usage_source``.

        ``session_id``: that session only; None: every session the caller may see (the
        ``limit`` most recently active). Columns :data:`USAGE_COLUMNS`.
        """
        api = self._usage_api()
        if session_id is not None:
            found = await api.get(session_id, user)
            sessions = [found] if found is not None else []
        else:
            page = await api.list_sessions(user, limit=limit)
            sessions = [item.model_copy(update={"models": await api.models(item)}) for item in page.items]
        rows = [
            {"session_id": session.session_id, "user_id": str(session.user_id), **model.model_dump()}
            for session in sessions
            for model in session.models
        ]
        return _typed(to_frame(rows, columns=list(USAGE_COLUMNS))[list(USAGE_COLUMNS)], USAGE_TYPES)

    async def cost_by_model(self, range: str = "30d", *, user: Any = None) -> "pandas.DataFrame":
        """``stack.usage.cost_by_model(range)`` as a frame: one row per (model, kind); ``cost_usd`` NaN when unpriced."""
        rows = await self._usage_api().cost_by_model(range, user)
        return _typed(to_frame(rows, columns=list(COST_COLUMNS))[list(COST_COLUMNS)], COST_TYPES)

    async def entries(self, session_id: str | None = None, *, last_n: int | None = None, user: Any = None) -> "pandas.DataFrame":
        """One row per session turn, oldest first (``time`` as UTC timestamps, ``feedback_score`` as nullable Int64)."""
        from memlab.models import SessionQAEntry

        rows = await self._session.get_session(session_id=session_id, last_n=last_n, user=user)
        frame = to_frame(rows, columns=list(SessionQAEntry.model_fields))
        if not frame.empty:
            import pandas as pd

            frame["time"] = pd.to_datetime(frame["time"], utc=True, format="ISO8601")
            frame["feedback_score"] = frame["feedback_score"].astype("Int64")
        return frame

    async def context(self, session_id: str | None = None, *, user: Any = None) -> "pandas.DataFrame":
        """One row per session-context row (guidance, feedback, watermarks), first-insert order."""
        user_id, session = await self._session.resolve(session_id, user)
        rows = await self._manager.get_context_entries(user_id, session_id=session)
        return to_frame(rows, columns=["id", "kind"])

    async def turns(self, session_id: str | None = None, *, user: Any = None) -> "pandas.DataFrame":
        """One row per search turn of the session, oldest first (turns written by ``remember`` are left out).

        Columns (:data:`TURN_COLUMNS`): ``qa_id``, ``time``, ``question``, ``mode`` (what
        ran), ``requested_mode``, ``fallback_reason``, ``answered``, ``latency_ms``,
        ``answer_calls``, ``analysis_calls``, ``llm_calls``, ``tokens_in``, ``tokens_out``,
        ``effective_query``, ``rewrite``, ``analysis_error``, ``guidance_ids`` (see
        :mod:`memlab.flows.turn`).
        """
        rows: list[dict[str, Any]] = []
        for entry in await self._session.get_session(session_id=session_id, user=user):
            meta = entry.memify_metadata or {}
            if "turn_mode" not in meta:
                continue
            row: dict[str, Any] = {"qa_id": entry.qa_id, "time": entry.time, "question": entry.question}
            row.update({name: meta.get(f"turn_{name}") for name in TURN_COLUMNS if name not in row})
            row["llm_calls"] = (row["answer_calls"] or 0) + (row["analysis_calls"] or 0)
            row["guidance_ids"] = list(entry.used_session_context_ids or [])
            rows.append(row)
        frame = to_frame(rows, columns=list(TURN_COLUMNS))
        if not frame.empty:
            import pandas as pd

            frame["time"] = pd.to_datetime(frame["time"], utc=True, format="ISO8601")
        return frame[list(TURN_COLUMNS)]

    async def nearest(
        self,
        query_text: str,
        *,
        dataset: Any = "main_dataset",
        collections: Iterable[str] = ("chunks", "triplets"),
        top_k: int = 5,
        user: Any = None,
    ) -> "pandas.DataFrame":
        """The ``top_k`` elements of each vector collection nearest ``query_text``.

        Columns: ``collection``, ``rank``, ``id``, ``distance`` (1 - cosine, lower is
        nearer), ``text``, ``data_ids`` (the documents supporting the element).
        The user needs read permission on ``dataset``.
        """
        target = await self._datasets.resolve(dataset, user, "read")
        graph = await self._memory().graph(target.id)
        rows = []
        for collection in collections:
            hits = await self._memory().search(target.id, collection, query_text, top_k)
            for rank, (element_id, distance) in enumerate(hits, start=1):
                element = graph.node(element_id) or graph.edge(element_id) or {}
                rows.append(
                    {
                        "collection": collection,
                        "rank": rank,
                        "id": element_id,
                        "distance": distance,
                        "text": element.get("text", ""),
                        "data_ids": sorted(graph.supporters(element_id)),
                    }
                )
        return to_frame(rows, columns=["collection", "rank", "id", "distance", "text", "data_ids"])

    async def graph_nodes(self, *, dataset: Any = "main_dataset", type: str | None = None, user: Any = None) -> "pandas.DataFrame":
        """One row per graph node of the dataset (``type``: document, chunk, summary, entity), with its supporters."""
        target = await self._datasets.resolve(dataset, user, "read")
        graph = await self._memory().graph(target.id)
        rows = [
            {"id": node["id"], "type": node["type"], "name": node["name"], "data_ids": sorted(graph.supporters(node["id"]))}
            for node in graph.nodes(type=type)
        ]
        return to_frame(rows, columns=["id", "type", "name", "data_ids"])

    async def quality(
        self, benchmark: "Benchmark", *, k: Sequence[int] = (5, 10), limit: int | None = None, questions: bool = False
    ) -> "pandas.DataFrame":
        """The session-retriever benchmark (:mod:`memlab.bench.quality_eval`) for this stack's configured retriever.

        One row per category of ``benchmark`` and an overall row (``category == "all"``):
        session / turn recall@k and hit@k for each ``k``, MRR, the abstention no-result
        rate, p50 / p95 search ms, ingest costs; ``questions=True``: one row per question.
        ``limit``: the first ``limit`` questions only. Runs on a scratch in-memory session
        cache with the stack's retriever (and embedder): the stack's own stores are not
        touched. Columns typed (``Float64`` / ``Int64`` nullable, ``string``).
        """
        from memlab.bench.quality_eval import evaluate, quality_frame, scratch_manager, summary_rows

        run = await evaluate(scratch_manager(self._manager.retriever), benchmark, ks=k, limit=limit)
        return quality_frame(run.questions if questions else summary_rows(run), run.ks, questions=questions)

    async def recall(self, query_text: str, query_type: Any = None, **kwargs: Any) -> "pandas.DataFrame":
        """``stack.recall(...)`` as a DataFrame: one row per result, any source.

        Columns start with ``source``, ``kind``, ``search_type``, ``text``, ``score``;
        then every other field of the results (empty where a source lacks it).
        """
        results = await self._recall(query_text, query_type, **kwargs)
        frame = to_frame(results, columns=list(_RECALL_COLUMNS))
        if "text" not in frame.columns and "answer" in frame.columns:  # session rows carry their text as answer
            frame["text"] = frame["answer"]
        elif "answer" in frame.columns:
            frame["text"] = frame["text"].fillna(frame["answer"])
        first = [column for column in _RECALL_COLUMNS if column in frame.columns]
        return frame[first + [column for column in frame.columns if column not in first]]


_RECALL_COLUMNS = ("source", "kind", "search_type", "text", "score")
#: the columns of :meth:`Frames.turns`
TURN_COLUMNS = (
    "qa_id", "time", "question", "mode", "requested_mode", "fallback_reason", "answered", "latency_ms", "answer_calls",
    "analysis_calls", "llm_calls", "tokens_in", "tokens_out", "effective_query", "rewrite", "analysis_error", "guidance_ids",
)


def _typed(frame: "pandas.DataFrame", types: dict[str, str]) -> "pandas.DataFrame":
    """``frame`` with the given column dtypes (``datetime`` = UTC timestamps)."""
    import pandas as pd

    for column, kind in types.items():
        if kind == "datetime":
            frame[column] = pd.to_datetime(frame[column], utc=True)
        else:
            frame[column] = frame[column].astype(kind)
    return frame


#: the columns of :meth:`Frames.sessions`
SESSION_COLUMNS = (
    "session_id", "user_id", "dataset_id", "status", "effective_status", "started_at", "last_activity_at", "ended_at",
    "tokens_in", "tokens_out", "cost_usd", "unpriced_tokens_in", "unpriced_tokens_out", "embedding_tokens",
    "embedding_cost_usd", "error_count", "last_model",
)
SESSION_TYPES = {
    "session_id": "string", "user_id": "string", "dataset_id": "string", "status": "category", "effective_status": "category",
    "started_at": "datetime", "last_activity_at": "datetime", "ended_at": "datetime", "tokens_in": "Int64", "tokens_out": "Int64",
    "cost_usd": "float64", "unpriced_tokens_in": "Int64", "unpriced_tokens_out": "Int64", "embedding_tokens": "Int64",
    "embedding_cost_usd": "float64", "error_count": "Int64", "last_model": "string",
}
#: the columns of :meth:`Frames.usage`
USAGE_COLUMNS = (
    "session_id", "user_id", "model", "kind", "calls", "tokens_in", "tokens_out", "cost_usd", "priced", "usage_source", "updated_at",
)
USAGE_TYPES = {
    "session_id": "string", "user_id": "string", "model": "string", "kind": "category", "calls": "Int64", "tokens_in": "Int64",
    "tokens_out": "Int64", "cost_usd": "Float64", "priced": "bool", "usage_source": "category", "updated_at": "datetime",
}
#: the columns of :meth:`Frames.cost_by_model`
COST_COLUMNS = ("model", "kind", "sessions", "calls", "tokens_in", "tokens_out", "cost_usd", "priced")
COST_TYPES = {
    "model": "string", "kind": "category", "sessions": "Int64", "calls": "Int64", "tokens_in": "Int64", "tokens_out": "Int64",
    "cost_usd": "Float64", "priced": "bool",
}
