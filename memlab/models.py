"""Public data models: session rows, guidance entries, users, datasets, results.

Models are plain pydantic v2 models; every collection a user sees is a list of
them, and :mod:`memlab.frames` turns such lists into DataFrames.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from memlab._html import field_table, model_table, row_table
from memlab.validation import MAX_ID_CHARS, check_id, check_text

__all__ = [
    "AnyRecallResponse",
    "CleanupFailure",
    "CleanupReceipt",
    "DataRecord",
    "Dataset",
    "DistillResult",
    "ForgetResult",
    "GraphRecallResponse",
    "ImproveResult",
    "KEPT_TRACE_REASON",
    "ModelCost",
    "ModelUsage",
    "PipelineRun",
    "RecallResponse",
    "RememberResult",
    "SessionAgentTraceEntry",
    "SessionContextEntry",
    "SessionContextRecallResponse",
    "SessionFeedbackEntry",
    "SessionQAEntry",
    "SessionCleanup",
    "SessionRecallResponse",
    "SessionPage",
    "SessionRecord",
    "SessionUsage",
    "SkillRecallResponse",
    "SystemRecallResponse",
    "TRACE_ID_PREFIX",
    "TraceRecallResponse",
    "UsageStats",
    "User",
    "QA_SECTIONS",
    "AGENT_SECTIONS",
]

_GRAPH_ID_KEYS = frozenset({"node_ids", "edge_ids"})
MAX_CONTEXT_CONTENT_CHARS = 280

QA_SECTIONS = ("goals", "rules", "preferences", "lessons_learned")
AGENT_SECTIONS = ("tool_rules", "workflow_state", "success_patterns", "failure_lessons", "environment_facts")


class SessionQAEntry(BaseModel):
    """One question/answer turn of a session (SPEC §2).

    ``time`` and ``qa_id`` are assigned by the cache when the turn is stored.
    Empty ``used_graph_element_ids`` / ``used_session_context_ids`` /
    ``memify_metadata`` normalise to ``None``.
    """

    model_config = ConfigDict(extra="ignore")

    time: str
    question: str
    context: str
    answer: str
    qa_id: Optional[str] = None
    feedback_text: Optional[str] = None
    feedback_score: Optional[int] = None
    used_graph_element_ids: Optional[dict[str, list[str]]] = None
    memify_metadata: Optional[dict[str, bool | int | str | list[str]]] = None
    used_session_context_ids: Optional[list[str]] = None

    @field_validator("feedback_score")
    @classmethod
    def _score_in_range(cls, value: Optional[int]) -> Optional[int]:
        if value is not None and not 1 <= value <= 5:
            raise ValueError(f"feedback_score must be between 1 and 5, got {value}")
        return value

    @field_validator("used_graph_element_ids")
    @classmethod
    def _graph_ids(cls, value: Optional[dict[str, list[str]]]) -> Optional[dict[str, list[str]]]:
        if value is None:
            return None
        unknown = set(value) - _GRAPH_ID_KEYS
        if unknown:
            raise ValueError(f"used_graph_element_ids keys must be node_ids/edge_ids, got {sorted(unknown)}")
        kept = {key: ids for key, ids in value.items() if key in _GRAPH_ID_KEYS}
        return kept or None

    @field_validator("used_session_context_ids")
    @classmethod
    def _context_ids(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        return value or None

    @field_validator("memify_metadata")
    @classmethod
    def _metadata(cls, value: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        return value or None

    def _repr_html_(self) -> str:
        return model_table(self)


_WS = re.compile(r"\s+")


def normalize_content(text: str) -> str:
    """Lower-case, whitespace-collapsed form used to de-duplicate guidance."""
    return _WS.sub(" ", text).strip().lower()


class SessionContextEntry(BaseModel):
    """A guidance item (goal, rule, preference, lesson) kept in a session (SPEC §5)."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["context"] = "context"
    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    section: str
    context_profile: Literal["qa", "agent"] = "qa"
    content: str
    normalized_content: str = ""
    confidence: float = 0.0
    created_at: str = ""
    source_feedback_ids: list[str] = Field(default_factory=list)
    source_trace_ids: list[str] = Field(default_factory=list)
    helpful_count: int = 0
    harmful_count: int = 0
    priority: int = 0
    last_served_at: Optional[str] = None
    embedding: Optional[list[float]] = None

    SECTIONS: ClassVar[dict[str, tuple[str, ...]]] = {"qa": QA_SECTIONS, "agent": AGENT_SECTIONS}

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("content must not be blank")
        return value[:MAX_CONTEXT_CONTENT_CHARS]

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, value: float) -> float:
        return min(1.0, max(0.0, float(value)))

    @field_validator("helpful_count", "harmful_count", mode="before")
    @classmethod
    def _count(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"counts must be non-negative integers, got {value!r}")
        return value

    @model_validator(mode="after")
    def _section_and_normal_form(self) -> "SessionContextEntry":
        allowed = self.SECTIONS[self.context_profile]
        if self.section not in allowed:
            raise ValueError(f"section {self.section!r} is not valid for profile {self.context_profile!r}; choose from {allowed}")
        if not self.normalized_content:
            self.normalized_content = normalize_content(self.content)
        return self

    @property
    def usable(self) -> bool:
        """Served and distillable only when never rated harmful and confidence >= 0.75."""
        return self.harmful_count == 0 and self.confidence >= 0.75


