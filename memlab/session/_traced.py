"""``memlab.session.traced``: record async agent steps as trace entries of a session.

As a decorator it records every call of an async function; as an async context
manager it records one block::

    @traced(stack, session_id="agent-1", memory_query="weather in Paris")
    async def fetch_weather(city: str) -> dict: ...

    async with traced(stack, session_id="agent-1", origin_function="plan") as step:
        step.params["goal"] = "book a table"
        step.returned(await plan())

A call that returns is stored with ``status="success"`` and its return value; one
that raises an ``Exception`` with ``status="error"`` and ``error_message``
``"<Type>: <message>"``, and the exception is re-raised unchanged. A
``BaseException`` that is not an ``Exception`` (cancellation, ``KeyboardInterrupt``)
propagates without a step. ``method_params`` are the call's bound arguments, defaults
applied, ``self`` / ``cls`` left out. The step is stored after the call ends, through
:meth:`memlab.session.SessionAPI.add_trace` (fail-open: caching off or an unreachable
cache stores nothing and the call's outcome stands). Wrong arguments raise
``ValidationError`` when ``traced(...)`` is called, before any call or I/O.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from memlab.exceptions import SessionParameterValidationError, ValidationError
from memlab.models import SessionAgentTraceEntry
from memlab.session._api import SessionAPI
from memlab.validation import check_id, check_text

__all__ = ["TraceStep", "Tracer", "traced"]

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class TraceStep:
    """The step an ``async with traced(...)`` block records: fill ``params``, call :meth:`returned`."""

    def __init__(self, origin_function: str, memory_context: str) -> None:
        self.origin_function = origin_function
        #: recorded as ``method_params``
        self.params: dict[str, Any] = {}
        #: recorded as ``method_return_value``
        self.return_value: Any = None
        #: recorded as ``memory_context``
        self.memory_context = memory_context
        #: the stored ``trace_id`` once the block ended (None: not stored)
        self.trace_id: str | None = None

    def returned(self, value: Any) -> Any:
        """Record ``value`` as the step's return value; returns it."""
        self.return_value = value
        return value


class Tracer:
    """What :func:`traced` returns: a decorator of async functions and an async context manager.

    As a decorator it may wrap any number of functions, called concurrently. As a
    context manager one tracer serves one block at a time (nesting the same tracer is
    fine, sharing it between concurrent tasks is not): write ``async with traced(...)``
    at each block.
    """

    def __init__(
        self, api: SessionAPI, *, session_id: str | None, user: Any, memory_query: str, memory_context: str, origin_function: str | None
    ) -> None:
        self._api = api
        self._session_id = session_id
        self._user = user
        self._memory_query = memory_query
        self._memory_context = memory_context
        self._origin = origin_function
        self._steps: list[TraceStep] = []

    async def record(self, origin: str, params: dict[str, Any], outcome: Any, error: Exception | None, context: str) -> str | None:
        """Store one step; returns its ``trace_id`` (None when not stored)."""
        entry = SessionAgentTraceEntry(
            origin_function=origin,
            status="error" if error is not None else "success",
            method_params=params,
            method_return_value=None if error is not None else outcome,
            memory_query=self._memory_query,
            memory_context=context,
            error_message="" if error is None else f"{type(error).__name__}: {error}",
        )
        return await self._api.add_trace(self._session_id, entry, user=self._user)

    def __call__(self, fn: F) -> F:
        if not inspect.iscoroutinefunction(fn):
            raise ValidationError(f"traced(...) decorates async functions, got {fn!r}")
        origin = self._origin or getattr(fn, "__qualname__", None) or repr(fn)
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            params = _bound(signature, args, kwargs)
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                await self.record(origin, params, None, exc, self._memory_context)
                raise
            await self.record(origin, params, result, None, self._memory_context)
            return result

        return wrapper  # type: ignore[return-value]

    async def __aenter__(self) -> TraceStep:
        if self._origin is None:
            raise ValidationError("async with traced(...) needs origin_function=... (the step's name)")
        step = TraceStep(self._origin, self._memory_context)
        self._steps.append(step)
        return step

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        step = self._steps.pop()
        if exc is not None and not isinstance(exc, Exception):
            return False
        error = exc if isinstance(exc, Exception) else None
        step.trace_id = await self.record(step.origin_function, step.params, step.return_value, error, step.memory_context)
        return False


def _bound(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults applied, ``self`` / ``cls`` dropped (unbindable: ``args`` / ``kwargs``)."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {"args": list(args), "kwargs": dict(kwargs)}
    bound.apply_defaults()
    return {name: value for name, value in bound.arguments.items() if name not in ("self", "cls")}


def traced(
    stack: Any,
    *,
    session_id: str | None = None,
    user: Any = None,
    memory_query: str = "",
    memory_context: str = "",
    origin_function: str | None = None,
) -> Tracer:
    """Record calls (decorator) or one block (``async with``) as agent trace steps of a session (see the module docstring).

    ``stack``: a :class:`~memlab.MemoryStack` (or anything whose ``session`` is a
    :class:`~memlab.session.SessionAPI`, or that API itself). ``session_id`` None: the
    user's default session, as ``stack.session.get_session`` resolves it.
    ``origin_function``: the step's name (default: the decorated function's qualified
    name; required for ``async with``).
    """
    api = stack if isinstance(stack, SessionAPI) else getattr(stack, "session", None)
    if not isinstance(api, SessionAPI):
        raise ValidationError(f"traced(...) needs a MemoryStack or a SessionAPI, got {type(stack).__name__} {stack!r}"[:400])
    if session_id is not None:
        check_id("session_id", session_id, error=SessionParameterValidationError)
    check_text("memory_query", memory_query)
    check_text("memory_context", memory_context)
    if origin_function is not None and not check_text("origin_function", origin_function).strip():
        raise ValidationError(f"origin_function must not be blank, got {origin_function!r}")
    return Tracer(api, session_id=session_id, user=user, memory_query=memory_query, memory_context=memory_context, origin_function=origin_function)
