"""pandas exports. pandas is imported only when a frame is built.

Every frame has typed columns, documented in :data:`FRAME_COLUMNS` (the
"DataFrames" table of ``docs/research.md`` is generated from it, and ``tests/test_frames_tidy.py`` checks
each frame against it, empty and populated):

* datetimes are ``datetime64[us, UTC]``; counts ``Int64``; scores, distances and
  timings ``Float64`` (costs of ``sessions`` stay ``float64``); text ``string``;
  enumerations ``string`` or ``category``; flags ``bool`` / ``boolean``;
* ``list`` columns hold lists of ids (object dtype; parquet ``list<string>``): a list,
  ``[]`` when empty, on every row the field applies to, and None where it does not
  (a lane that did not run, a context row of another kind);
* ``dict`` (only ``used_graph_element_ids``): ``{"node_ids": [...], "edge_ids": [...]}``
  with both keys, or None (parquet: a struct of two lists);
* free-form payloads (``memify_metadata``, a recall result's ``raw`` / ``structured`` /
  ``entries``, a feedback row's ``candidate_context_entries``) are JSON text
  (``string``; ``json.loads`` gives the value back).

Empty frames have the same columns and dtypes as populated ones. Every frame
round-trips through ``to_parquet`` / ``pandas.read_parquet`` (``pip install
'memlab[frames]'`` brings pyarrow); list columns come back as numpy arrays.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pydantic

from memlab.exceptions import ConfigError, ValidationError
from memlab.stats import DEFAULT_RESAMPLES

if TYPE_CHECKING:
    import pandas

    from memlab.datasets import Datasets
    from memlab.graph import PermanentMemory
    from memlab.models import SessionQAEntry
    from memlab.session import SessionAPI, SessionManager
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever
    from memlab.usage import UsageAPI

__all__ = [
    "COST_COLUMNS",
    "COST_TYPES",
    "FRAME_COLUMNS",
    "FRAME_ROWS",
    "Frames",
    "LIST",
    "NESTED",
    "QUALITY_KS",
    "QualityEvaluator",
    "QualityRun",
    "SESSION_COLUMNS",
    "SESSION_TYPES",
    "TRACE_TYPES",
    "TURN_COLUMNS",
    "USAGE_COLUMNS",
    "USAGE_TYPES",
    "UTC_DATETIME",
    "frame_columns",
    "pandas_dtype",
    "quality_frame",
    "quality_interval_columns",
    "quality_ks",
    "quality_metric_names",
    "quality_question_columns",
    "quality_summary_columns",
    "register_quality_evaluator",
    "to_frame",
]


def to_frame(rows: Iterable[pydantic.BaseModel | dict[str, Any]], columns: list[str] | None = None) -> "pandas.DataFrame":
    """A DataFrame with one row per model (or dict); ``columns`` fixes the columns of an empty result (untyped)."""
    import pandas as pd

    records = [row.model_dump() if isinstance(row, pydantic.BaseModel) else dict(row) for row in rows]
    frame = pd.DataFrame.from_records(records)
    if columns is not None and frame.empty:
        return pd.DataFrame(columns=columns)
    return frame


# -- the registry of frame columns ------------------------------------------------------------

#: dtype of the datetime columns
UTC_DATETIME = "datetime64[us, UTC]"
#: pseudo-dtype of a column of id lists (pandas ``object``, parquet ``list<string>``)
LIST = "list"
#: pseudo-dtype of ``used_graph_element_ids`` (pandas ``object``, parquet ``struct<node_ids, edge_ids>``)
NESTED = "dict"
_JSON = "json"  # JSON text of a free-form payload: pandas "string"


def pandas_dtype(kind: str) -> str:
    """The pandas dtype (as ``str(series.dtype)`` prints it) of a :data:`FRAME_COLUMNS` dtype."""
    if kind in (LIST, NESTED):
        return "object"
    return "string" if kind == _JSON else kind


#: the columns of :meth:`Frames.entries` (the fields of :class:`~memlab.models.SessionQAEntry`)
ENTRY_TYPES = {
    "time": UTC_DATETIME, "question": "string", "context": "string", "answer": "string", "qa_id": "string",
    "feedback_text": "string", "feedback_score": "Int64", "used_graph_element_ids": NESTED, "memify_metadata": _JSON,
    "used_session_context_ids": LIST,
}
#: the columns of :meth:`Frames.context`: guidance (``kind == "context"``), feedback and watermark rows
CONTEXT_TYPES = {
    "id": "string", "kind": "string", "created_at": UTC_DATETIME,
    # guidance entries (SessionContextEntry)
    "section": "string", "context_profile": "string", "content": "string", "normalized_content": "string",
    "confidence": "Float64", "priority": "Int64", "helpful_count": "Int64", "harmful_count": "Int64",
    "last_served_at": UTC_DATETIME, "source_feedback_ids": LIST, "source_trace_ids": LIST,
    # feedback entries (SessionFeedbackEntry)
    "raw_text": "string", "referenced_qa_ids": LIST, "referenced_qa_rating": "Int64", "influencing_context_ids": LIST,
    "candidate_context_entries": _JSON,
    # watermarks: the persist watermark (dataset_id, count), the distillation watermark (sealed_ids)
    "dataset_id": "string", "count": "Int64", "sealed_ids": LIST,
}
#: the columns of :meth:`Frames.traces` (the fields of :class:`~memlab.models.SessionAgentTraceEntry` but ``kind``)
TRACE_TYPES = {
    "trace_id": "string", "origin_function": "string", "status": "category", "method_params": _JSON,
    "method_return_value": _JSON, "memory_query": "string", "memory_context": "string", "session_feedback": "string",
    "error_message": "string", "created_at": UTC_DATETIME, "updated_at": UTC_DATETIME,
}
#: the columns of :meth:`Frames.turns`
TURN_COLUMNS = (
    "qa_id", "time", "question", "source", "search_type", "mode", "requested_mode", "fallback_reason", "answered", "latency_ms",
    "answer_calls", "analysis_calls", "llm_calls", "tokens_in", "tokens_out", "usage", "effective_query", "rewrite", "analysis_error", "guidance_ids",
    "lane_raw", "lane_rewrite", "lane_merged", "history_ids",
)
TURN_TYPES = {
    "qa_id": "string", "time": UTC_DATETIME, "question": "string", "source": "string", "search_type": "string",
    "mode": "string", "requested_mode": "string", "usage": "string",
    "fallback_reason": "string", "answered": "boolean", "latency_ms": "Int64", "answer_calls": "Int64", "analysis_calls": "Int64",
    "llm_calls": "Int64", "tokens_in": "Int64", "tokens_out": "Int64", "effective_query": "string", "rewrite": "string",
    "analysis_error": "string", "guidance_ids": LIST, "lane_raw": LIST, "lane_rewrite": LIST, "lane_merged": LIST,
    "history_ids": LIST,
}
#: the columns of :meth:`Frames.phases`
PHASE_TYPES = {"qa_id": "string", "turn": "Int64", "mode": "string", "phase": "string", "start_ms": "Float64", "ms": "Float64"}
#: the columns of :meth:`Frames.sessions`
SESSION_COLUMNS = (
    "session_id", "user_id", "dataset_id", "status", "effective_status", "started_at", "last_activity_at", "ended_at",
    "tokens_in", "tokens_out", "cost_usd", "partially_priced", "unpriced_tokens_in", "unpriced_tokens_out", "embedding_tokens",
    "embedding_cost_usd", "embedding_partially_priced", "unpriced_embedding_tokens", "error_count", "last_model",
)
SESSION_TYPES = {
    "session_id": "string", "user_id": "string", "dataset_id": "string", "status": "category", "effective_status": "category",
    "started_at": UTC_DATETIME, "last_activity_at": UTC_DATETIME, "ended_at": UTC_DATETIME, "tokens_in": "Int64",
    "tokens_out": "Int64", "cost_usd": "Float64", "partially_priced": "boolean", "unpriced_tokens_in": "Int64",
    "unpriced_tokens_out": "Int64", "embedding_tokens": "Int64", "embedding_cost_usd": "Float64",
    "embedding_partially_priced": "boolean", "unpriced_embedding_tokens": "Int64", "error_count": "Int64", "last_model": "string",
}
#: the columns of :meth:`Frames.usage`
USAGE_COLUMNS = (
    "session_id", "user_id", "model", "kind", "calls", "tokens_in", "tokens_out", "cost_usd", "priced", "partially_priced",
    "unpriced_tokens_in", "unpriced_tokens_out", "usage_source", "updated_at",
)
USAGE_TYPES = {
    "session_id": "string", "user_id": "string", "model": "string", "kind": "category", "calls": "Int64", "tokens_in": "Int64",
    "tokens_out": "Int64", "cost_usd": "Float64", "priced": "bool", "partially_priced": "bool", "unpriced_tokens_in": "Int64",
    "unpriced_tokens_out": "Int64", "usage_source": "category", "updated_at": UTC_DATETIME,
}
#: the columns of :meth:`Frames.cost_by_model`
COST_COLUMNS = (
    "model", "kind", "sessions", "calls", "tokens_in", "tokens_out", "cost_usd", "priced", "partially_priced", "unpriced_tokens_in",
    "unpriced_tokens_out",
)
COST_TYPES = {
    "model": "string", "kind": "category", "sessions": "Int64", "calls": "Int64", "tokens_in": "Int64", "tokens_out": "Int64",
    "cost_usd": "Float64", "priced": "bool", "partially_priced": "bool", "unpriced_tokens_in": "Int64", "unpriced_tokens_out": "Int64",
}
#: the columns of :meth:`Frames.nearest`
NEAREST_TYPES = {"collection": "string", "rank": "Int64", "id": "string", "distance": "Float64", "text": "string", "data_ids": LIST}
#: the columns of :meth:`Frames.graph_nodes`
GRAPH_NODE_TYPES = {"id": "string", "type": "string", "name": "string", "data_ids": LIST}
_RECALL_COLUMNS = ("source", "kind", "search_type", "text", "score")
#: every column :meth:`Frames.recall` can have (the fields of every ``recall()`` result type); the first five always
RECALL_TYPES = {
    "source": "string", "kind": "string", "search_type": "string", "text": "string", "score": "Float64",
    # SessionRecallResponse
    "session_id": "string", "matched_tokens": "Int64", "time": UTC_DATETIME, "question": "string", "context": "string",
    "answer": "string", "qa_id": "string", "feedback_text": "string", "feedback_score": "Int64",
    "used_graph_element_ids": NESTED, "used_session_context_ids": LIST,
    # GraphRecallResponse (and SkillRecallResponse's dataset_id)
    "id": "string", "dataset_id": "string", "raw": _JSON, "structured": _JSON,
    # SessionContextRecallResponse
    "content": "string", "context_profile": "string", "entries": _JSON,
    # TraceRecallResponse
    "trace_id": "string", "origin_function": "string", "method_params": _JSON, "method_return_value": _JSON,
    "memory_query": "string", "memory_context": "string", "session_feedback": "string", "created_at": UTC_DATETIME,
    "updated_at": UTC_DATETIME,
    # SkillRecallResponse
    "skill": "string",
    # SystemRecallResponse
    "status": "string", "datapoint_count": "Int64", "threshold": "Int64", "error_class": "string", "error_message": "string",
}
#: the columns of :meth:`memlab.models.CleanupReceipt.to_frame`
CLEANUP_TYPES = {"user_id": "string", "session_id": "string", "entry_type": "category", "entry_id": "string", "whole_session": "bool"}

#: frame -> column -> dtype (a pandas dtype name, :data:`LIST`, :data:`NESTED` or ``json``: JSON text in a
#: ``string`` column; see :func:`pandas_dtype`). ``quality`` depends on ``k``: see :func:`frame_columns`.
FRAME_COLUMNS: dict[str, Mapping[str, str]] = {
    "entries": ENTRY_TYPES,
    "context": CONTEXT_TYPES,
    "traces": TRACE_TYPES,
    "turns": TURN_TYPES,
    "phases": PHASE_TYPES,
    "sessions": SESSION_TYPES,
    "usage": USAGE_TYPES,
    "cost_by_model": COST_TYPES,
    "nearest": NEAREST_TYPES,
    "graph_nodes": GRAPH_NODE_TYPES,
    "recall": RECALL_TYPES,
    "cleanup": CLEANUP_TYPES,
}
#: frame -> what one row is (the docs table's "one row per", docs/research.md)
FRAME_ROWS: dict[str, str] = {
    "entries": "session turn, oldest first",
    "context": "session-context row (guidance, feedback, watermark), first-insert order",
    "traces": "agent trace step of a session, first-stored order",
    "turns": "search turn, oldest first",
    "phases": "(search turn, phase), by turn then start",
    "sessions": "session the caller may see",
    "usage": "(session, model, kind)",
    "cost_by_model": "(model, kind) over a range",
    "nearest": "(collection, rank) nearest a query",
    "graph_nodes": "graph node of a dataset",
    "recall": "recall() result, any source (columns no row has are dropped)",
    "cleanup": "session entry a delete removed",
    "quality": "category of a benchmark, then the overall row",
    "quality_questions": "benchmark question",
}


def frame_columns(name: str, *, k: Sequence[int] = (5, 10)) -> dict[str, str]:
    """Column -> pandas dtype of the frame ``name`` (a key of :data:`FRAME_ROWS`); ``k``: the cut-offs of ``quality``."""
    if name in ("quality", "quality_questions"):
        return quality_question_columns(k) if name == "quality_questions" else quality_summary_columns(k)
    return {column: pandas_dtype(kind) for column, kind in FRAME_COLUMNS[name].items()}


# -- the quality frames (the evaluation is memlab.bench.quality_eval's) --------------------------

#: the cut-offs of the quality frames by default
QUALITY_KS = (5, 10)


def quality_ks(ks: Sequence[int]) -> tuple[int, ...]:
    """``ks`` sorted and deduplicated; :class:`~memlab.exceptions.ValidationError` unless a non-empty list of ints >= 1."""
    if not ks or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in ks):
        raise ValidationError(f"k must be a non-empty list of integers >= 1, got {list(ks)!r}")
    return tuple(sorted(set(ks)))


def quality_metric_names(ks: Sequence[int]) -> list[str]:
    """The averaged metric columns of the quality frames, in report order."""
    ks = quality_ks(ks)
    return (
        [f"session_recall_at_{k}" for k in ks] + [f"turn_recall_at_{k}" for k in ks] + [f"hit_at_{k}" for k in ks] + ["mrr"]
    )


def quality_interval_columns(name: str) -> tuple[str, str]:
    """The columns of the bounds of metric ``name``'s bootstrap interval: ``(<name>_lo, <name>_hi)``."""
    return f"{name}_lo", f"{name}_hi"


