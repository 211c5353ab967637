"""Per-session turn locks that hold across processes: a lock file on one machine, shared by every process there.

A session turn reads the history, analyses the message and writes the turn; two
processes doing that for one session at once would interleave. The SQL cache on
SQLite and the ``fs`` backend serialise turns with an exclusive ``fcntl`` lock on
``{directory}/{sha256(user, session)}.lock``, polled until it is free or the
timeout passes (then :class:`~memlab.exceptions.SessionLockTimeout`). The lock
goes with the process: a crashed holder never blocks the session. The lock files
(one per session, empty) stay in the directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from memlab.exceptions import SessionLockTimeout

__all__ = ["LOCK_POLL_SECONDS", "file_turn_lock", "lock_name", "lock_timeout", "poll_lock"]

#: how often a waiting turn tries the lock again (seconds), doubling up to 16x
LOCK_POLL_SECONDS = 0.005


def lock_name(user_id: str, session_id: str) -> str:
    """A fixed-length name for the lock of (user, session): the hex sha256 of both ids."""
    return hashlib.sha256(f"{len(user_id)}:{user_id}:{session_id}".encode()).hexdigest()


def lock_timeout(user_id: str, session_id: str, timeout: float) -> SessionLockTimeout:
    """The error of a turn that waited ``timeout`` seconds for the session's lock (every backend words it alike)."""
    return SessionLockTimeout(f"session {session_id!r} of user {user_id}: another process held its turn lock for more than {timeout:g} s")


async def poll_lock(attempt: Callable[[], Awaitable[bool]], user_id: str, session_id: str, *, timeout: float) -> None:
    """Call ``attempt`` until it returns True (the lock is held), with backoff; :func:`lock_timeout` after ``timeout`` s."""
    deadline, pause = time.monotonic() + timeout, LOCK_POLL_SECONDS
    while not await attempt():
        if time.monotonic() >= deadline:
            raise lock_timeout(user_id, session_id, timeout)
        await asyncio.sleep(pause)
        pause = min(pause * 2, LOCK_POLL_SECONDS * 16)


@contextlib.asynccontextmanager
async def file_turn_lock(directory: Path, user_id: str, session_id: str, *, timeout: float) -> AsyncIterator[None]:
    """Hold the turn lock of (user, session) under ``directory``; :class:`SessionLockTimeout` after ``timeout`` seconds."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / f"{lock_name(user_id, session_id)}.lock", os.O_RDWR | os.O_CREAT, 0o600)

    async def attempt() -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    try:
        await poll_lock(attempt, user_id, session_id, timeout=timeout)
        yield
    finally:
        os.close(fd)  # releases the flock
