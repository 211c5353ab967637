"""memlab as an MCP server, on the official ``mcp`` Python SDK: ``memlab mcp`` (stdio) or ``memlab mcp --http``.

::

    memlab mcp                                   stdio: an MCP client starts it as a subprocess
    memlab mcp --http [--host H] [--port P]      streamable HTTP at http://H:P/mcp, API keys required

Tools (each with a typed input schema and a structured result; see :data:`TOOL_NAMES`):

========================  =====================================================================
``remember``              text into permanent memory, or with ``session_id`` as one session turn
``recall``                search the session, the graph or both (``stack.recall``)
``search``                one search type over the graph, session-aware (``stack.search``)
``forget``                delete a dataset, a document or everything; ``dry_run`` changes nothing
``add_feedback``          rate / annotate a stored turn (``stack.session.add_feedback``)
``get_session``           a session's turns, oldest first (``last_n``)
``list_sessions``         a page of the caller's visible sessions (``stack.usage.list_sessions``)
``session_usage``         one visible session's tokens, cost, status and per-model usage
``end_session``           mark a session ``completed`` or ``failed`` (``stack.session.end``)
========================  =====================================================================

**Who the caller is.** Over HTTP every request needs ``Authorization: Bearer <key>``, a key
of ``memlab users create-key NAME`` / ``stack.users.create_api_key(user)``, the same keys
as ``memlab serve``: the SDK's bearer middleware asks :class:`ApiKeyVerifier`, which asks
``stack.users.user_for_api_key``; a missing, unknown or revoked key is HTTP 401 before any
MCP message is read, and each tool call acts as the key's user (its own sessions, its agent
users', the datasets it may read or write: memlab's permission model, unchanged). An MCP
session is bound to the user that opened it (the SDK refuses another key on it). Over
stdio the server acts as the owner of the key in ``MEMLAB_API_KEY`` when that is set (an
unknown key stops the server before it starts), else as memlab's default user.

**Errors.** A memlab error is an MCP tool error (``isError: true``, the text
``"Error executing tool <name>: <kind>: <ErrorClass>: <message>"``, the prefix the SDK's, kind one of ``invalid argument``,
``permission denied``, ``not found``, ``unavailable``, ``model call failed``,
``memlab error``: :func:`memlab.remote.error_kind`, which the HTTP API's statuses follow too;
``not found`` is an unknown dataset or document, or ``session_usage`` of a session you cannot
see); arguments that fail the input schema are tool errors from the SDK. The
server keeps running; only a bug in memlab becomes the SDK's generic
``Error executing tool <name>`` (logged with its traceback on stderr).

``remember`` stores text only: a string starting with ``file://`` (which the Python API
reads as a path on the server) is refused, so a client cannot make the server read its files.

In code: :func:`create_server` (an ``MCPServer`` over a stack; the stack must be open
while it serves), :func:`http_app` (the Starlette app of ``--http``: opens the stack in its
lifespan unless it is open already, ``GET /healthz`` without a key), :func:`run_stdio`,
:func:`serve_http`. The SDK is imported when one of them is called, never by ``import
memlab``: ``pip install 'memlab[mcp]'``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field

from memlab.exceptions import ConfigError, MemlabError, ValidationError
from memlab.lifecycle import StackState
from memlab.models import AnyRecallResponse, ForgetResult, RememberResult, SessionPage, SessionQAEntry, SessionUsage, User
from memlab.remote import (
    DatasetIds,
    Datasets,
    EndResult,
    EndStatus,
    FeedbackResult,
    FeedbackScore,
    Ids,
    OrderBy,
    SessionStatus,
    TopK,
    WritableDataset,
    check_remember_text,
    error_kind,
)
from memlab.retrievers import SearchType

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette

    from memlab.stack import MemoryStack

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_HTTP_PORT",
    "MCP_PATH",
    "TOOL_NAMES",
    "ApiKeyVerifier",
    "EndResult",
    "FeedbackResult",
    "create_server",
    "http_app",
    "run_stdio",
    "serve_http",
    "tool_error_text",
]

#: the tools the server exposes, in the order ``tools/list`` gives them
TOOL_NAMES = (
    "remember",
    "recall",
    "search",
    "forget",
    "add_feedback",
    "get_session",
    "list_sessions",
    "session_usage",
    "end_session",
)
#: the stdio server acts as the owner of this key when the variable is set
API_KEY_ENV = "MEMLAB_API_KEY"
#: ``memlab mcp --http``'s default port (``memlab serve`` has 8000)
DEFAULT_HTTP_PORT = 8001
#: the streamable HTTP endpoint
MCP_PATH = "/mcp"

_INSTRUCTIONS = (
    "memlab: agent memory. remember stores text (with session_id: one turn of that session; without: permanent "
    "memory, a knowledge graph per dataset); recall searches the session and/or the graph; search runs one graph "
    "search type and records the turn in the session; add_feedback rates a turn (qa_id from get_session or recall); "
    "forget deletes (dry_run=true shows what would go); list_sessions and session_usage report tokens and cost."
)

SessionId = Annotated[str | None, Field(description="the session's id; omitted: the default session of your main_dataset")]


def _sdk() -> None:
    """Fail with the extra to install when the MCP SDK is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ImportError("memlab.integrations.mcp needs the MCP SDK: pip install 'memlab[mcp]'") from exc