def quality_summary_columns(ks: Sequence[int] = QUALITY_KS) -> dict[str, str]:
    """The columns of the ``quality`` frame (a category's or the overall row) and their pandas dtypes.

    Each averaged metric (and ``no_result_rate``) is followed by the bounds of its
    bootstrap interval (:func:`quality_interval_columns`); ``resamples`` is the number of
    bootstrap resamples behind them (0: no intervals, the bounds NA).
    """

    def with_interval(name: str) -> dict[str, str]:
        return dict.fromkeys((name, *quality_interval_columns(name)), "Float64")

    metrics: dict[str, str] = {}
    for name in quality_metric_names(ks):
        metrics.update(with_interval(name))
    return {
        "kind": "string", "dataset": "string", "retriever": "string", "embedder": "string", "category": "string",
        "questions": "Int64", "answerable": "Int64",
        **metrics,
        "abstention_questions": "Int64", **with_interval("no_result_rate"), "resamples": "Int64",
        "p50_ms": "Float64", "p95_ms": "Float64",
        "conversations": "Int64", "turns": "Int64", "cold_start_s": "Float64", "first_query_ms": "Float64",
        "write_ms_per_turn": "Float64", "ingest_ms_per_turn": "Float64",
    }


def quality_question_columns(ks: Sequence[int] = QUALITY_KS) -> dict[str, str]:
    """The columns of the ``quality_questions`` frame (one benchmark question a row) and their pandas dtypes."""
    ks = quality_ks(ks)
    per_k = {}
    for k in ks:
        per_k.update({f"session_recall_at_{k}": "Float64", f"turn_recall_at_{k}": "Float64", f"hit_at_{k}": "Float64"})
    return {
        "dataset": "string", "retriever": "string", "conversation_id": "string", "question_id": "string", "category": "string",
        "abstention": "bool", "gold_sessions": "Int64", "gold_turns": "Int64", "paraphrase": "boolean", "overlap": "Float64",
        "returned": "Int64", "no_result": "bool",
        **per_k, "first_gold_rank": "Int64", "mrr": "Float64", "top_score": "Float64", "latency_ms": "float64",
    }


