"""The ceiling of ``memlab bench serve``: a bare FastAPI app running the SQL the memlab API runs.

Four endpoints at the memlab API's paths, answering the same JSON for the same data,
with the least code FastAPI allows: the bearer key's SHA-256 looked up with memlab's own
``api_key_user`` statement (one lookup), then the endpoint's statements (memlab's
``usage_*`` statements, compiled once at startup for the dialect, so the SQL text is the
same), through the driver the metadata store uses: the standard library's ``sqlite3``
on the event loop (as memlab's ``SQLiteRunner`` does when uncontended) or ``asyncpg``
(4 connections per worker, as memlab's ``PostgresRunner`` keeps). An endpoint of one
statement runs it alone (one round trip); an endpoint of two (a page and its count,
a session and its models) runs them in one read-only snapshot, as memlab does. Rows
become the response dict by hand and go out as a ``JSONResponse``: no pydantic model,
no dependency injection, no response validation, no query validation beyond choosing
the statement. A missing or unknown key is a 401, an unknown session a 404, like memlab;
other errors are not what it measures.

``python -m memlab.bench._serve_ceiling --port P --workers N`` runs it the way
``memlab serve`` runs (:func:`memlab.api._app.run_factory`), on the stores the
environment names (``MEMLAB_DATA_ROOT`` / ``MEMLAB_DB_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from memlab._sqlrun import CompiledStatements, resolve_url
from memlab.relational import statements_for
from memlab.usage import RANGES, STATUSES

__all__ = ["STATEMENTS", "app_for", "app_from_env", "create_ceiling_app", "main"]

_ORDERS = ("last_activity_at", "started_at", "ended_at", "cost_usd", "tokens_in", "tokens_out")
#: the memlab statements the ceiling runs (every listing, the count, one session and its models, stats, cost by model, the key)
STATEMENTS = (
    *(f"usage_list_{column}_{way}" for column in _ORDERS for way in ("desc", "asc")),
    "usage_count", "usage_get", "usage_models", "usage_stats", "usage_cost_by_model", "api_key_user",
)


def _priced_total(cost: float | None, tokens: int, unpriced: int) -> tuple[float | None, bool]:
    """``(cost, partially_priced)``: memlab's rule of every usage total (no cost when every token is unpriced)."""
    return (None, False) if unpriced and unpriced >= tokens else (cost, bool(unpriced))


def _ts(value: str | None) -> str | None:
    """A stored ISO timestamp as pydantic writes the aware datetime (UTC as ``Z``; a naive one is UTC)."""
    if value is None:
        return None
    if value.endswith("+00:00"):
        return value[:-6] + "Z"
    return value if value.endswith("Z") or value[-6] in "+-" else value + "Z"


def _session(row: Any) -> dict[str, Any]:
    cost, partial = _priced_total(row[9], row[7] + row[8], row[10] + row[11])
    embedding_cost, embedding_partial = _priced_total(row[13], row[12], row[14])
    return {
        "tokens_in": row[7], "tokens_out": row[8], "cost_usd": cost, "unpriced_tokens_in": row[10], "unpriced_tokens_out": row[11],
        "partially_priced": partial, "embedding_tokens": row[12], "embedding_cost_usd": embedding_cost,
        "unpriced_embedding_tokens": row[14], "embedding_partially_priced": embedding_partial,
        "session_id": row[0], "user_id": row[1], "dataset_id": row[2], "status": row[3], "effective_status": row[17],
        "started_at": _ts(row[4]), "last_activity_at": _ts(row[5]), "ended_at": _ts(row[6]), "error_count": row[15],
        "last_model": row[16], "models": [],
    }


def _model(row: Any) -> dict[str, Any]:
    cost, partial = _priced_total(row[5] or 0.0, row[3] + row[4], row[8] + row[9])
    return {
        "tokens_in": row[3], "tokens_out": row[4], "cost_usd": cost, "unpriced_tokens_in": row[8], "unpriced_tokens_out": row[9],
        "partially_priced": partial, "model": row[0], "kind": row[1], "calls": row[2], "usage_source": row[6],
        "updated_at": _ts(row[7]), "priced": not (row[8] or row[9]),
    }


