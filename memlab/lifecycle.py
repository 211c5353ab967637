"""The open/close state of a :class:`~memlab.MemoryStack`, shared with the services it builds.

Every service that does I/O for the stack (session manager, session API, users,
datasets through the relational store) asks :meth:`Lifecycle.require_open`
first, so a call before ``open()`` or after ``close()`` raises
:class:`~memlab.exceptions.StackStateError` instead of reaching a closed store.
"""

from __future__ import annotations

import enum

from memlab.exceptions import StackStateError

__all__ = ["Lifecycle", "StackState"]


class StackState(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class Lifecycle:
    """One stack's state: ``unopened`` -> ``open`` -> ``closed`` (never reopened)."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = StackState.UNOPENED

    def require_open(self) -> None:
        """Raise ``StackStateError`` unless the stack is open."""
        if self.state is not StackState.OPEN:
            raise StackStateError(f"MemoryStack is {self.state.value}; use 'async with stack:' or 'await stack.open()'")
