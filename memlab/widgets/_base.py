"""What every explorer shares: the optional ipywidgets import, async scheduling, display."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from memlab.widgets._html import esc

INSTALL_HINT = "pip install 'memlab[widgets]'"


def require_ipywidgets() -> Any:
    """The ``ipywidgets`` module; ``ImportError`` naming ``pip install 'memlab[widgets]'`` when it is missing."""
    try:
        import ipywidgets
    except ImportError as exc:
        raise ImportError(f"memlab.widgets needs ipywidgets (and matplotlib for its charts): {INSTALL_HINT}") from exc
    return ipywidgets


class Explorer:
    """Base of the explorers: a root ``widget``, a ``status`` line, background loads and ``settle()``.

    Widget callbacks are synchronous; those that need the stack schedule a coroutine
    on the running event loop (the kernel's, in Jupyter) and keep it in ``pending``
    until it finishes. Without a running loop the coroutine waits in ``pending`` for
    :meth:`settle`. A callback's error is shown in ``status`` and re-raised by the next
    :meth:`settle`. The object displays as its ``widget``.
    """

    widget: Any

    def __init__(self) -> None:
        self._w = require_ipywidgets()
        #: scheduled loads not finished yet (tasks, or coroutines when no loop was running)
        self.pending: list[Awaitable[None]] = []
        #: errors callbacks hit since the last :meth:`settle`
        self.errors: list[BaseException] = []
        self.status = self._w.HTML("")
        self._quiet = 0

    async def refresh(self) -> None:
        """Load (or reload) what the explorer shows."""
        raise NotImplementedError

    async def settle(self) -> None:
        """Wait for every scheduled load; re-raise the first error a callback hit since the last call."""
        while self.pending:
            batch, self.pending = self.pending, []
            await asyncio.gather(*batch)
        if self.errors:
            error, self.errors = self.errors[0], []
            raise error

    def _schedule(self, make: Callable[[], Awaitable[None]]) -> None:
        """Run ``make()`` in the background (see the class docstring)."""
        work = self._guarded(make())
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.pending.append(work)
            return
        task = loop.create_task(work)
        self.pending.append(task)
        task.add_done_callback(lambda done: self.pending.remove(done) if done in self.pending else None)

    async def _guarded(self, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception as exc:  # shown to the user, re-raised by settle()
            self.errors.append(exc)
            self._error(exc)

    def _error(self, exc: BaseException) -> None:
        self.status.value = f'<span style="color:#b00020">{esc(type(exc).__name__)}: {esc(exc)}</span>'

    def _say(self, message: str) -> None:
        self.status.value = esc(message)

    @contextlib.contextmanager
    def _programmatic(self) -> Iterator[None]:
        """Set widget values without firing this explorer's own observers."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def _observe(self, control: Any, handler: Callable[[], None]) -> None:
        """Call ``handler()`` when the user changes ``control``'s value (not when the explorer sets it)."""

        def changed(change: dict[str, Any]) -> None:
            if not self._quiet:
                handler()

        control.observe(changed, names="value")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
