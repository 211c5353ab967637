"""Per-session turn locks that hold across processes: a first-come-first-served queue of lock files on one machine.

A session turn reads the history, analyses the message and writes the turn; two
processes doing that for one session at once would interleave. The SQL cache on
SQLite and the ``fs`` backend serialise turns with a ticket queue under
``{directory}/{sha256(user, session)}/``:

- ``queue`` holds two counters, tickets issued and locks granted. A turn takes the
  next ticket under a short ``fcntl`` lock on that file and, still under it,
  creates the ticket file ``{ticket:020d}`` and takes an exclusive ``flock`` on it,
  which it keeps while it waits and while it holds the lock.
- The turn holds the lock when no ticket file with a smaller number is still
  locked: it polls the nearest one ahead of it (every few ms) until that one's
  ``flock`` can be taken, then looks again. A ticket file whose ``flock`` can be
  taken belongs to a turn that released, gave up or crashed: it is unlinked.
- Release (or giving up) unlinks the turn's own ticket file and closes it.

So turns get the lock in the order they asked for it: with N contenders no waiter
is passed by more than N-1 others (the old polled lock let the releasing process
take it again at once: one writer ran 19 turns in a row while two waited). Ticket
numbers are never reused. The kernel drops a dead process's ``flock`` at once, so
a crashed holder or waiter frees the queue immediately. Two acquisitions in one
process (or one event loop) queue like two processes: each has its own file.
The per-session directories (a counter file each) stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from memlab.exceptions import SessionLockTimeout

__all__ = ["LOCK_POLL_SECONDS", "file_turn_lock", "lock_name", "lock_timeout"]

#: how often a waiting turn looks at the ticket ahead of it (seconds), doubling up to 8x
LOCK_POLL_SECONDS = 0.00025
_DIGITS = 20  # a counter or a ticket name: zero-padded decimal
_GRANTED = _DIGITS  # the offset of the granted counter in the queue file


def lock_name(user_id: str, session_id: str) -> str:
    """A fixed-length name for the lock of (user, session): the hex sha256 of both ids."""
    return hashlib.sha256(f"{len(user_id)}:{user_id}:{session_id}".encode()).hexdigest()


def lock_timeout(
    user_id: str,
    session_id: str,
    *,
    waited: float,
    turns: int | None,
    held_for: float | None,
    ahead: int | None = None,
    uncounted: str = "this backend cannot count the turns that took the lock meanwhile",
) -> SessionLockTimeout:
    """The error of a turn that gave up waiting for the session's lock after ``waited`` s (every backend words it alike).

    ``turns``: how many other turns took the lock while this one waited (None: not
    known, say ``uncounted``); ``held_for``: how long the current holder has held it
    (None: not known); ``ahead``: how many turns are still queued before this one.
    """
    parts = [f"session {session_id!r} of user {user_id}: this turn waited {waited:.1f} s for the session's turn lock and gave up"]
    if turns is None:
        parts.append(uncounted)
    elif turns == 0:
        parts.append("no other turn took the lock meanwhile")
    else:
        parts.append(f"{turns} other turn{'s' if turns != 1 else ''} took the lock meanwhile")
    if held_for is not None:
        parts.append(f"the lock has been held by one turn for {held_for:.1f} s")
    if ahead:
        parts.append(f"{ahead} more turn{'s' if ahead != 1 else ''} queued ahead of this one")
    return SessionLockTimeout("; ".join(parts))


def _read_counter(fd: int, offset: int) -> int:
    raw = os.pread(fd, _DIGITS, offset).strip(b"\0 ")
    return int(raw) if raw else 0


def _write_counter(fd: int, offset: int, value: int) -> None:
    os.pwrite(fd, f"{value:0{_DIGITS}d}".encode(), offset)


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _tickets_before(queue: Path, ticket: int) -> list[int]:
    """The ticket numbers whose files exist below ``ticket``, nearest first."""
    numbers = []
    for name in os.listdir(queue):
        if len(name) == _DIGITS and name.isdigit() and (number := int(name)) < ticket:
            numbers.append(number)
    return sorted(numbers, reverse=True)


def _live_ahead(queue: Path, ticket: int) -> tuple[int, int] | None:
    """(number, open fd) of the nearest ticket ahead of ``ticket`` whose owner is alive; unlinks dead ones on the way."""
    for number in _tickets_before(queue, ticket):
        path = queue / f"{number:0{_DIGITS}d}"
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # released meanwhile
            continue
        if not _try_flock(fd):
            return number, fd
        with contextlib.suppress(FileNotFoundError):  # its owner released, gave up or died: numbers are never reused
            os.unlink(path)
        os.close(fd)
    return None


def _holder(queue: Path, ticket: int) -> tuple[float | None, int]:
    """(how long the current holder has held the lock, how many live tickets are ahead of ``ticket``)."""
    held_for, ahead = None, 0
    for number in _tickets_before(queue, ticket):
        try:
            fd = os.open(queue / f"{number:0{_DIGITS}d}", os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            if _try_flock(fd):
                continue  # dead or gone
            ahead += 1
            stamp = os.pread(fd, 32, 0).strip()
            if stamp:  # the holder writes when it got the lock
                held_for = max(0.0, time.time() - float(stamp))
        finally:
            os.close(fd)
    return held_for, max(0, ahead - (held_for is not None))


async def _flock_briefly(fd: int, deadline: float) -> None:
    """The queue file's lock, held by every process for a few syscalls only: polled so the loop never blocks."""
    while not _try_flock(fd):
        if time.monotonic() >= deadline + 5.0:  # a stopped process holds it: past any turn's patience
            raise OSError("the turn lock queue file stayed locked for seconds")
        await asyncio.sleep(0.0002)