def _stats(range_: str, row: Any) -> dict[str, Any]:
    sessions, tokens_in, tokens_out, cost, unpriced_in, unpriced_out, embedding, embedding_cost, unpriced_embedding, errors, *by_status = row
    cost, partial = _priced_total(float(cost), tokens_in + tokens_out, unpriced_in + unpriced_out)
    embedding_cost, embedding_partial = _priced_total(float(embedding_cost), embedding, unpriced_embedding)
    return {
        "tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost, "unpriced_tokens_in": unpriced_in,
        "unpriced_tokens_out": unpriced_out, "partially_priced": partial, "embedding_tokens": embedding,
        "embedding_cost_usd": embedding_cost, "unpriced_embedding_tokens": unpriced_embedding,
        "embedding_partially_priced": embedding_partial, "range": range_, "sessions": sessions,
        "by_status": {status: int(count or 0) for status, count in zip(STATUSES, by_status)}, "error_count": errors,
    }


def _cost(row: Any) -> dict[str, Any]:
    model, kind, sessions, calls, tokens_in, tokens_out, cost, unpriced_in, unpriced_out = row
    cost, partial = _priced_total(float(cost), tokens_in + tokens_out, unpriced_in + unpriced_out)
    return {
        "tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost, "unpriced_tokens_in": unpriced_in,
        "unpriced_tokens_out": unpriced_out, "partially_priced": partial, "model": model, "kind": kind,
        "sessions": sessions, "calls": calls, "priced": not (unpriced_in or unpriced_out),
    }


class _SQLite:
    """One ``sqlite3`` connection used on the loop (WAL, synchronous=NORMAL, as memlab's)."""

    def __init__(self, path: Path) -> None:
        from sqlalchemy.dialects import sqlite

        self.sql = CompiledStatements(sqlite.dialect(), {name: statements_for("sqlite")[name] for name in STATEMENTS})
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")

    async def rows(self, name: str, params: dict[str, Any]) -> list[Any]:
        return self.conn.execute(*self.sql.bind(name, params)).fetchall()

    async def both(self, first: tuple[str, dict[str, Any]], then: Any) -> tuple[list[Any], list[Any]]:
        """``first``'s rows, and the rows of the statement ``then(rows)`` names (``(name, params)``, or None: none), in one snapshot."""
        self.conn.execute("BEGIN")
        try:
            rows = self.conn.execute(*self.sql.bind(*first)).fetchall()
            second = then(rows)
            more = self.conn.execute(*self.sql.bind(*second)).fetchall() if second else []
        finally:
            self.conn.execute("COMMIT")
        return rows, more

    async def close(self) -> None:
        self.conn.close()


class _Postgres:
    """Four ``asyncpg`` connections in a queue (memlab's runner keeps four per stack)."""

    def __init__(self, url: Any) -> None:
        from sqlalchemy.dialects.postgresql.asyncpg import dialect

        self.sql = CompiledStatements(dialect(), {name: statements_for("postgresql")[name] for name in STATEMENTS})
        self.url = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.idle: asyncio.Queue[Any] = asyncio.Queue()

    async def open(self) -> None:
        import asyncpg

        for _ in range(4):
            self.idle.put_nowait(await asyncpg.connect(self.url))

    async def rows(self, name: str, params: dict[str, Any]) -> list[Any]:
        sql, args = self.sql.bind(name, params)
        conn = await self.idle.get()
        try:
            return await conn.fetch(sql, *args)
        finally:
            self.idle.put_nowait(conn)

    async def both(self, first: tuple[str, dict[str, Any]], then: Any) -> tuple[list[Any], list[Any]]:
        conn = await self.idle.get()
        try:
            async with conn.transaction(isolation="repeatable_read", readonly=True):
                sql, args = self.sql.bind(*first)
                rows = await conn.fetch(sql, *args)
                second = then(rows)
                if second:
                    sql, args = self.sql.bind(*second)
                more = await conn.fetch(sql, *args) if second else []
        finally:
            self.idle.put_nowait(conn)
        return rows, more

    async def close(self) -> None:
        while not self.idle.empty():
            await self.idle.get_nowait().close()


def _unauthorized(detail: str, challenge: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=401, headers={"WWW-Authenticate": challenge})