class SessionFeedbackEntry(BaseModel):
    """What a user's message said about the previous turn (SPEC §5)."""

    model_config = ConfigDict(extra="ignore")

    kind: Literal["feedback"] = "feedback"
    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    created_at: str = ""
    raw_text: str = ""
    referenced_qa_ids: list[str] = Field(default_factory=list)
    referenced_qa_rating: Optional[int] = None
    influencing_context_ids: list[str] = Field(default_factory=list)
    candidate_context_entries: list[dict[str, Any]] = Field(default_factory=list)

    @field_validator("referenced_qa_rating", mode="before")
    @classmethod
    def _rating(cls, value: Any) -> Optional[int]:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            return None
        return value


#: the session-context row id of a trace is this prefix and its ``trace_id`` (no guidance id can collide)
TRACE_ID_PREFIX = "trace:"
#: longest stored string inside ``method_params`` / ``method_return_value`` (longer ones end in "...")
MAX_TRACE_VALUE_CHARS = 1000
#: most items kept of a list or dict inside ``method_params`` / ``method_return_value``
MAX_TRACE_CONTAINER_ITEMS = 20
#: longest ``memory_context`` / ``memory_query`` / ``session_feedback`` / ``error_message`` / ``origin_function`` kept
MAX_TRACE_TEXT_CHARS = 4000
_MAX_TRACE_DEPTH = 8