def quality_frame(rows: Sequence[dict[str, Any]], ks: Sequence[int] = QUALITY_KS, *, questions: bool = False) -> "pandas.DataFrame":
    """Summary rows (or, with ``questions=True``, per-question rows) as a DataFrame with the typed columns above."""
    import pandas as pd

    columns = quality_question_columns(ks) if questions else quality_summary_columns(ks)
    frame = pd.DataFrame.from_records([{name: row.get(name) for name in columns} for row in rows], columns=list(columns))
    for name, kind in columns.items():
        frame[name] = frame[name].astype(kind)
    return frame


class QualityRun(Protocol):
    """What a quality evaluation returns (:class:`memlab.bench.quality_eval.Evaluation`), as :meth:`Frames.quality` reads it."""

    #: the cut-offs measured
    ks: tuple[int, ...]
    #: one row per question (columns :func:`quality_question_columns`)
    questions: list[dict[str, Any]]

    def summary_rows(self, *, resamples: int = ..., seed: int = ...) -> list[dict[str, Any]]:
        """One row per category, then the overall row (columns :func:`quality_summary_columns`), intervals from ``resamples``."""
        ...


class QualityEvaluator(Protocol):
    """The evaluation behind :meth:`Frames.quality`: ``retriever`` over ``benchmark`` on scratch stores."""

    def __call__(
        self, retriever: "SessionRetriever[Any]", benchmark: Any, *, ks: Sequence[int], limit: int | None, reranker: "SessionReranker | None"
    ) -> Awaitable[QualityRun]: ...