def create_ceiling_app(db: Any, idle_limit_seconds: float) -> FastAPI:
    """The bare app over ``db`` (``_SQLite`` or ``_Postgres``); ``idle_limit_seconds``: memlab's abandon window."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if isinstance(db, _Postgres):
            await db.open()
        try:
            yield
        finally:
            await db.close()

    app = FastAPI(title="memlab bench serve ceiling", lifespan=lifespan)
    app.state.db = db
    idle = timedelta(seconds=idle_limit_seconds)

    async def seen(request: Request) -> dict[str, Any] | JSONResponse:
        """The visibility binds of the caller of the bearer key (one lookup), or the 401."""
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            return _unauthorized("an API key is required: send 'Authorization: Bearer <key>'", "Bearer")
        found = await db.rows("api_key_user", {"key_hash": hashlib.sha256(header[7:].encode()).hexdigest()})
        if not found:
            return _unauthorized("the API key is unknown or revoked", 'Bearer error="invalid_token"')
        caller = found[0]
        cutoff = (datetime.now(timezone.utc) - idle).isoformat()
        return {"caller": caller[0], "parent": caller[2] or caller[0], "cutoff": cutoff}

    def since(range_: str) -> str:
        span = RANGES[range_]
        return "" if span is None else (datetime.now(timezone.utc) - span).isoformat()

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "stack": "open", "version": "ceiling"})

    @app.get("/api/v1/sessions")
    async def list_sessions(
        request: Request, status: str | None = None, order_by: str = "last_activity_at", descending: bool = True, limit: int = 50, offset: int = 0
    ) -> JSONResponse:
        binds = await seen(request)
        if isinstance(binds, JSONResponse):
            return binds
        binds["status"] = status
        name = f"usage_list_{order_by}_{'desc' if descending else 'asc'}"
        rows, count = await db.both((name, {**binds, "limit": limit, "offset": offset}), lambda rows: ("usage_count", binds))
        total = count[0][0]
        return JSONResponse({"items": [_session(row) for row in rows], "total": total, "has_more": offset + len(rows) < total, "limit": limit, "offset": offset})

    async def ranged(request: Request, range_: str, name: str, shape: Any) -> JSONResponse:
        """The one statement ``name`` over the visible sessions active in the range, its rows as ``shape(rows)``."""
        binds = await seen(request)
        if isinstance(binds, JSONResponse):
            return binds
        return JSONResponse(shape(await db.rows(name, {**binds, "since": since(range_)})))

    @app.get("/api/v1/sessions/stats")
    async def stats(request: Request, range: str = "30d") -> JSONResponse:
        return await ranged(request, range, "usage_stats", lambda rows: _stats(range, rows[0]))

    @app.get("/api/v1/sessions/cost-by-model")
    async def cost_by_model(request: Request, range: str = "30d") -> JSONResponse:
        return await ranged(request, range, "usage_cost_by_model", lambda rows: [_cost(row) for row in rows])

    @app.get("/api/v1/sessions/{session_id:path}")
    async def get_session(request: Request, session_id: str) -> JSONResponse:
        binds = await seen(request)
        if isinstance(binds, JSONResponse):
            return binds
        rows, models = await db.both(
            ("usage_get", {**binds, "session_id": session_id}),
            lambda rows: ("usage_models", {"session_id": session_id, "user_id": rows[0][1]}) if rows else None,
        )
        if not rows:
            return JSONResponse({"detail": "session not found"}, status_code=404)
        body = _session(rows[0])
        body["models"] = [_model(row) for row in models]
        return JSONResponse(body)

    return app


def app_from_env() -> FastAPI:
    """The ceiling app on the metadata database of the environment's stack, with that stack's abandon window."""
    from memlab.config import StackConfig

    return app_for(StackConfig.from_env())


def app_for(config: Any) -> FastAPI:
    """The ceiling app on the metadata database of the stack ``config`` (a ``StackConfig``) describes, with its abandon window."""
    from memlab.stack import MemoryStack

    stack = MemoryStack.from_config(config)  # never opened: read for its abandon window
    url = config.db_url  # the metadata database, as the stack builds it: MEMLAB_DB_URL, else {data_root}/memlab.db
    if url is not None and resolve_url(url)[0] == "postgresql":
        db: Any = _Postgres(resolve_url(url)[1])
    else:
        db = _SQLite(Path(resolve_url(url)[1].database or "") if url is not None else Path(config.data_root) / "memlab.db")
    return create_ceiling_app(db, stack.usage.idle_limit_seconds)


def main(argv: list[str] | None = None) -> None:
    from memlab.api import run_factory

    parser = argparse.ArgumentParser(prog="python -m memlab.bench._serve_ceiling", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    run_factory("memlab.bench._serve_ceiling:app_from_env", app_from_env, host=args.host, port=args.port, workers=args.workers)


if __name__ == "__main__":
    main()