@contextlib.asynccontextmanager
async def file_turn_lock(directory: Path, user_id: str, session_id: str, *, timeout: float) -> AsyncIterator[None]:
    """Hold the turn lock of (user, session) under ``directory`` (first come, first served); :class:`SessionLockTimeout` after ``timeout`` s."""
    started = time.monotonic()
    deadline = started + timeout
    queue = directory / lock_name(user_id, session_id)
    queue.mkdir(parents=True, exist_ok=True)
    counters = os.open(queue / "queue", os.O_RDWR | os.O_CREAT, 0o600)
    own = ahead = ahead_number = -1
    path = queue
    try:
        await _flock_briefly(counters, deadline)
        try:
            ticket = _read_counter(counters, 0) + 1
            _write_counter(counters, 0, ticket)
            path = queue / f"{ticket:0{_DIGITS}d}"
            own = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(own, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: free; locked before anyone can see a later ticket
        finally:
            fcntl.flock(counters, fcntl.LOCK_UN)
        granted = _read_counter(counters, _GRANTED)
        pause = LOCK_POLL_SECONDS
        while True:
            if ahead < 0:
                nearest = _live_ahead(queue, ticket)
                if nearest is None:
                    break
                ahead_number, ahead = nearest
            elif _try_flock(ahead):  # that turn is done (or gave up, or died): look again
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(queue / f"{ahead_number:0{_DIGITS}d}")
                os.close(ahead)
                ahead, pause = -1, LOCK_POLL_SECONDS
                continue
            if time.monotonic() >= deadline:
                held_for, queued = _holder(queue, ticket)
                raise lock_timeout(
                    user_id, session_id, waited=time.monotonic() - started,
                    turns=_read_counter(counters, _GRANTED) - granted, held_for=held_for, ahead=queued,
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, LOCK_POLL_SECONDS * 8)
        # the only holder: nobody else writes the granted counter now
        _write_counter(counters, _GRANTED, _read_counter(counters, _GRANTED) + 1)
        os.pwrite(own, f"{time.time():.6f}".encode(), 0)
        yield
    finally:
        if ahead >= 0:
            os.close(ahead)
        if own >= 0:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            os.close(own)  # drops its flock: the next ticket's owner sees it free
        os.close(counters)
