"""The API's POST routes (see :mod:`memlab.api`): remember, recall, search, forget, feedback on a turn, ending a session.

Each acts as the caller, through the stack's public methods, with memlab's
permission model unchanged: writing into a dataset needs ``write`` on it (a dataset
the caller may only read answers 403, one it cannot read or that does not exist
404, with one body for both); reading one needs ``read`` (else 404); sessions are
the caller's own (``(caller, session_id)``), so another user's session of the same id
is simply not there: 404 for feedback and end, and never touched.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import Response

from memlab.api._auth import AUTH_ERRORS, Caller, ErrorBody
from memlab.api._bodies import (
    EndRequest,
    FeedbackRequest,
    ForgetRequest,
    RecallRequest,
    RememberRequest,
    SearchRequest,
    json_answer,
    results_json,
)
from memlab.api._errors import SESSION_NOT_FOUND, TURN_NOT_FOUND, refusing
from memlab.datasets import MAIN_DATASET
from memlab.models import AnyRecallResponse, ForgetResult, RememberResult
from memlab.remote import EndResult, FeedbackResult
from memlab.stack import MemoryStack

__all__ = ["add_write_routes"]


def _answers(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {
        403: "the caller may read the dataset but not write it",
        404: "the dataset (or document, session, turn) does not exist or is not the caller's to see: one body either way",
        409: "the call needs state that does not exist yet (an omitted session_id without a main_dataset)",
        502: "a model call failed",
    }
    return {**AUTH_ERRORS, **{status: {"model": ErrorBody, "description": described[status]} for status in statuses}}


def add_write_routes(app: FastAPI, stack: MemoryStack) -> None:
    """The POST routes over ``stack`` (its state is the app's: see :func:`memlab.api.create_app`).

    recall's and search's bodies name their fields as the stack methods name their keywords, so
    the bodies are passed on as they are.
    """

    @app.post("/api/v1/remember", response_model=RememberResult, responses=_answers(403, 404, 409, 502), tags=["memory"])
    async def remember(caller: Caller, body: RememberRequest) -> Response:
        """Text into permanent memory of a dataset (chunked, extracted, embedded: `completed`), or with `session_id` one turn of
        that session (`session_stored`, `data_ids == [qa_id]`; its self-improvement into the dataset runs in the background)."""
        async with refusing(stack, caller, body.dataset):
            if body.session_id is not None and body.self_improvement and body.has_text():  # the background run writes it: check now
                await stack.datasets.resolve(body.dataset, caller, "write", create=True)
            result = await stack.remember(
                body.text, dataset=body.dataset, session_id=body.session_id, user=caller, self_improvement=body.self_improvement, tags=body.tags
            )
        if result.status == "cache_unavailable":
            raise HTTPException(status_code=503, detail="the session cache is unavailable: the turn was not stored")
        return json_answer(result.model_dump_json())

    @app.post("/api/v1/recall", response_model=list[AnyRecallResponse], responses=_answers(404, 409, 502), tags=["memory"])
    async def recall(caller: Caller, body: RecallRequest) -> Response:
        """Search memory: the session, the graph or both; session hits carry `qa_id` (for feedback), graph hits text and score."""
        found = await stack.recall(body.query, body.query_type, user=caller, **body.model_dump(exclude={"query", "query_type"}))
        return json_answer(results_json(found))

    @app.post("/api/v1/search", response_model=list[AnyRecallResponse], responses=_answers(404, 409, 502), tags=["memory"])
    async def search(caller: Caller, body: SearchRequest) -> Response:
        """One search type over the graph; a completion type answers with the session's last turns and stores the turn in it."""
        found = await stack.search(body.query, body.query_type, user=caller, **body.model_dump(exclude={"query", "query_type"}))
        return json_answer(results_json(found))

    @app.post("/api/v1/forget", response_model=ForgetResult, responses=_answers(403, 404, 409), tags=["memory"])
    async def forget(caller: Caller, body: ForgetRequest) -> Response:
        """Delete permanent memory and the session turns built on it; the answer lists what was (with `dry_run`: would be) removed."""
        target = body.dataset if body.dataset is not None else MAIN_DATASET
        async with refusing(stack, caller, target):
            result = await stack.forget(
                dataset=body.dataset,
                data_id=None if body.data_id is None else str(body.data_id),
                memory_only=body.memory_only, everything=body.everything, user=caller, dry_run=body.dry_run
            )
        return json_answer(result.model_dump_json())

    @app.post("/api/v1/sessions/{session_id:path}/feedback", response_model=FeedbackResult, responses=_answers(404), tags=["sessions"])
    async def feedback(caller: Caller, session_id: str, body: FeedbackRequest) -> FeedbackResult:
        """Rate and / or annotate a turn of the caller's session; 404 when the session has no turn `qa_id` (or is not the caller's)."""
        stored = await stack.session.add_feedback(
            session_id, body.qa_id, feedback_text=body.feedback_text, feedback_score=body.feedback_score, user=caller
        )
        if not stored:
            raise HTTPException(status_code=404, detail=TURN_NOT_FOUND)
        return FeedbackResult(stored=True, session_id=session_id, qa_id=body.qa_id)

    @app.post("/api/v1/sessions/{session_id:path}/end", response_model=EndResult, responses=_answers(404), tags=["sessions"])
    async def end(caller: Caller, session_id: str, body: EndRequest | None = None) -> EndResult:
        """Mark the caller's session ended (`completed` or `failed`; its usage stops counting); 404 when it has no record."""
        status = body.status if body is not None else "completed"
        if not await stack.session.end(session_id, status=status, user=caller):
            raise HTTPException(status_code=404, detail=SESSION_NOT_FOUND)
        return EndResult(ended=True, session_id=session_id, status=status)