def tool_error_text(exc: MemlabError) -> str:
    """The text of the tool error a memlab error becomes: ``"<kind>: <ErrorClass>: <message>"``, on one line (kind: :func:`memlab.remote.error_kind`)."""
    message = " ".join(str(exc).split())
    kind = error_kind(exc)
    return f"{kind}: {type(exc).__name__}: {message}" if message else f"{kind}: {type(exc).__name__}"


class ApiKeyVerifier:
    """The SDK's ``TokenVerifier`` over memlab's API keys: ``stack.users.user_for_api_key``.

    The access token's ``client_id`` and ``subject`` are the key's user id (so the SDK binds
    each MCP session to that user); None (HTTP 401) for a key that is malformed, unknown or revoked.
    """

    def __init__(self, stack: "MemoryStack") -> None:
        self._stack = stack

    async def verify_token(self, token: str) -> "AccessToken | None":
        from mcp.server.auth.provider import AccessToken

        try:
            user = await self._stack.users.user_for_api_key(token)
        except ValidationError:  # not even shaped like a key
            return None
        if user is None:
            return None
        return AccessToken(token=token, client_id=str(user.id), subject=str(user.id), scopes=[])


def create_server(stack: "MemoryStack", *, authenticated: bool = False, user: User | None = None, issuer_url: str | None = None) -> "MCPServer":
    """An ``MCPServer`` whose tools call ``stack`` (open it before serving, close it after).

    ``authenticated``: every request must carry an API key (the HTTP transport; see
    :class:`ApiKeyVerifier`) and each tool acts as the key's user; ``issuer_url`` is the
    server's own URL, which the SDK's auth settings require (memlab issues the keys itself: no
    OAuth route is served). Otherwise the tools act as ``user`` (None: the default user).
    """
    _sdk()
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from memlab import __version__

    auth: dict[str, Any] = {}
    if authenticated:
        auth = {
            "token_verifier": ApiKeyVerifier(stack),
            "auth": AuthSettings(issuer_url=issuer_url or "http://127.0.0.1", resource_server_url=None),
        }
    # log_level: the SDK configures the root logger once (stderr); memlab's server keeps it to warnings
    server: MCPServer = MCPServer("memlab", title="memlab", instructions=_INSTRUCTIONS, version=__version__, log_level="WARNING", **auth)

    @contextmanager
    def mapped() -> Iterator[None]:
        try:
            yield
        except MemlabError as exc:
            raise ToolError(tool_error_text(exc)) from exc

    async def caller() -> User | None:
        if not authenticated:
            return user
        token = get_access_token()
        if token is None:  # the SDK's middleware refuses such a request before it gets here
            raise ToolError("permission denied: an API key is required")
        found = await stack.users.get(uuid.UUID(token.client_id))
        if found is None:
            raise ToolError("permission denied: the API key's user no longer exists")
        return found

    reads = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    @server.tool(annotations=writes)
    async def remember(
        text: Annotated[str | list[str], Field(description="the text to store, or a list of texts (one document each)")],
        dataset: WritableDataset = "main_dataset",
        session_id: Annotated[str | None, Field(description="store the text as one turn of this session instead of permanent memory")] = None,
        self_improvement: Annotated[bool, Field(description="with session_id: bridge the session into the dataset's graph in the background")] = True,
        tags: Annotated[list[str], Field(description="labels of the documents: 'skills', 'coding_rules', ...")] = [],  # noqa: B006 - pydantic copies defaults
    ) -> RememberResult:
        """Store text in memlab: without session_id as documents of `dataset` (chunked, extracted, embedded into its graph); with session_id as one session turn."""
        with mapped():
            check_remember_text(text)
            return await stack.remember(
                text, dataset=dataset, session_id=session_id, user=await caller(), self_improvement=self_improvement, tags=tags
            )

    @server.tool(annotations=reads)
    async def recall(
        query: Annotated[str, Field(description="what to look for")],
        query_type: Annotated[SearchType | None, Field(description="a graph search type; omitted: routed by rule")] = None,
        session_id: Annotated[str | None, Field(description="search this session first (then the graph when it finds nothing)")] = None,
        datasets: Datasets = None,
        dataset_ids: DatasetIds = None,
        top_k: TopK = 15,
        scope: Annotated[
            str | list[str] | None,
            Field(description="auto (default), graph, session, trace, session_context, all, ... or a list of them"),
        ] = None,
        only_context: Annotated[bool, Field(description="return the retrieved context, no answer")] = False,
    ) -> list[AnyRecallResponse]:
        """Search memory: the session, the graph, or both. Session hits carry qa_id (for add_feedback); graph hits carry text and score."""
        with mapped():
            found = await stack.recall(
                query, query_type, datasets=datasets, dataset_ids=dataset_ids, top_k=top_k, scope=scope, session_id=session_id, user=await caller(), only_context=only_context
            )
        return cast("list[AnyRecallResponse]", found)  # each is one of the union's members (the SDK validates it)

    @server.tool(annotations=writes)
    async def search(
        query: Annotated[str, Field(description="the question")],
        query_type: Annotated[SearchType, Field(description="the graph search type")] = SearchType.GRAPH_COMPLETION,
        session_id: SessionId = None,
        datasets: Datasets = None,
        dataset_ids: DatasetIds = None,
        top_k: TopK = 15,
        only_context: Annotated[bool, Field(description="return the retrieved context only (the session is neither read nor written)")] = False,
    ) -> list[AnyRecallResponse]:
        """One search type over the graph; a completion type answers with the session's last turns in the prompt and stores the turn."""
        with mapped():
            found = await stack.search(
                query, query_type, session_id=session_id, datasets=datasets, dataset_ids=dataset_ids, top_k=top_k, user=await caller(), only_context=only_context
            )
        return cast("list[AnyRecallResponse]", found)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False))
    async def forget(
        dataset: Annotated[str | None, Field(description="the dataset (name or id) to delete, or the one data_id is in (default main_dataset)")] = None,
        data_id: Annotated[str | None, Field(description="delete only this document and what only it supported")] = None,
        memory_only: Annotated[bool, Field(description="delete the dataset's graph and vectors only; its documents stay")] = False,
        everything: Annotated[bool, Field(description="delete every dataset you own and every session of yours")] = False,
        dry_run: Annotated[bool, Field(description="change nothing; return what the delete would remove")] = False,
    ) -> ForgetResult:
        """Delete permanent memory and the session turns built on it; the result lists what was (or, with dry_run, would be) removed."""
        with mapped():
            return await stack.forget(
                dataset=dataset, data_id=data_id, memory_only=memory_only, everything=everything, user=await caller(), dry_run=dry_run
            )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False))
    async def add_feedback(
        qa_id: Annotated[Ids, Field(description="the turn's qa_id (from get_session or recall)")],
        session_id: SessionId = None,
        feedback_text: Annotated[str | None, Field(description="what was right or wrong")] = None,
        feedback_score: FeedbackScore = None,
    ) -> FeedbackResult:
        """Annotate a stored turn with a score and/or text; stored is false when the session has no such turn."""
        with mapped():
            stored = await stack.session.add_feedback(
                session_id, qa_id, feedback_text=feedback_text, feedback_score=feedback_score, user=await caller()
            )
        return FeedbackResult(stored=stored, session_id=session_id, qa_id=qa_id)

    @server.tool(annotations=reads)
    async def get_session(
        session_id: SessionId = None,
        last_n: Annotated[int | None, Field(ge=1, description="only the last n turns")] = None,
    ) -> list[SessionQAEntry]:
        """The session's turns, oldest first ([] for an unknown session)."""
        with mapped():
            return await stack.session.get_session(session_id, last_n=last_n, user=await caller())

    @server.tool(annotations=reads)
    async def list_sessions(
        status: Annotated[SessionStatus | None, Field(description="only sessions of this effective status")] = None,
        order_by: OrderBy = "last_activity_at",
        descending: bool = True,
        limit: Annotated[int, Field(ge=1, le=1000)] = 50,
        offset: Annotated[int, Field(ge=0, le=2**31 - 1)] = 0,
    ) -> SessionPage:
        """A page of the sessions you may see (yours, your agent users', those of datasets you may read), with tokens and cost."""
        with mapped():
            return await stack.usage.list_sessions(
                await caller(), status=status, order_by=order_by, descending=descending, limit=limit, offset=offset
            )

    @server.tool(annotations=reads)
    async def session_usage(session_id: Annotated[Ids, Field(description="the session's id")]) -> SessionUsage:
        """One visible session's usage: tokens in and out, cost, status, times and per-model usage."""
        with mapped():
            found = await stack.usage.get(session_id, user=await caller())
        if found is None:
            raise ToolError(f"not found: no session {session_id!r} visible to you")
        return found

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False))
    async def end_session(
        session_id: SessionId = None,
        status: Annotated[EndStatus, Field(description="how the session ended")] = "completed",
    ) -> EndResult:
        """Mark the session ended (its usage stops counting); ended is false when nothing was ever stored in it."""
        with mapped():
            ended = await stack.session.end(session_id, status=status, user=await caller())
        return EndResult(ended=ended, session_id=session_id, status=status)

    return server