_quality_evaluator: QualityEvaluator | None = None


def register_quality_evaluator(evaluator: QualityEvaluator) -> None:
    """Install the evaluation :meth:`Frames.quality` runs: the one seam between the stack and the benchmarks.

    :mod:`memlab.bench` installs :func:`memlab.bench.quality_eval.evaluate_retriever` when
    it is imported, which every benchmark object implies (its class lives there). This
    module imports nothing from :mod:`memlab.bench` (``tests/test_architecture.py``).
    """
    global _quality_evaluator
    _quality_evaluator = evaluator


# -- building typed frames ----------------------------------------------------------------------


def _ids(value: Any) -> list[str] | None:
    return [str(item) for item in value] if isinstance(value, (list, tuple)) else None


def _graph_ids(value: Any) -> dict[str, list[str]] | None:
    if not isinstance(value, Mapping):
        return None
    return {key: _ids(value.get(key)) or [] for key in ("node_ids", "edge_ids")}


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _column(values: list[Any], kind: str) -> Any:
    """``values`` as a pandas array or Series of dtype ``kind`` (values of the wrong type read as missing)."""
    import pandas as pd

    if kind == UTC_DATETIME:
        raw = pd.Series([None if value == "" else value for value in values], dtype=object)
        return pd.to_datetime(raw, utc=True, format="ISO8601", errors="coerce").astype(UTC_DATETIME).array
    if kind == "string":
        return pd.array([None if value is None else str(value) for value in values], dtype="string")
    if kind == "category":  # categories of pandas' default str dtype (what parquet gives back)
        return pd.Categorical([None if value is None else str(value) for value in values])
    if kind == _JSON:
        return pd.array([None if value is None else json.dumps(value, default=str) for value in values], dtype="string")
    if kind == "Int64":
        return pd.array([_integer(value) for value in values], dtype="Int64")
    if kind in ("Float64", "float64"):
        return pd.array([_number(value) for value in values], dtype="Float64").astype(kind)
    if kind in ("bool", "boolean"):
        return pd.array([value if isinstance(value, bool) else None for value in values], dtype="boolean").astype(kind)
    if kind == LIST:
        return pd.Series([_ids(value) for value in values], dtype=object)
    if kind == NESTED:
        return pd.Series([_graph_ids(value) for value in values], dtype=object)
    raise ValueError(f"unknown frame dtype {kind!r}")


