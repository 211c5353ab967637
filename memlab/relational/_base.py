"""What every repository shares: the store's run function, its clock, and the SQL helpers.

A repository never opens a connection: it runs each unit of work through the
store's one :class:`Run` (one transaction per call). Its :meth:`Repository.statements`
are merged into the store's runner; statement names are unique across repositories.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar

from sqlalchemy import bindparam
from sqlalchemy.sql import ClauseElement

from memlab._clock import Clock
from memlab._sqlrun import DB

T = TypeVar("T")

#: a dialect's ``insert`` (``sqlalchemy.dialects.sqlite.insert`` or ``...postgresql.insert``), for the upserts
Insert = Callable[..., Any]


class Run(Protocol):
    """The store's runner: ``fn(db)`` in one transaction; ``StackStateError`` unless open, ``BackendError`` when unreachable."""

    def __call__(self, fn: Callable[[DB], T], *, write: bool) -> Awaitable[T]: ...


#: the store's one-statement read: ``await read(name, params)`` -> rows (see ``RelationalStore._read``)
Read = Callable[[str, dict[str, Any]], Awaitable[list]]


class Repository(abc.ABC):
    """One concern's queries over the store's run function and clock."""

    def __init__(self, run: Run, clock: Clock, read: Read | None = None) -> None:
        self._run = run
        self._clock = clock
        self._read_rows = read

    async def _read(self, name: str, /, **params: Any) -> list:
        """The rows of one read statement alone (the store's ``_read``; without one, a read transaction of that statement)."""
        if self._read_rows is None:
            return await self._run(lambda db: db.rows(name, **params), write=False)
        return await self._read_rows(name, params)

    @staticmethod
    @abc.abstractmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        """This repository's named statements, the upserts built with the dialect's ``insert``."""

    def _now(self) -> str:
        return self._clock.now().isoformat()


def binds(*names: str) -> dict[str, Any]:
    """``{name: bindparam(name)}``: the values of a statement whose columns take bind parameters of the same names."""
    return {name: bindparam(name) for name in names}


def when(value: str) -> datetime:
    """A stored ISO timestamp as an aware datetime (a naive one is UTC)."""
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
