"""SyncMemoryStack: the whole :class:`~memlab.MemoryStack` API as blocking calls.

::

    from memlab import StackConfig, SyncMemoryStack

    with SyncMemoryStack.from_config(StackConfig(data_root=".memlab")) as stack:
        stack.remember("Alice owns the billing service.", session_id="chat-1")
        hits = stack.recall("Who owns billing?", session_id="chat-1")
        history = stack.session.get_session(session_id="chat-1")

A :class:`SyncMemoryStack` holds one :class:`~memlab.MemoryStack` and runs it on an
event loop of its own, in one background thread: anyio's blocking portal
(:func:`anyio.from_thread.start_blocking_portal`), started on first use and stopped
by :meth:`SyncMemoryStack.close`. Every coroutine method of the stack and of its
services (``session``, ``datasets``, ``users``, ``usage``, ``frames``, and any other
attribute holding a memlab object with coroutine methods) becomes a blocking method
with the same arguments, result and errors; everything else (``config``, ``state``,
``clock``, ...) is the async stack's own attribute. The mirroring is generic: a
method added to the async API is there without a change here (the methods named on
the classes below only give them static types).

Several threads may call one :class:`SyncMemoryStack` at once: their calls run
concurrently as tasks of the one loop, as concurrent ``await`` s of one
``MemoryStack`` would. A call made inside a running event loop (an ``async def``,
a Jupyter cell) would block that loop and raises
:class:`~memlab.exceptions.SyncInEventLoopError`: there, ``await`` the async API.

A stack that is never closed is closed when it is garbage collected or when the
interpreter exits (background self-improvement is awaited then, as :meth:`close`
does); ``with`` or :meth:`close` says when.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, Unpack, overload

from anyio.from_thread import BlockingPortal, start_blocking_portal

from memlab._injection import Injected
from memlab.config import StackConfig
from memlab.datasets import Datasets
from memlab.exceptions import StackStateError, SyncInEventLoopError
from memlab.frames import Frames
from memlab.session import SessionAPI
from memlab.stack import CLOSE_TIMEOUT_SECONDS, MemoryStack
from memlab.usage import UsageAPI
from memlab.users import Users

from memlab.clock import Clock

if TYPE_CHECKING:
    from memlab.lifecycle import StackState

__all__ = ["SyncDatasets", "SyncFrames", "SyncMemoryStack", "SyncSessionAPI", "SyncUsageAPI", "SyncUsers"]

P = ParamSpec("P")
R = TypeVar("R")
V = TypeVar("V", bound="_View")


class _Loop:
    """The event loop thread one :class:`SyncMemoryStack` owns: a blocking portal started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exit = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self.closed = False

    def portal(self) -> BlockingPortal:
        with self._lock:
            if self.closed:
                raise StackStateError("this SyncMemoryStack was closed; build a new one")
            if self._portal is None:
                portal = self._exit.enter_context(start_blocking_portal(name="memlab-sync"))
                self._thread = portal.call(threading.current_thread)
                self._portal = portal
            return self._portal

    def run(self, method: Callable[..., Awaitable[Any]], path: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``await method(*args, **kwargs)`` on the loop; blocks the calling thread until it is done."""
        _refuse_inside_event_loop(path)
        portal = self.portal()
        try:
            result = portal.call(functools.partial(method, *args, **kwargs))
        except RuntimeError as exc:
            if self.closed and "not running" in str(exc):  # close() stopped the portal while this call waited for it
                raise StackStateError("this SyncMemoryStack was closed; build a new one") from None
            raise
        return self.wrap(result, path)

    def blocking(self, method: Callable[..., Awaitable[Any]], path: str) -> Callable[..., Any]:
        """``method`` (a bound coroutine method) as a blocking function with its signature and docstring."""

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.run(method, path, args, kwargs)

        return call

    def wrap(self, value: Any, path: str) -> Any:
        """What the sync side hands out for ``value``: a blocking method, a blocking view, or ``value`` itself."""
        if inspect.iscoroutinefunction(value):
            return self.blocking(value, path)
        if _is_async_service(type(value)):
            return _View(value, self, path)
        return value

    def shutdown(self, stack: MemoryStack, timeout: float | None) -> None:
        """Close ``stack`` on the loop (when it was opened), then stop the loop and join its thread. Idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            portal, thread = self._portal, self._thread
        if portal is None:
            return
        if threading.current_thread() is thread:  # garbage collected on the loop thread itself: finish from another one
            threading.Thread(target=self._finish, args=(portal, stack, timeout), name="memlab-sync-close").start()
            return
        self._finish(portal, stack, timeout)

    def _finish(self, portal: BlockingPortal, stack: MemoryStack, timeout: float | None) -> None:
        try:
            portal.call(functools.partial(stack.close, timeout=timeout))
        finally:
            self._exit.close()


#: class -> whether :func:`_is_async_service` holds (classes are checked once)
_SERVICES: dict[type, bool] = {}


def _is_async_service(cls: type) -> bool:
    """True for memlab classes with public coroutine methods (the services a view wraps)."""
    found = _SERVICES.get(cls)
    if found is None:
        found = _SERVICES[cls] = cls.__module__.startswith("memlab.") and not issubclass(cls, BaseException) and any(
            inspect.iscoroutinefunction(getattr(cls, name, None)) for name in dir(cls) if not name.startswith("_")
        )
    return found


def _refuse_inside_event_loop(path: str) -> None:
    """Raise :class:`SyncInEventLoopError` when the calling thread runs an event loop (a blocking call would stall it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise SyncInEventLoopError(
        f"SyncMemoryStack.{path}() was called inside a running event loop, which it would block; "
        f"in async code (an 'async def', a Jupyter cell) use the async API: "
        f"'async with MemoryStack.from_config(...) as stack: await stack.{path}(...)'"
    )


class _Blocking(Generic[P, R]):
    """A coroutine method of the wrapped object's class, declared on a view as a blocking method (typed from it)."""

    def __init__(self, method: Callable[Concatenate[Any, P], Awaitable[R]]) -> None:
        self._name = method.__name__
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, view: None, owner: type) -> "_Blocking[P, R]": ...

    @overload
    def __get__(self, view: "_View", owner: type) -> Callable[P, R]: ...

    def __get__(self, view: "_View | None", owner: type) -> "Callable[P, R] | _Blocking[P, R]":
        if view is None:
            return self
        return view._blocking(self._name)


