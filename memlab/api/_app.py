"""The FastAPI app: its lifespan, the read routes, and the pieces it is built from (see :mod:`memlab.api`).

``_auth`` is the caller (the bearer key's user), ``_errors`` how failures answer, ``_bodies`` the
request bodies and JSON answers, ``_writes`` the POST routes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import FastAPI, HTTPException, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, TypeAdapter

from memlab.api._auth import AUTH_ERRORS, Caller, ErrorBody
from memlab.api._bodies import json_answer
from memlab.api._errors import SESSION_NOT_FOUND, install
from memlab.api._writes import add_write_routes
from memlab.lifecycle import StackState
from memlab.models import ModelCost, SessionPage, SessionUsage, UsageStats
from memlab.remote import OrderBy, SessionStatus
from memlab.stack import MemoryStack
from memlab.usage import MAX_LIMIT, MAX_OFFSET

__all__ = ["ErrorBody", "Health", "app_from_env", "create_app", "run_factory", "serve"]

#: query values ``stack.usage`` accepts, declared so the OpenAPI schema lists them (with ``SessionStatus`` and
#: ``OrderBy`` of :mod:`memlab.remote`, imported here for the read routes)
UsageRange = Literal["24h", "7d", "30d", "all"]


class Health(BaseModel):
    """``GET /healthz``: ``ok`` (HTTP 200) while the stack is open, else ``unavailable`` (HTTP 503)."""

    status: Literal["ok", "unavailable"]
    stack: Literal["unopened", "open", "closed"]
    version: str


RangeQuery = Annotated[UsageRange, Query(alias="range", description="the window counted back from now (by last activity)")]

#: ``list[ModelCost]`` to JSON, as FastAPI serialises a response_model (no aliases in these models)
_MODEL_COSTS = TypeAdapter(list[ModelCost])


def create_app(stack: MemoryStack) -> FastAPI:
    """The API over ``stack``; the app opens the stack on startup unless it is open already (and then closes it, which
    waits for the background self-improvement that remember scheduled: ``MemoryStack.close``)."""
    from memlab import __version__

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened_here = stack.state is StackState.UNOPENED
        if opened_here:
            await stack.open()
        try:
            yield
        finally:
            if opened_here:
                await stack.close()

    from fastapi_offline import FastAPIOffline

    # /docs and /redoc load Swagger UI and ReDoc from assets shipped in fastapi-offline, not from a CDN
    app = FastAPIOffline(
        title="memlab",
        version=__version__,
        summary="Agent memory over HTTP: remember, recall, search, forget and rate turns as the caller; "
        "the usage and cost of the sessions visible to it.",
        lifespan=lifespan,
    )
    app.state.stack = stack
    # the routes' caller is the user _caller has just read from the store (with its parent), so usage reads it no
    # more (the *_for methods), and each answer is the model's own JSON, the response_model declaring its schema:
    # FastAPI would validate the returned model again (rebuilding every row) before serialising the same JSON
    usage = stack.usage
    install(app)

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}}, tags=["health"])
    async def healthz() -> Any:
        """The stack state; no authentication."""
        state = stack.state.value
        body = Health(status="ok" if stack.state is StackState.OPEN else "unavailable", stack=state, version=__version__)
        return body if body.status == "ok" else JSONResponse(status_code=503, content=body.model_dump())

    @app.get("/api/v1/sessions", response_model=SessionPage, responses=AUTH_ERRORS, tags=["sessions"])
    async def list_sessions(
        caller: Caller,
        status: Annotated[SessionStatus | None, Query(description="effective status (abandoned is computed)")] = None,
        order_by: OrderBy = "last_activity_at",
        descending: bool = True,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> Response:
        """One page of the sessions visible to the caller (its own, its agents', those of datasets it may read)."""
        page = await usage.list_sessions_for(caller, status=status, order_by=order_by, descending=descending, limit=limit, offset=offset)
        return json_answer(page.model_dump_json())

    # before /{session_id}: these two paths are not session ids
    @app.get("/api/v1/sessions/stats", response_model=UsageStats, responses=AUTH_ERRORS, tags=["sessions"])
    async def stats(caller: Caller, range_: RangeQuery = "30d") -> Response:
        """Totals over the visible sessions active in the range."""
        return json_answer((await usage.stats_for(caller, range_)).model_dump_json())

    @app.get("/api/v1/sessions/cost-by-model", response_model=list[ModelCost], responses=AUTH_ERRORS, tags=["sessions"])
    async def cost_by_model(caller: Caller, range_: RangeQuery = "30d") -> Response:
        """Usage and cost per (model, kind) over the visible sessions active in the range."""
        return json_answer(_MODEL_COSTS.dump_json(await usage.cost_by_model_for(caller, range_)))

    @app.get(
        "/api/v1/sessions/{session_id:path}",
        response_model=SessionUsage,
        responses={**AUTH_ERRORS, 404: {"model": ErrorBody, "description": "no such session visible to the caller"}},
        tags=["sessions"],
    )
    async def get_session(caller: Caller, session_id: str) -> Response:
        """One visible session with its per-model usage; 404 when it is unknown or not visible (one answer for both)."""
        found = await usage.get_for(caller, session_id)
        if found is None:
            raise HTTPException(status_code=404, detail=SESSION_NOT_FOUND)
        return json_answer(found.model_dump_json())

    add_write_routes(app, stack)
    return app


def app_from_env() -> FastAPI:
    """``create_app`` on ``MemoryStack.from_env()``: the factory of ``memlab serve`` (one stack per worker)."""
    return create_app(MemoryStack.from_env())


def serve(*, host: str = "127.0.0.1", port: int = 8000, workers: int = 1) -> None:
    """Run the API with uvicorn on the stack from the environment; ``workers > 1`` starts that many processes."""
    run_factory("memlab.api:app_from_env", app_from_env, host=host, port=port, workers=workers)


def run_factory(target: str, factory: Callable[[], Any], *, host: str, port: int, workers: int) -> None:
    """Run the app ``factory()`` builds under uvicorn; ``workers > 1``: that many processes importing ``target`` (``module:factory``).

    The way ``memlab serve`` runs, shared with ``memlab bench serve``'s ceiling app so both are served alike.
    """
    import uvicorn

    options: dict[str, Any] = {"host": host, "port": port, "lifespan": "on", "ws": "none"}  # the stack opens in the lifespan
    if workers == 1:
        uvicorn.run(factory(), **options)
        return
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(target, factory=True, workers=workers, **options)
    Multiprocess(config, sockets=[_tcp(config.bind_socket())]).run()


def _tcp(sock: Any) -> Any:
    """The listening socket re-wrapped with ``proto=IPPROTO_TCP``.

    uvicorn binds the shared socket of several workers with ``proto`` 0, and asyncio
    turns ``TCP_NODELAY`` on only for sockets whose ``proto`` says TCP, so every answer
    on a kept-alive connection waited for the client's delayed ACK (~40 ms; uvicorn
    issue 3149). Measured: 45 ms -> 3-5 ms median per kept-alive request on 2 workers.
    """
    import socket

    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return sock
    wrapped = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=sock.detach())
    wrapped.set_inheritable(True)
    return wrapped