def _truncated(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def trace_value(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able data every backend stores: str/int/float/bool/None, lists, dicts with str keys.

    Strings are cut to :data:`MAX_TRACE_VALUE_CHARS` (unencodable characters replaced),
    containers to :data:`MAX_TRACE_CONTAINER_ITEMS`; a non-finite float, a UUID or any
    other object becomes its ``str`` / ``repr``; nesting deeper than 8 becomes ``repr``.
    """
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return _truncated(value.encode("utf-8", "replace").decode("utf-8"), MAX_TRACE_VALUE_CHARS)
    if isinstance(value, uuid.UUID):
        return str(value)
    if depth < _MAX_TRACE_DEPTH and isinstance(value, dict):
        pairs = list(value.items())[:MAX_TRACE_CONTAINER_ITEMS]
        return {trace_value(str(key), depth + 1): trace_value(item, depth + 1) for key, item in pairs}
    if depth < _MAX_TRACE_DEPTH and isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else list(value)
        return [trace_value(item, depth + 1) for item in items[:MAX_TRACE_CONTAINER_ITEMS]]
    if isinstance(value, BaseModel) and depth < _MAX_TRACE_DEPTH:
        return trace_value(value.model_dump(mode="json"), depth)
    return trace_value(repr(value), _MAX_TRACE_DEPTH)


class SessionAgentTraceEntry(BaseModel):
    """One agent step kept in a session: which function ran, with what, and how it ended (SPEC §2).

    Stored as a session-context row of ``kind="trace"`` whose ``id`` is
    ``"trace:" + trace_id``, so it shares the session's TTL, backends and delete path.
    ``trace_id`` follows the id rule of :mod:`memlab.validation` (at most
    ``MAX_ID_CHARS - 6`` characters); ``origin_function`` must not be blank; ``status``
    is ``"success"`` or ``"error"`` (stripped, lower-cased). Text fields are stripped
    and cut to :data:`MAX_TRACE_TEXT_CHARS`; ``method_params`` / ``method_return_value``
    are made JSON-able by :func:`trace_value`. A blank ``session_feedback`` becomes the
    deterministic ``"<origin> succeeded."`` / ``"<origin> failed[. Reason: <error>]."``.
    ``created_at`` / ``updated_at`` (ISO 8601) are stamped by the session manager when
    the step is stored, unless given. Invalid values raise pydantic's ``ValidationError``.
    """

    model_config = ConfigDict(extra="ignore")

    kind: Literal["trace"] = "trace"
    trace_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    origin_function: str
    status: Literal["success", "error"]
    method_params: dict[str, Any] = Field(default_factory=dict)
    method_return_value: Any = None
    memory_query: str = ""
    memory_context: str = ""
    session_feedback: str = ""
    error_message: str = ""
    created_at: str = ""
    updated_at: str = ""

    @field_validator("trace_id", mode="before")
    @classmethod
    def _trace_id(cls, value: Any) -> str:
        checked = check_id("trace_id", value)
        limit = MAX_ID_CHARS - len(TRACE_ID_PREFIX)
        if len(checked) > limit:
            raise ValueError(f"trace_id is {len(checked)} characters long; the limit is {limit}")
        return checked

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("origin_function", "memory_query", "memory_context", "session_feedback", "error_message", mode="before")
    @classmethod
    def _text(cls, value: Any, info: Any) -> str:
        text = check_text(info.field_name, value).strip()
        if info.field_name == "origin_function" and not text:
            raise ValueError("origin_function must not be blank")
        return _truncated(text, MAX_TRACE_TEXT_CHARS)

    @field_validator("method_params", mode="before")
    @classmethod
    def _params(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"method_params must be a dict, got {type(value).__name__} {value!r}"[:400])
        return trace_value(value)

    @field_validator("method_return_value", mode="before")
    @classmethod
    def _returned(cls, value: Any) -> Any:
        return trace_value(value)

    @model_validator(mode="after")
    def _feedback(self) -> "SessionAgentTraceEntry":
        if not self.session_feedback:
            if self.status == "success":
                self.session_feedback = f"{self.origin_function} succeeded."
            else:
                reason = f". Reason: {self.error_message.rstrip('.')}" if self.error_message else ""
                self.session_feedback = _truncated(f"{self.origin_function} failed{reason}.", MAX_TRACE_TEXT_CHARS)
        return self

    @property
    def row_id(self) -> str:
        """The id of the session-context row holding this step."""
        return TRACE_ID_PREFIX + self.trace_id

    def as_row(self) -> dict[str, Any]:
        """The session-context row holding this step: its JSON fields and ``id`` :attr:`row_id`."""
        return {"id": self.row_id, **self.model_dump(mode="json")}

    def search_text(self) -> str:
        """What recall's ``trace`` source matches: the text fields and the JSON of params and return value."""
        parts = [self.origin_function, self.status, self.memory_query, self.memory_context, self.session_feedback, self.error_message]
        parts.append(json.dumps(self.method_params, sort_keys=True))
        if self.method_return_value is not None:
            parts.append(json.dumps(self.method_return_value, sort_keys=True))
        return " ".join(parts)

    def _repr_html_(self) -> str:
        return model_table(self)


class User(BaseModel):
    """A memlab user. Agent users carry the ``parent_user_id`` of the user that owns them."""

    id: uuid.UUID
    name: str
    parent_user_id: Optional[uuid.UUID] = None
    is_default: bool = False
    created_at: datetime


class Dataset(BaseModel):
    """A named dataset owned by one user."""

    id: uuid.UUID
    name: str
    owner_id: uuid.UUID
    created_at: datetime


class RememberResult(BaseModel):
    """What ``remember()`` stored.

    ``status``: ``"completed"`` (permanent memory: documents added and cognified),
    ``"session_stored"``, ``"skipped_blank"`` or ``"cache_unavailable"`` (session
    writes). For permanent memory ``data_ids`` are the documents' ids (one per
    input document, including ones already present), ``new_data_ids`` those
    stored by this call, and the counts what this call added to the graph
    (elements it created or extended).
    """

    status: str
    dataset_id: Optional[uuid.UUID] = None
    session_id: Optional[str] = None
    data_ids: list[str] = Field(default_factory=list)
    new_data_ids: list[str] = Field(default_factory=list)
    chunk_count: int = 0
    node_count: int = 0
    edge_count: int = 0
    pipeline_run_id: Optional[uuid.UUID] = None
    #: LLM use of the run: ``llm_calls``, ``tokens_in``, ``tokens_out``
    usage: dict[str, int] = Field(default_factory=dict)
    #: wall-clock seconds per phase: ``startup`` (one-off imports and model load; ~0 once warm),
    #: ``extract`` (LLM), ``embed``, ``write`` (graph, vectors, snapshot, records)
    timings_s: dict[str, float] = Field(default_factory=dict)


class DataRecord(BaseModel):
    """One document of a dataset (``data_id``), as stored in the relational metadata."""

    id: uuid.UUID
    dataset_id: uuid.UUID
    name: str
    source: Optional[str] = None
    extension: str
    content_hash: str
    size_bytes: int
    tags: list[str] = Field(default_factory=list)
    created_at: datetime


class PipelineRun(BaseModel):
    """One pipeline run over a dataset; ``error_message`` is PII-scrubbed (SPEC §9.7)."""

    id: uuid.UUID
    dataset_id: uuid.UUID
    pipeline_name: str
    status: Literal["started", "completed", "errored"]
    error_class: Optional[str] = None
    error_message: Optional[str] = None
    data_count: int = 0
    started_at: datetime
    finished_at: Optional[datetime] = None


class SessionRecord(BaseModel):
    """One session's lifecycle row (``session_records``): owner, attributed dataset, stored status, times."""

    session_id: str
    user_id: uuid.UUID
    dataset_id: Optional[uuid.UUID] = None
    status: Literal["running", "completed", "failed"] = "running"
    started_at: datetime
    last_activity_at: datetime
    ended_at: Optional[datetime] = None

    def _repr_html_(self) -> str:
        return model_table(self)


def _priced_total(cost: Optional[float], tokens: int, unpriced: int) -> tuple[Optional[float], bool]:
    """``(cost, partially_priced)`` of a total: None when every token counted is unpriced, else the priced cost."""
    if unpriced and unpriced >= tokens:
        return None, False
    return cost, bool(unpriced)


class _PricedTotals(BaseModel):
    """Totals that never show a silent $0: the rule every usage total follows (sessions, models, stats).

    ``cost_usd`` is the priced calls' cost. When every token counted is unpriced
    (``unpriced_tokens_in + unpriced_tokens_out`` equal to ``tokens_in + tokens_out``, not
    zero) it is None: there is no cost to state; when only some are, ``partially_priced``
    is True and the unpriced tokens stand beside the cost. ``priced`` is True when no
    token was unpriced.
    """

    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: Optional[float] = 0.0
    unpriced_tokens_in: int = 0
    unpriced_tokens_out: int = 0
    partially_priced: bool = False

    @property
    def priced(self) -> bool:
        return not (self.unpriced_tokens_in or self.unpriced_tokens_out)

    @model_validator(mode="after")
    def _priced(self) -> "_PricedTotals":
        self.cost_usd, self.partially_priced = _priced_total(
            self.cost_usd, self.tokens_in + self.tokens_out, self.unpriced_tokens_in + self.unpriced_tokens_out
        )
        return self


class _PricedEmbedding(BaseModel):
    """The same rule for a record's embedding columns: ``embedding_cost_usd`` None when no embedding token was priced."""

    embedding_tokens: int = 0
    embedding_cost_usd: Optional[float] = 0.0
    unpriced_embedding_tokens: int = 0
    embedding_partially_priced: bool = False

    @model_validator(mode="after")
    def _embedding_priced(self) -> "_PricedEmbedding":
        self.embedding_cost_usd, self.embedding_partially_priced = _priced_total(
            self.embedding_cost_usd, self.embedding_tokens, self.unpriced_embedding_tokens
        )
        return self


class ModelUsage(_PricedTotals):
    """One model's usage in one session: calls, tokens, cost (the rule of every usage total: None when none of its
    calls was priced, e.g. a model not in litellm's cost map; ``partially_priced`` when some were not).

    ``usage_source`` says where the token figures came from: ``provider`` (reported by
    the provider), ``tokenizer`` (litellm's ``token_counter``), ``estimate``
    (``max(1, len // 4)``), or ``mixed`` when calls differed.
    """

    model: str
    kind: Literal["llm", "embedding"]
    calls: int
    usage_source: Literal["provider", "tokenizer", "estimate", "mixed"]
    updated_at: datetime

    @model_serializer(mode="wrap")
    def _with_priced(self, handler: Any) -> dict[str, Any]:
        return {**handler(self), "priced": self.priced}


class SessionUsage(_PricedTotals, _PricedEmbedding):
    """A session's lifecycle and usage (``session_records``), as read: ``effective_status`` is ``abandoned``
    for a ``running`` session idle longer than the smaller of ``SESSION_ABANDON_AFTER_SECONDS`` and the
    cache's TTL (computed, never stored).

    ``tokens_in`` / ``tokens_out`` count every LLM call; ``cost_usd`` the priced ones
    (None when none was priced; ``partially_priced`` when some were not: the rule of every
    usage total); ``unpriced_tokens_in`` / ``unpriced_tokens_out`` the tokens of calls to
    unpriced models (never a silent $0); ``models`` is filled by ``stack.usage.get()``.
    """

    session_id: str
    user_id: uuid.UUID
    dataset_id: Optional[uuid.UUID] = None
    status: Literal["running", "completed", "failed"]
    effective_status: Literal["running", "completed", "failed", "abandoned"]
    started_at: datetime
    last_activity_at: datetime
    ended_at: Optional[datetime] = None
    error_count: int = 0
    last_model: Optional[str] = None
    models: list[ModelUsage] = Field(default_factory=list)

    def _repr_html_(self) -> str:
        """The session's fields, then one row per model (when ``models`` is filled)."""
        columns = ("model", "kind", "calls", "tokens_in", "tokens_out", "cost_usd", "priced", "usage_source")
        models = [[getattr(model, name) for name in columns] for model in self.models]
        return model_table(self, exclude={"models"}) + (row_table(columns, models, title="models") if models else "")


class SessionPage(BaseModel):
    """One page of ``stack.usage.list_sessions()``: ``total`` visible sessions, ``has_more = offset + len(items) < total``."""

    items: list[SessionUsage]
    total: int
    has_more: bool
    limit: int
    offset: int


class UsageStats(_PricedTotals, _PricedEmbedding):
    """Totals over the visible sessions active in ``range`` (``24h`` | ``7d`` | ``30d`` | ``all``); costs follow the
    rule of every usage total (None when nothing was priced; ``partially_priced`` when some was not)."""

    range: str
    sessions: int
    by_status: dict[str, int]
    error_count: int


class ModelCost(_PricedTotals):
    """One model's totals over the visible sessions active in a range; cost by the rule of every usage total."""

    model: str
    kind: Literal["llm", "embedding"]
    sessions: int
    calls: int

    @model_serializer(mode="wrap")
    def _with_priced(self, handler: Any) -> dict[str, Any]:
        return {**handler(self), "priced": self.priced}


#: why a targeted delete keeps a session's agent trace steps (the seed's "known limit")
KEPT_TRACE_REASON = "agent trace steps hold their memory context as text without graph element ids, so the targeted pass cannot match them"


class SessionCleanup(BaseModel):
    """What a delete removed from one cached session.

    ``qa_ids``: the turns removed; ``context_ids``: the feedback and guidance entries
    removed; ``trace_ids``: the agent trace steps removed (only with the whole session);
    ``whole_session``: the session itself was deleted (a dataset-level delete,
    ``forget(everything=True)``), in which case the ids list what it held.
    ``kept_trace_ids``: after a targeted (single-document) delete, the session's trace
    steps that stayed, and ``kept_trace_reason`` why (:data:`KEPT_TRACE_REASON`; None
    when no step stayed).
    """

    user_id: str
    session_id: str
    qa_ids: list[str] = Field(default_factory=list)
    context_ids: list[str] = Field(default_factory=list)
    trace_ids: list[str] = Field(default_factory=list)
    whole_session: bool = False
    kept_trace_ids: list[str] = Field(default_factory=list)
    kept_trace_reason: Optional[str] = None


class CleanupFailure(BaseModel):
    """A part of the session cleanup that could not be done, and why (the delete itself completed)."""

    user_id: Optional[str] = None
    session_id: Optional[str] = None
    operation: str
    error: str


class CleanupReceipt(BaseModel):
    """The session-cache side of a delete: every cleaned session, and what could not be cleaned.

    Sessions appear in the order they were considered; a session from which nothing
    was removed is not listed. ``sessions_considered`` counts every candidate session.
    """

    sessions: list[SessionCleanup] = Field(default_factory=list)
    failures: list[CleanupFailure] = Field(default_factory=list)
    sessions_considered: int = 0

    def _every(self, field: str) -> list[str]:
        """The ids of one :class:`SessionCleanup` list field, session by session."""
        return [item for session in self.sessions for item in getattr(session, field)]

    @property
    def qa_ids(self) -> list[str]:
        """Every removed turn id, session by session."""
        return self._every("qa_ids")

    @property
    def context_ids(self) -> list[str]:
        """Every removed feedback / guidance entry id, session by session."""
        return self._every("context_ids")

    @property
    def trace_ids(self) -> list[str]:
        """Every removed agent trace step id, session by session."""
        return self._every("trace_ids")

    @property
    def kept_trace_ids(self) -> list[str]:
        """Every agent trace step a targeted delete kept in a cleaned session (why: ``kept_trace_reason``)."""
        return self._every("kept_trace_ids")

    def merged(self, other: "CleanupReceipt") -> "CleanupReceipt":
        """This receipt followed by ``other``'s sessions and failures."""
        return CleanupReceipt(
            sessions=self.sessions + other.sessions,
            failures=self.failures + other.failures,
            sessions_considered=self.sessions_considered + other.sessions_considered,
        )

    def _repr_html_(self) -> str:
        """The counts, then one row per cleaned session and one per failure."""
        summary = [
            ("sessions_considered", self.sessions_considered),
            ("sessions_cleaned", len(self.sessions)),
            ("qa_ids", self.qa_ids),
            ("context_ids", self.context_ids),
            ("trace_ids", self.trace_ids),
            ("kept_trace_ids", self.kept_trace_ids),
            ("failures", len(self.failures)),
        ]
        parts = [field_table(summary, title="CleanupReceipt")]
        if self.sessions:
            cleaned = ("user_id", "session_id", "qa_ids", "context_ids", "trace_ids", "whole_session", "kept_trace_ids", "kept_trace_reason")
            parts.append(row_table(cleaned, [[getattr(item, name) for name in cleaned] for item in self.sessions], title="sessions"))
        if self.failures:
            failed = ("user_id", "session_id", "operation", "error")
            parts.append(row_table(failed, [[getattr(item, name) for name in failed] for item in self.failures], title="failures"))
        return "".join(parts)

    def to_frame(self):
        """One row per removed entry: ``user_id, session_id, entry_type ("qa" | "context" | "trace"), entry_id, whole_session``."""
        import pandas as pd

        rows = [
            (session.user_id, session.session_id, kind, entry_id, session.whole_session)
            for session in self.sessions
            for kind, ids in (("qa", session.qa_ids), ("context", session.context_ids), ("trace", session.trace_ids))
            for entry_id in ids
        ]
        frame = pd.DataFrame(rows, columns=["user_id", "session_id", "entry_type", "entry_id", "whole_session"])
        return frame.astype(
            {"user_id": "string", "session_id": "string", "entry_type": "category", "entry_id": "string", "whole_session": "bool"}
        )


class ForgetResult(BaseModel):
    """What a delete removed: datasets, documents, graph nodes and edges (ids), and the session ``cleanup`` receipt.

    With ``dry_run`` True nothing was changed anywhere: the result says what the same
    delete would remove, graph ids and receipt included.
    """

    dataset_ids: list[uuid.UUID] = Field(default_factory=list)
    data_ids: list[str] = Field(default_factory=list)
    node_ids: list[str] = Field(default_factory=list)
    edge_ids: list[str] = Field(default_factory=list)
    cleanup: CleanupReceipt = Field(default_factory=CleanupReceipt)
    dry_run: bool = False

    def merged(self, other: "ForgetResult") -> "ForgetResult":
        """The union of two deletes' results (ids sorted, receipts concatenated)."""
        return ForgetResult(
            dataset_ids=sorted(set(self.dataset_ids) | set(other.dataset_ids), key=str),
            data_ids=sorted(set(self.data_ids) | set(other.data_ids)),
            node_ids=sorted(set(self.node_ids) | set(other.node_ids)),
            edge_ids=sorted(set(self.edge_ids) | set(other.edge_ids)),
            cleanup=self.cleanup.merged(other.cleanup),
            dry_run=self.dry_run,
        )

    def _repr_html_(self) -> str:
        """What was removed (ids shortened), then the cleanup receipt."""
        return model_table(self, exclude={"cleanup"}) + self.cleanup._repr_html_()


class DistillResult(BaseModel):
    """What ``distill_session()`` did for one session and dataset (SPEC §10).

    ``status``: ``completed`` (lessons published: ``documents`` are their texts,
    ``data_ids`` their documents), ``no_gated_entries``, ``no_new_entries``,
    ``no_proposed_lessons``, ``no_accepted_lessons``, or ``failed`` (``error`` says
    why; the partial result a :class:`~memlab.exceptions.DistillationCallsFailedError`
    carries, and what ``improve()`` records for a session it could not distill).
    ``entries_considered`` counts the gated entries not sealed before this run,
    ``entries_sealed`` those this run sealed (the rest stay pending for the next run);
    ``llm_calls`` counts every curator and writer call made, failed ones included.
    ``proposed`` / ``accepted`` / ``rejected`` are lesson statements.
    """

    status: str
    session_id: str
    dataset_id: Optional[uuid.UUID] = None
    entries_considered: int = 0
    entries_sealed: int = 0
    batches: int = 0
    llm_calls: int = 0
    proposed: list[str] = Field(default_factory=list)
    accepted: list[str] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)
    documents: list[str] = Field(default_factory=list)
    data_ids: list[str] = Field(default_factory=list)
    error: Optional[str] = None


class ImproveResult(BaseModel):
    """What ``improve()`` bridged from sessions into the graph."""

    status: str
    dataset_id: uuid.UUID
    session_ids: list[str] = Field(default_factory=list)
    turns: int = 0
    #: agent trace steps bridged (one document each)
    traces: int = 0
    data_ids: list[str] = Field(default_factory=list)
    new_data_ids: list[str] = Field(default_factory=list)
    #: one result per distinct session of ``session_ids``: the distillation of its gated guidance
    distilled: list[DistillResult] = Field(default_factory=list)


class RecallResponse(BaseModel):
    """Base of every ``recall()`` result; ``source`` says which memory produced it."""

    source: str

    def _repr_html_(self) -> str:
        return model_table(self)


class SessionRecallResponse(RecallResponse):
    """A session turn found by recall's session lane.

    ``matched_tokens`` counts the distinct query tokens the turn shares, whatever
    ranked it; ``score`` is the session retriever's score (higher is better):
    the same count for ``keyword``, the BM25 score for ``bm25``, the cosine
    similarity for ``vector``, the fused RRF score for ``hybrid``.
    """

    source: Literal["session"] = "session"
    session_id: str
    matched_tokens: int
    score: Optional[float] = None
    time: str
    question: str
    context: str
    answer: str
    qa_id: Optional[str] = None
    feedback_text: Optional[str] = None
    feedback_score: Optional[int] = None
    used_graph_element_ids: Optional[dict[str, list[str]]] = None
    used_session_context_ids: Optional[list[str]] = None


class GraphRecallResponse(RecallResponse):
    """A result of the graph lane: a retrieved item (chunk, summary, entity, triplet) or an answer.

    ``score`` is a distance (lower is better; None for answers); ``search_type`` is
    the type that produced it; ``raw`` the retriever's normalised payload
    (element ids, supporting ``data_ids``, ...); ``structured`` the
    ``response_model`` instance when one was requested.
    """

    source: Literal["graph"] = "graph"
    kind: str
    text: str
    id: Optional[str] = None
    score: Optional[float] = None
    search_type: str
    dataset_id: Optional[uuid.UUID] = None
    raw: dict[str, Any] = Field(default_factory=dict)
    structured: Any = None


class SessionContextRecallResponse(RecallResponse):
    """A session's guidance for the query, read-only: the rendered block (``content``) and the entries in it."""

    source: Literal["session_context"] = "session_context"
    session_id: str
    content: str
    context_profile: str = "qa"
    entries: list["SessionContextEntry"] = Field(default_factory=list)


class TraceRecallResponse(RecallResponse):
    """An agent trace step found by recall's ``trace`` source: the step's fields, ``matched_tokens`` and ``score`` (both the overlap count)."""

    source: Literal["trace"] = "trace"
    session_id: str
    matched_tokens: int
    score: float
    trace_id: str
    origin_function: str
    status: str
    method_params: dict[str, Any] = Field(default_factory=dict)
    method_return_value: Any = None
    memory_query: str = ""
    memory_context: str = ""
    session_feedback: str = ""
    error_message: str = ""
    created_at: str = ""
    updated_at: str = ""


class SkillRecallResponse(RecallResponse):
    """A skill found by the skill gate: ``text`` is ``"name: description"``; ``score`` a distance."""

    source: Literal["skills"] = "skills"
    text: str
    skill: str
    score: Optional[float] = None
    dataset_id: Optional[uuid.UUID] = None


class SystemRecallResponse(RecallResponse):
    """A marker instead of results: ``memory_warming_up`` or ``build_failed`` (SPEC §9.4)."""

    source: Literal["system"] = "system"
    status: Literal["memory_warming_up", "build_failed"]
    text: str
    datapoint_count: int = 0
    threshold: int = 1
    error_class: Optional[str] = None
    error_message: Optional[str] = None


#: every ``recall()`` result type, discriminated by ``source`` (for parsing stored or exported results)
AnyRecallResponse = Annotated[
    Union[
        SessionRecallResponse,
        GraphRecallResponse,
        SessionContextRecallResponse,
        TraceRecallResponse,
        SkillRecallResponse,
        SystemRecallResponse,
    ],
    Field(discriminator="source"),
]