class _View:
    """A blocking view of one async memlab object: its coroutine methods block, its services are views too.

    Attributes are looked up on the wrapped object at each access (``__getattr__``), so
    whatever it gains is mirrored; :class:`_Blocking` declarations only add static types.
    """

    def __init__(self, target: Any, loop: _Loop, path: str) -> None:
        self._target = target
        self._loop = loop
        self._path = path

    def _blocking(self, name: str) -> Callable[..., Any]:
        return self._loop.blocking(getattr(self._target, name), self._child(name))

    def _view(self, cls: type[V], name: str) -> V:
        return cls(getattr(self._target, name), self._loop, self._child(name))

    def _child(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_target", "_loop", "_path"):
            raise AttributeError(name)
        return self._loop.wrap(getattr(self._target, name), self._child(name))

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {name for name in dir(self._target) if not name.startswith("_")})

    def __repr__(self) -> str:
        return f"<blocking view of {self._target!r}>"


class SyncSessionAPI(_View):
    """``SyncMemoryStack.session``: :class:`memlab.session.SessionAPI`, blocking."""

    get_session = _Blocking(SessionAPI.get_session)
    add_feedback = _Blocking(SessionAPI.add_feedback)
    delete_feedback = _Blocking(SessionAPI.delete_feedback)
    add_trace = _Blocking(SessionAPI.add_trace)
    get_traces = _Blocking(SessionAPI.get_traces)
    distill_session = _Blocking(SessionAPI.distill_session)
    end = _Blocking(SessionAPI.end)
    resolve = _Blocking(SessionAPI.resolve)


class SyncUsageAPI(_View):
    """``SyncMemoryStack.usage``: :class:`memlab.usage.UsageAPI`, blocking."""

    list_sessions = _Blocking(UsageAPI.list_sessions)
    get = _Blocking(UsageAPI.get)
    models = _Blocking(UsageAPI.models)
    stats = _Blocking(UsageAPI.stats)
    cost_by_model = _Blocking(UsageAPI.cost_by_model)


class SyncUsers(_View):
    """``SyncMemoryStack.users``: :class:`memlab.users.Users`, blocking."""

    create = _Blocking(Users.create)
    default = _Blocking(Users.default)
    get = _Blocking(Users.get)
    resolve = _Blocking(Users.resolve)
    by_name = _Blocking(Users.by_name)
    create_api_key = _Blocking(Users.create_api_key)
    revoke_api_key = _Blocking(Users.revoke_api_key)
    user_for_api_key = _Blocking(Users.user_for_api_key)


class SyncDatasets(_View):
    """``SyncMemoryStack.datasets``: :class:`memlab.datasets.Datasets`, blocking."""

    create = _Blocking(Datasets.create)
    get = _Blocking(Datasets.get)
    list = _Blocking(Datasets.list)
    grant = _Blocking(Datasets.grant)
    can = _Blocking(Datasets.can)
    resolve = _Blocking(Datasets.resolve)
    list_data = _Blocking(Datasets.list_data)
    delete_data = _Blocking(Datasets.delete_data)
    empty_dataset = _Blocking(Datasets.empty_dataset)


