"""pandas exports. pandas is imported only when a frame is built."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import pydantic

if TYPE_CHECKING:
    import pandas

    from memlab.datasets import Datasets
    from memlab.graph import PermanentMemory
    from memlab.session import SessionAPI, SessionManager


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
    ) -> None:
        self._session = session
        self._manager = manager
        self._datasets = datasets
        self._memory = memory
        self._recall = recall

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
