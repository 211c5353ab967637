"""``memlab bench serve --profile``: where one request's time goes, in µs, memlab's app beside the ceiling app.

Both apps are called in this process as ASGI applications (no HTTP server, no socket,
no client: what is left is the app's own work), on the seeded stores, the same
requests of each endpoint to both, in alternating passes. Each pass times every
request; the parts are timed by wrapping, for the length of the profile only, the
functions that do them:

* memlab: the key lookup (``Users.user_for_api_key``), the read (``UsageAPI``'s
  ``list_sessions_for`` / ``get_for`` / ``stats_for`` / ``cost_by_model_for``: the SQL and the
  models built from its rows), of which the rows made ``SessionUsage`` / ``ModelUsage``
  models (validated, the priced-total rule applied), and the JSON (``model_dump_json``,
  ``TypeAdapter.dump_json``); FastAPI's part (routing, query parameters, the dependency,
  the response) is the rest.
* the ceiling: the key lookup (its ``api_key_user`` statement) and the endpoint's SQL;
  the rest is FastAPI, the dicts and ``json.dumps``.

The SQL parts are wall time: on PostgreSQL they include the server's own time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

__all__ = ["PARTS", "profile_apps"]

#: the parts of each app's time, in table order
PARTS = {
    "memlab": ("key_lookup", "read", "rows_to_models", "json", "framework"),
    "ceiling": ("key_lookup", "read", "framework"),
}


async def _call(app: Any, path: str, params: dict[str, Any], key: str) -> int:
    """One GET through the ASGI app; its status."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
        "raw_path": path.encode(), "query_string": urlencode(params).encode(), "root_path": "", "state": {},
        "headers": [(b"host", b"profile"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
    }
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


class _Clock:
    """Seconds spent per part while a request runs (parts nest: a part's time is its own wrapper's)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)

    def timed(self, part: str, fn: Callable[..., Any], *, awaited: bool) -> Callable[..., Any]:
        spent = self.spent

        async def timed_await(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - began

        def timed_call(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - began

        return timed_await if awaited else timed_call


@contextmanager
def _patched(targets: Sequence[tuple[Any, str, str, bool]], clock: _Clock) -> Iterator[None]:
    """``(owner, attribute, part, awaited)``: each attribute wrapped to add its time to ``part``, put back on exit."""
    missing = object()
    saved = [(owner, name, vars(owner).get(name, missing)) for owner, name, _, _ in targets]
    try:
        for owner, name, part, awaited in targets:
            setattr(owner, name, clock.timed(part, getattr(owner, name), awaited=awaited))
        yield
    finally:
        for owner, name, original in reversed(saved):
            if original is missing:
                delattr(owner, name)  # it was the class's (or an instance's class's) attribute
            else:
                setattr(owner, name, original)


def _memlab_targets() -> list[tuple[Any, str, str, bool]]:
    import importlib

    import pydantic

    from memlab.relational import UsageRepository
    from memlab.usage import UsageAPI
    from memlab.users import Users

    usage_rows = importlib.import_module(UsageRepository.__module__)  # its row -> model converters
    names = ("list_sessions_for", "get_for", "stats_for", "cost_by_model_for")
    if not all(hasattr(UsageAPI, name) for name in names):  # a memlab whose API called the public reads (each resolving the user again)
        names = ("list_sessions", "get", "stats", "cost_by_model")
    reads = [(UsageAPI, name, "read", True) for name in names]
    rows = [(usage_rows, name, "rows_to_models", False) for name in ("_usage", "_model_usage")]
    return [
        (Users, "user_for_api_key", "key_lookup", True), *reads, *rows,
        (pydantic.BaseModel, "model_dump_json", "json", False), (pydantic.TypeAdapter, "dump_json", "json", False),
    ]


async def profile_apps(
    apps: dict[str, Any], requests: dict[str, list[tuple[str, str, dict[str, Any]]]], key: str, *, passes: int = 5
) -> list[dict[str, Any]]:
    """Per endpoint of ``requests`` and per app of ``apps`` (``memlab``, ``ceiling``): µs per request and per part, medians of ``passes``."""
    samples: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    names = list(apps)
    for op, batch in requests.items():  # warm both (statement caches, first-use imports)
        for name in names:
            for _, path, params in batch[:10]:
                await _call(apps[name], path, params, key)
    for round_ in range(passes):
        for op, batch in requests.items():
            for name in names if round_ % 2 == 0 else names[::-1]:
                clock = _Clock()
                with _patched(_memlab_targets(), clock) if name == "memlab" else _ceiling_split(apps[name], clock):
                    began = time.perf_counter()
                    for _, path, params in batch:
                        status = await _call(apps[name], path, params, key)
                        if status != 200:
                            raise RuntimeError(f"{name} answered {status} to {path} {params}")
                    total = time.perf_counter() - began
                parts = {part: seconds / len(batch) * 1e6 for part, seconds in clock.spent.items()}
                parts["total"] = total / len(batch) * 1e6
                samples[(op, name)].append(parts)
    return [_row(op, samples) for op in requests]


@contextmanager
def _ceiling_split(app: Any, clock: _Clock) -> Iterator[None]:
    """The ceiling's database calls timed: its key lookup apart from the endpoint's statements."""
    db = app.state.db
    rows, both = db.rows, db.both

    async def timed_rows(name: str, params: dict[str, Any]) -> Any:
        began = time.perf_counter()
        try:
            return await rows(name, params)
        finally:
            clock.spent["key_lookup" if name == "api_key_user" else "read"] += time.perf_counter() - began

    db.rows, db.both = timed_rows, clock.timed("read", both, awaited=True)
    try:
        yield
    finally:
        del db.rows, db.both  # back to the class's methods


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _row(op: str, samples: dict[tuple[str, str], list[dict[str, float]]]) -> dict[str, Any]:
    row: dict[str, Any] = {"operation": op}
    for name, parts in PARTS.items():
        passes = samples[(op, name)]
        row[f"{name}_us"] = _median([p["total"] for p in passes])
        for part in parts:
            if part == "framework":
                inner = [p.get("key_lookup", 0.0) + p.get("read", 0.0) + p.get("json", 0.0) for p in passes]
                row[f"{name}_{part}_us"] = _median([p["total"] - used for p, used in zip(passes, inner)])
            else:
                row[f"{name}_{part}_us"] = _median([p.get(part, 0.0) for p in passes])
    row["ratio"] = row["ceiling_us"] / row["memlab_us"] if row["memlab_us"] else None
    return row