class SyncFrames(_View):
    """``SyncMemoryStack.frames``: :class:`memlab.frames.Frames` (pandas DataFrames), blocking."""

    sessions = _Blocking(Frames.sessions)
    usage = _Blocking(Frames.usage)
    cost_by_model = _Blocking(Frames.cost_by_model)
    entries = _Blocking(Frames.entries)
    context = _Blocking(Frames.context)
    traces = _Blocking(Frames.traces)
    turns = _Blocking(Frames.turns)
    phases = _Blocking(Frames.phases)
    nearest = _Blocking(Frames.nearest)
    graph_nodes = _Blocking(Frames.graph_nodes)
    quality = _Blocking(Frames.quality)
    recall = _Blocking(Frames.recall)


class SyncMemoryStack(_View):
    """A :class:`~memlab.MemoryStack` with blocking methods, on an event loop it owns (see :mod:`memlab.sync`).

    Built like the async stack: ``SyncMemoryStack(config, **objects)``,
    :meth:`from_config` or :meth:`from_env`, with the same strategy keywords
    (``cache``, ``ttl``, ``session_retriever``, ``session_reranker``, ``analysis``, ``merge``, ``llm``,
    ``embedder``, ``retrievers``, ``clock``; see :class:`~memlab.MemoryStack`).
    Use as ``with stack:`` or ``stack.open()`` / ``stack.close()``; ``stack.stack`` is
    the async stack it drives (await it only on that stack's own loop).
    """

    remember = _Blocking(MemoryStack.remember)
    recall = _Blocking(MemoryStack.recall)
    search = _Blocking(MemoryStack.search)
    forget = _Blocking(MemoryStack.forget)
    improve = _Blocking(MemoryStack.improve)
    prune = _Blocking(MemoryStack.prune)
    wait_for_background = _Blocking(MemoryStack.wait_for_background)

    def __init__(self, config: StackConfig, **objects: Unpack[Injected]) -> None:
        loop = _Loop()
        stack = MemoryStack(config, **objects)
        super().__init__(stack, loop, "")
        self.config: StackConfig = stack.config
        self.clock: Clock = stack.clock
        self.session = SyncSessionAPI(stack.session, loop, "session")
        self.usage = SyncUsageAPI(stack.usage, loop, "usage")
        self.users = SyncUsers(stack.users, loop, "users")
        self.datasets = SyncDatasets(stack.datasets, loop, "datasets")
        # closes the stack and stops the loop if this object is dropped or the interpreter exits unclosed
        self._finalizer = weakref.finalize(self, loop.shutdown, stack, CLOSE_TIMEOUT_SECONDS)

    @classmethod
    def from_config(cls, config: StackConfig | None = None, **objects: Unpack[Injected]) -> "SyncMemoryStack":
        """As :meth:`MemoryStack.from_config`: a stack (not yet open) from ``config`` (defaults when None) and the objects passed."""
        return cls(config or StackConfig(), **objects)

    @classmethod
    def from_env(cls, **objects: Unpack[Injected]) -> "SyncMemoryStack":
        """As :meth:`MemoryStack.from_env`: a stack from environment variables and the objects passed."""
        return cls(StackConfig.from_env(), **objects)

    # -- lifecycle -------------------------------------------------------------------

    def open(self) -> "SyncMemoryStack":
        """Start the loop thread and open the stack (:meth:`MemoryStack.open`); returns ``self``."""
        self._loop.run(self._target.open, "open", (), {})
        return self

    def close(self, *, timeout: float | None = CLOSE_TIMEOUT_SECONDS) -> None:
        """Close the stack (:meth:`MemoryStack.close`: background work gets ``timeout`` seconds), then stop its thread. Idempotent."""
        _refuse_inside_event_loop("close")
        self._finalizer.detach()
        self._loop.shutdown(self._target, timeout)

    def __enter__(self) -> "SyncMemoryStack":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sync{self._target!r}"

    # -- what the async stack holds --------------------------------------------------

    @property
    def stack(self) -> MemoryStack:
        """The async :class:`~memlab.MemoryStack` this object drives (its loop runs in this object's thread)."""
        return self._target

    @property
    def state(self) -> "StackState":
        """``unopened``, ``open`` or ``closed`` (of the async stack)."""
        return self._target.state

    @property
    def pending_background(self) -> int:
        """Background self-improvement runs not finished yet."""
        return self._target.pending_background

    @property
    def frames(self) -> SyncFrames:
        """pandas exports (:attr:`MemoryStack.frames`), blocking."""
        return self._view(SyncFrames, "frames")
