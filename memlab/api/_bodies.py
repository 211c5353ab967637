"""The bodies of the API: the POST routes' requests (pydantic models, extra fields forbidden), and answers of JSON.

The fields, their bounds and descriptions are the MCP tools' (:mod:`memlab.remote`);
flags and counts are strict (``1``, ``"yes"`` or ``5.0`` are refused, as memlab refuses
them). What the schema cannot say, memlab's own input rules (:mod:`memlab.validation`:
an id with a control character, text with a lone surrogate, a blank name or tag) check
as field validators, so a bad body is a 422 at its field before the route runs; what
memlab checks in the call itself (the combination of forget's fields, a dataset id that
is not a UUID) is a 422 too, located from memlab's message.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Literal

from fastapi.responses import Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo

from memlab.exceptions import ValidationError
from memlab.models import RecallResponse
from memlab.remote import DatasetIds, Datasets, EndStatus, FeedbackScore, Ids, TopK, WritableDataset, check_remember_text
from memlab.retrievers import SearchType
from memlab.validation import check_id, check_name, check_text

__all__ = [
    "BODY_FIELDS",
    "MEMLAB_NAMES",
    "EndRequest",
    "FeedbackRequest",
    "ForgetRequest",
    "RecallRequest",
    "RememberRequest",
    "ScopeName",
    "SearchRequest",
    "json_answer",
    "results_json",
]

#: the recall scopes a client may name: ``normalize_scope``'s names less ``tools`` and ``code`` (memlab has no such
#: source and refuses them) and the deprecated ``graph_context`` (``graph``)
ScopeName = Literal["auto", "graph", "session", "trace", "session_context", "all", "session_first"]



def _id(value: str, info: ValidationInfo) -> str:
    return check_id(info.field_name or "id", value)


def _text(value: str, info: ValidationInfo) -> str:
    return check_text(info.field_name or "text", value)


def _name(value: str, info: ValidationInfo) -> str:
    check_name(info.field_name or "name", value)
    return value  # memlab strips it where it looks it up


def _tag(value: str) -> str:
    check_text("tags", value)
    if not value.strip():
        raise ValidationError(f"tags must be non-blank strings, got {value!r}")
    return value


Id = Annotated[Ids, AfterValidator(_id)]
Text = Annotated[str, AfterValidator(_text)]
Flag = Annotated[bool, Field(strict=True)]
Query = Annotated[Text, Field(description="what to look for (an empty query finds nothing)")]
TurnSession = Annotated[Id | None, Field(description="the session's id (yours); omitted: the default session of your main_dataset")]
Count = Annotated[TopK, Field(strict=True)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RememberRequest(_Body):
    """``POST /api/v1/remember``: text into permanent memory of ``dataset``, or with ``session_id`` one turn of that session."""

    text: Annotated[
        Text | Annotated[list[Text], Field(min_length=1)],
        AfterValidator(check_remember_text),
        Field(description="the text to store, or a list of texts (one document each); text only: a 'file://' path is refused"),
    ]
    dataset: Annotated[WritableDataset, AfterValidator(_name)] = "main_dataset"
    session_id: Annotated[Id | None, Field(description="store the text as one turn of this session (yours) instead of permanent memory")] = None
    self_improvement: Annotated[
        Flag, Field(description="with session_id: bridge the session into the dataset's graph in the background (needs write on it)")
    ] = True
    tags: Annotated[
        list[Annotated[str, AfterValidator(_tag)]], Field(description="labels of the documents: 'skills', 'coding_rules', ... (permanent memory only)")
    ] = []

    def has_text(self) -> bool:
        """Whether a session turn of this text would be stored (memlab skips blank text)."""
        return any(item.strip() for item in ([self.text] if isinstance(self.text, str) else self.text))


class RecallRequest(_Body):
    """``POST /api/v1/recall``: search the session, the graph or both (``stack.recall``)."""

    query: Query
    query_type: Annotated[SearchType | None, Field(description="a graph search type; omitted: routed by rule")] = None
    session_id: Annotated[Id | None, Field(description="search this session (yours) first, then the graph when it finds nothing")] = None
    datasets: Datasets = None
    dataset_ids: DatasetIds = None
    top_k: Count = 15
    scope: Annotated[
        ScopeName | Annotated[list[ScopeName], Field(min_length=1)] | None,
        Field(description="the sources to read: auto (default), graph, session, trace, session_context, all, session_first, or a list"),
    ] = None
    only_context: Annotated[Flag, Field(description="return the retrieved context, no answer")] = False


class SearchRequest(_Body):
    """``POST /api/v1/search``: one search type over the graph; a completion type stores the turn in the session."""

    query: Query
    query_type: Annotated[SearchType, Field(description="the graph search type")] = SearchType.GRAPH_COMPLETION
    session_id: TurnSession = None
    datasets: Datasets = None
    dataset_ids: DatasetIds = None
    top_k: Count = 15
    only_context: Annotated[Flag, Field(description="return the retrieved context only (the session is neither read nor written)")] = False


class ForgetRequest(_Body):
    """``POST /api/v1/forget``: delete a dataset, one document of it, its graph only, or everything of yours."""

    dataset: Annotated[
        Annotated[Ids, AfterValidator(_name)] | None,
        Field(description="the dataset (name or id) to delete, or the one data_id is in (default main_dataset); needs write"),
    ] = None
    data_id: Annotated[uuid.UUID | None, Field(description="delete only this document and what only it supported")] = None
    memory_only: Annotated[Flag, Field(description="delete the dataset's graph and vectors only; its documents stay")] = False
    everything: Annotated[Flag, Field(description="delete every dataset you own and every session of yours (with no other field)")] = False
    dry_run: Annotated[Flag, Field(description="change nothing; answer what the delete would remove")] = False


class FeedbackRequest(_Body):
    """``POST /api/v1/sessions/{session_id}/feedback``: rate and / or annotate one turn of your session."""

    qa_id: Annotated[Id, Field(description="the turn's qa_id (remember's data_ids[0], or a session hit of recall)")]
    feedback_text: Annotated[Text | None, Field(description="what was right or wrong")] = None
    feedback_score: Annotated[FeedbackScore, Field(strict=True)] = None


class EndRequest(_Body):
    """``POST /api/v1/sessions/{session_id}/end``: how the session ended (the body may be omitted: ``completed``)."""

    status: Annotated[EndStatus, Field(description="how the session ended")] = "completed"


_REQUESTS: tuple[type[_Body], ...] = (RememberRequest, RecallRequest, SearchRequest, ForgetRequest, FeedbackRequest, EndRequest)
#: every field of a request body (a memlab message naming one is located in the body)
BODY_FIELDS = frozenset(name for model in _REQUESTS for name in model.model_fields)
#: memlab's argument name -> the body field it is (``remember(data)`` is ``text``, ``recall(query_text)`` is ``query``)
MEMLAB_NAMES = {"data": "text", "query_text": "query"}


def json_answer(body: str | bytes) -> Response:
    """A 200 answer of JSON a model has already serialised (the route's ``response_model`` declares its schema).

    FastAPI would validate a returned model again, rebuilding every row, before serialising the same JSON.
    """
    return Response(content=body, media_type="application/json")


def results_json(found: Sequence[RecallResponse]) -> str:
    """recall / search results as a JSON list, each the result's own JSON (``list[AnyRecallResponse]``)."""
    return "[" + ",".join(item.model_dump_json() for item in found) + "]"