def _build(rows: Sequence[Mapping[str, Any]], types: Mapping[str, str]) -> "pandas.DataFrame":
    """One row per mapping, the columns of ``types`` in order, each of its dtype (missing keys read as missing)."""
    import pandas as pd

    data = {name: _column([row.get(name) for row in rows], kind) for name, kind in types.items()}
    return pd.DataFrame({name: pd.Series(values, dtype=pandas_dtype(types[name])) for name, values in data.items()}, columns=list(types))


class Frames:
    """``stack.frames``: coroutines returning DataFrames of what the stack stores (columns: :data:`FRAME_COLUMNS`).

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

        Datetimes are UTC (``ended_at`` NaT while running), counts ``Int64``, ``cost_usd`` ``Float64``
        and ``embedding_cost_usd`` ``Float64`` (NA when nothing was priced; ``partially_priced`` /
        ``embedding_partially_priced`` when some was not).
        """
        page = await self._usage_api().list_sessions(user, status=status, order_by=order_by, descending=descending, limit=limit, offset=offset)
        return _build([item.model_dump(exclude={"models"}) for item in page.items], SESSION_TYPES)

    async def usage(self, session_id: str | None = None, *, user: Any = None, limit: int = 1000) -> "pandas.DataFrame":
        """One row per (session, model, kind): calls, tokens, ``cost_usd`` (NA: unpriced), ``priced``, ``usage_source``.

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
        return _build(rows, USAGE_TYPES)

    async def cost_by_model(self, range: str = "30d", *, user: Any = None) -> "pandas.DataFrame":
        """``stack.usage.cost_by_model(range)`` as a frame: one row per (model, kind); ``cost_usd`` NA when unpriced."""
        rows = await self._usage_api().cost_by_model(range, user)
        return _build([row.model_dump() for row in rows], COST_TYPES)

    async def entries(self, session_id: str | None = None, *, last_n: int | None = None, user: Any = None) -> "pandas.DataFrame":
        """One row per session turn, oldest first; columns :data:`ENTRY_TYPES` (the fields of ``SessionQAEntry``).

        ``time`` is a UTC timestamp, ``feedback_score`` nullable ``Int64``,
        ``used_session_context_ids`` a list (``[]``: none), ``memify_metadata`` JSON text.
        """
        rows = await self._session.get_session(session_id=session_id, last_n=last_n, user=user)
        records = [{**row.model_dump(), "used_session_context_ids": list(row.used_session_context_ids or [])} for row in rows]
        return _build(records, ENTRY_TYPES)

    async def context(self, session_id: str | None = None, *, user: Any = None) -> "pandas.DataFrame":
        """One row per session-context row (guidance, feedback, watermarks), first-insert order; columns :data:`CONTEXT_TYPES`.

        Each row fills the columns of its kind (guidance: ``section`` ... ``source_trace_ids``;
        feedback: ``raw_text`` ... ``candidate_context_entries``; watermarks: ``dataset_id``,
        ``count``, ``sealed_ids``); the others are missing (None in list columns).
        Guidance embeddings and agent trace steps (rows of ``kind="trace"``: :meth:`traces`) are left out.
        """
        user_id, session = await self._session.resolve(session_id, user)
        rows = await self._manager.get_context_entries(user_id, session_id=session)
        return _build([row for row in rows if row.get("kind") != "trace"], CONTEXT_TYPES)

    async def traces(self, session_id: str | None = None, *, user: Any = None) -> "pandas.DataFrame":
        """One row per agent trace step of the session, first stored first; columns :data:`TRACE_TYPES`.

        ``status`` is a category (``success`` / ``error``), ``method_params`` and
        ``method_return_value`` JSON text, ``created_at`` / ``updated_at`` UTC timestamps.
        """
        steps = await self._session.get_traces(session_id=session_id, user=user)
        return _build([step.model_dump(mode="json") for step in steps], TRACE_TYPES)

    async def _search_turns(self, session_id: str | None, user: Any) -> list["SessionQAEntry"]:
        """The session's turns written by a completion ``search()`` (those carrying a turn record), oldest first."""
        entries = await self._session.get_session(session_id=session_id, user=user)
        return [entry for entry in entries if "turn_mode" in (entry.memify_metadata or {})]

    async def turns(self, session_id: str | None = None, *, user: Any = None) -> "pandas.DataFrame":
        """One row per search turn of the session, oldest first (turns written by ``remember`` are left out).

        Columns (:data:`TURN_COLUMNS`, dtypes :data:`TURN_TYPES`): ``qa_id``, ``time``,
        ``question``, ``source`` (``search`` or ``recall``), ``search_type``, ``mode`` (what ran),
        ``requested_mode``, ``fallback_reason``, ``answered``, ``latency_ms``, ``answer_calls``,
        ``analysis_calls``, ``llm_calls``, ``tokens_in``, ``tokens_out``, ``usage`` (``recorded``: counted in
        the session's usage; ``post_end``, ``off`` or ``failed``: not counted, see :mod:`memlab.usage`), ``effective_query``, ``rewrite``, ``analysis_error``,
        ``guidance_ids``, then ``lane_raw`` / ``lane_rewrite`` / ``lane_merged`` (the element
        ids each retrieval lane ranked and the merged list the answer saw; None for a lane
        that did not run: ``lane_rewrite`` on a single-query turn, all three on a gated
        turn) and ``history_ids`` (the turns the answer's prompt held as history,
        ``[]`` when none). See :mod:`memlab.flows.turn`.
        """
        from memlab.flows.turn import turn_trace

        rows: list[dict[str, Any]] = []
        for entry in await self._search_turns(session_id, user):
            meta = entry.memify_metadata or {}
            row: dict[str, Any] = {"qa_id": entry.qa_id, "time": entry.time, "question": entry.question}
            row.update({name: meta.get(f"turn_{name}") for name in TURN_COLUMNS if name not in row})
            row["llm_calls"] = (_integer(row["answer_calls"]) or 0) + (_integer(row["analysis_calls"]) or 0)
            row["usage"] = row["usage"] or "recorded"  # stored only when it was not
            row["guidance_ids"] = list(entry.used_session_context_ids or [])
            row["history_ids"] = _ids(meta.get("turn_history_ids")) or []
            lanes = turn_trace(meta)["lanes"] or {}
            row.update({f"lane_{lane}": lanes.get(lane) for lane in ("raw", "rewrite", "merged")})
            rows.append(row)
        return _build(rows, TURN_TYPES)

    async def phases(self, session_id: str | None = None, *, user: Any = None) -> "pandas.DataFrame":
        """One row per (search turn, phase) of the session: when each step of the turn started and how long it took.

        Columns (:data:`PHASE_TYPES`): ``qa_id``, ``turn`` (0-based among the session's
        search turns, the rows of :meth:`turns`), ``mode`` (what ran), ``phase`` (``load``,
        ``analysis``, ``apply``, ``guidance``, ``history``, ``retrieve_raw``,
        ``retrieve_rewrite``, ``merge``, ``answer``), ``start_ms`` (relative to the turn
        lock) and ``ms``. Ordered by turn, then start.
        """
        from memlab.flows.turn import turn_trace

        rows: list[dict[str, Any]] = []
        for index, entry in enumerate(await self._search_turns(session_id, user)):
            meta = entry.memify_metadata or {}
            phases = [phase for phase in turn_trace(meta)["phases"] if isinstance(phase, Mapping)]
            for phase in sorted(phases, key=lambda item: _number(item.get("start_ms")) or 0.0):
                rows.append({"qa_id": entry.qa_id, "turn": index, "mode": meta.get("turn_mode"), **phase})
        return _build(rows, PHASE_TYPES)

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

        Columns (:data:`NEAREST_TYPES`): ``collection``, ``rank``, ``id``, ``distance``
        (1 - cosine, lower is nearer), ``text``, ``data_ids`` (the documents supporting the
        element). The user needs read permission on ``dataset``.
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
        return _build(rows, NEAREST_TYPES)

    async def graph_nodes(self, *, dataset: Any = "main_dataset", type: str | None = None, user: Any = None) -> "pandas.DataFrame":
        """One row per graph node of the dataset (``type``: document, chunk, summary, entity), with its supporters."""
        target = await self._datasets.resolve(dataset, user, "read")
        graph = await self._memory().graph(target.id)
        rows = [
            {"id": node["id"], "type": node["type"], "name": node["name"], "data_ids": sorted(graph.supporters(node["id"]))}
            for node in graph.nodes(type=type)
        ]
        return _build(rows, GRAPH_NODE_TYPES)

    async def quality(
        self,
        benchmark: Any,
        *,
        k: Sequence[int] = QUALITY_KS,
        limit: int | None = None,
        questions: bool = False,
        resamples: int = DEFAULT_RESAMPLES,
        seed: int = 0,
    ) -> "pandas.DataFrame":
        """The session-retriever benchmark (:mod:`memlab.bench.quality_eval`) for this stack's configured retriever and reranker.

        One row per category of ``benchmark`` (a :class:`memlab.bench.conversations.Benchmark`)
        and an overall row (``category == "all"``): session / turn recall@k and hit@k for each
        ``k``, MRR, the abstention no-result rate, p50 / p95 search ms, ingest costs;
        ``questions=True``: one row per question. Every averaged metric ``m`` comes with
        its 95% percentile-bootstrap interval over the row's questions, ``m_lo`` /
        ``m_hi`` (:mod:`memlab.stats`; ``resamples`` draws seeded by ``seed``, the same
        numbers on every run; ``resamples=0``: no intervals, the bounds NA). ``limit``: the
        first ``limit`` questions only. Runs on a scratch in-memory session cache with the
        stack's retriever (and embedder) and reranker: the stack's own stores are not
        touched. Columns typed (``Float64`` / ``Int64`` nullable, ``string``):
        ``frame_columns("quality", k=k)``; ``retriever`` names the ranking (``bm25``, or
        ``bm25+mmr`` with the ``mmr`` reranker); ``embedder`` is the retriever's embedder
        (NA for ``keyword`` / ``bm25``, which embed nothing).

        The evaluation is :func:`memlab.bench.quality_eval.evaluate_retriever`, reached
        through :func:`register_quality_evaluator`; this method only frames its result.
        """
        if _quality_evaluator is None:
            raise ConfigError("no quality evaluation is registered: import memlab.bench (which builds the benchmarks) first")
        run = await _quality_evaluator(self._manager.retriever, benchmark, ks=k, limit=limit, reranker=self._manager.reranker)
        return quality_frame(run.questions if questions else run.summary_rows(resamples=resamples, seed=seed), run.ks, questions=questions)

    async def recall(self, query_text: str, query_type: Any = None, **kwargs: Any) -> "pandas.DataFrame":
        """``stack.recall(...)`` as a DataFrame: one row per result, any source.

        Columns start with ``source``, ``kind``, ``search_type``, ``text`` (a session turn's
        ``answer``), ``score``; then every other field the results have (:data:`RECALL_TYPES`),
        in order of first appearance, except those missing on every returned row.
        """
        results = await self._recall(query_text, query_type, **kwargs)
        records = []
        seen: dict[str, None] = dict.fromkeys(_RECALL_COLUMNS)
        for result in results:
            record = result.model_dump(mode="json") if isinstance(result, pydantic.BaseModel) else dict(result)
            if record.get("text") is None and record.get("answer") is not None:  # session rows carry their text as answer
                record["text"] = record["answer"]
            if record.get("source") == "trace":  # a trace step's text is its feedback line
                record["text"] = record.get("session_feedback")
            if record.get("source") == "session":
                record["used_session_context_ids"] = list(record.get("used_session_context_ids") or [])
            seen.update(dict.fromkeys(record))
            records.append(record)
        types = {column: RECALL_TYPES.get(column, _JSON) for column in seen}
        frame = _build(records, types)
        missing = [column for column in frame.columns[len(_RECALL_COLUMNS):] if frame[column].isna().all()]
        return frame.drop(columns=missing)