async def _stdio_user(stack: "MemoryStack") -> User | None:
    """The owner of the key in ``MEMLAB_API_KEY``, or None (the default user) when it is unset."""
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        return None
    try:
        owner = await stack.users.user_for_api_key(key)
    except ValidationError:
        owner = None
    if owner is None:
        raise ConfigError(f"{API_KEY_ENV} is not a live memlab API key (unknown or revoked)")
    return owner


async def run_stdio(stack: "MemoryStack") -> None:
    """Serve MCP over this process's stdin/stdout until the client closes it; opens and closes ``stack`` unless it is open."""
    _sdk()
    async with _opened(stack):
        server = create_server(stack, user=await _stdio_user(stack))
        await server.run_stdio_async()


def http_app(stack: "MemoryStack", *, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT) -> "Starlette":
    """The streamable HTTP app (``POST/GET/DELETE /mcp`` with API keys, ``GET /healthz`` without).

    Its lifespan opens ``stack`` unless it is open already (and then closes it). On a
    loopback ``host`` the SDK's DNS-rebinding protection accepts only loopback Host and
    Origin headers.
    """
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    from memlab import __version__

    server = create_server(stack, authenticated=True, issuer_url=f"http://{host}:{port}")

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(request: Request) -> JSONResponse:
        open_ = stack.state is StackState.OPEN
        body = {"status": "ok" if open_ else "unavailable", "stack": stack.state.value, "version": __version__}
        return JSONResponse(body, status_code=200 if open_ else 503)

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(app_: Any) -> AsyncIterator[None]:
        async with _opened(stack), inner(app_):
            yield

    app.router.lifespan_context = lifespan
    return app


def serve_http(stack: "MemoryStack", *, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT) -> None:
    """Run :func:`http_app` with uvicorn (one process; the stack opens in its lifespan)."""
    _sdk()
    import uvicorn

    uvicorn.run(http_app(stack, host=host, port=port), host=host, port=port, lifespan="on", ws="none", log_level="warning")


@asynccontextmanager
async def _opened(stack: "MemoryStack") -> AsyncIterator[None]:
    """``async with stack`` when it is not open yet; a stack opened by the caller stays theirs to close."""
    if stack.state is not StackState.UNOPENED:
        yield
        return
    async with stack:
        yield
