"""The ``fs`` cache backend: sessions in a local :mod:`diskcache` directory.

Layout
------
Every row is an ordinary diskcache item (``Cache.get(key)`` reads it) keyed by a
string; user and session ids are escaped (``%`` -> ``%25``, ``:`` -> ``%3A``) so
``:`` only ever separates key parts. ``P`` is ``agent_sessions`` for QA turns and
``session_context`` for context entries::

    {P}:{user}:{session}:{seq:012d}    one row per turn / context entry (JSON payload)
    {P}#ids:{user}:{session}:{id}      qa_id / entry id -> seq
    {P}#meta:{user}:{session}          {"next": seq, "exp": expiry in µs or null, "epoch": int}

So an append inserts two rows and rewrites the small meta row, whatever the
session's length, and reading the last ``n`` turns is one index range scan that
visits ``n`` rows. A context upsert of a known id rewrites its row in place, which
keeps its first-insert position.

TTL is logical, as the contract asks: the meta row holds the kind's expiry, stamped
from the injected clock; reads of a dead kind return nothing, the next write to it
deletes its rows first (scoped purge), and :meth:`~DiskCache.sweep` deletes every
dead kind. diskcache's own ``expire``/eviction is never used: the cache is opened
with ``eviction_policy="none"`` so diskcache never culls session rows.

The epoch (the :meth:`read_qa_log` cursor's first half) is a random 62-bit number
drawn whenever a kind is (re)created and whenever a turn is changed or deleted, so
a cursor never matches a later incarnation of the session.

How it talks to diskcache
-------------------------
Transactions are ``Cache.transact()`` (``BEGIN IMMEDIATE``; SQLite locking makes
them safe across processes). Inside them the rows are read and written with SQL on
diskcache's own per-thread connection (``Cache._con``) against its ``Cache``
table, exactly as ``Cache.set`` would store a short string or int (``raw=1``,
``mode=1``: value inline, no file), because the public per-key API cannot do a
range scan and measured too slow: the same append as three ``Cache.set`` in one
``transact()`` ran at ~3,000-3,400/s before any memlab overhead (SQL: ~5-6k/s),
and a last-10 read as twelve ``Cache.get`` at ~6,600/s (one range ``SELECT``:
~45,000/s). The table's columns are checked at open. Reads run in a deferred ``BEGIN``
... ``COMMIT`` so the meta row and the rows come from one snapshot.

Where it runs (event loop vs threads)
-------------------------------------
Measured on the 2-core machine (Python 3.11, diskcache 5.6.3, 472-byte turns,
median of 3 × 1,000 calls of the public methods on one session, load ~0.7):

=====================================  ========  ==============
dispatch                               append/s  last-10 read/s
=====================================  ========  ==============
inline on the loop (chosen fast path)     4,385          15,232
``asyncio.to_thread`` per call            2,621           5,160
dedicated 1-thread executor per call      3,044           5,281
plain ``Cache.set`` / ``Cache.get``      11,675          94,231  (ceiling, per key)
=====================================  ========  ==============

Under load from other work (load average 2-3.5) every row halves (inline 1.9-2.4k
appends/s and 6-8k reads/s, the raw ``set`` 3.3-7.6k/s), and the CPU time per call
stays the story: inline ~0.27 ms per append and ~0.1 ms per read, off the loop
0.3-0.55 ms and 0.2-0.35 ms. On disk a turn costs ~770 bytes (payload + id row +
index entries).

A thread hop costs ~0.2-0.3 ms here, more than the whole SQLite transaction, so
going off the loop for every call misses both targets (append >= 3,000/s, last-10
>= 10,000/s). So, as :mod:`memlab._sqlrun` does for SQLite, work runs
**inline** on a connection whose lock timeout is 0: a write that finds another
writer holding the lock fails at once with ``diskcache.Timeout`` before touching
anything, and a read in WAL mode does not wait for writers. Contended writes, and
reads that get ``database is locked``, are re-run on a **dedicated single-thread
executor** with a second :class:`diskcache.Cache` on the same directory whose
timeout is ``lock_timeout`` (60 s), so a waiting writer never blocks the loop;
while any write of this instance waits there, later writes queue behind it (in
order) instead of retrying inline. Long jobs (sweep, prune) and open/close always
run on that executor. The inline path does only local SQLite work (no fsync on
commit with ``synchronous=NORMAL``; a WAL checkpoint's fsync every ~1,000 pages is
the one short stall).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import diskcache

from memlab._clock import Clock
from memlab.cache._base import CacheBackend, PayloadChange, config_options
from memlab.ttl import TTLPolicy
from memlab.cache._turn_lock import file_turn_lock
from memlab.exceptions import CacheConnectionError, SessionQAEntryValidationError

logger = logging.getLogger("memlab.cache")

T = TypeVar("T")

_PREFIX = {"qa": "agent_sessions", "context": "session_context"}
_DEAD_CURSOR = ("dead",)
_UNREADABLE_CURSOR = ("unreadable-meta",)
_EPOCH0 = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MODE_RAW = diskcache.core.MODE_RAW  # the value is stored inline in the row (1)
_COLUMNS = {"key", "raw", "store_time", "expire_time", "access_time", "access_count", "tag", "size", "mode", "filename", "value"}

_GET = "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1"
_RANGE = "SELECT mode, filename, value FROM Cache WHERE key >= ? AND key < ? AND raw = 1 ORDER BY key"
_RANGE_LAST = "SELECT mode, filename, value FROM Cache WHERE key >= ? AND key < ? AND raw = 1 ORDER BY key DESC LIMIT ?"
_RANGE_KEYS = "SELECT key, mode, filename, value FROM Cache WHERE key >= ? AND key < ? AND raw = 1 ORDER BY key"
_LAST_KEY = "SELECT key FROM Cache WHERE key >= ? AND key < ? AND raw = 1 ORDER BY key DESC LIMIT 1"
_ANY = "SELECT 1 FROM Cache WHERE key >= ? AND key < ? AND raw = 1 LIMIT 1"
_INSERT = (
    "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, filename, value)"
    f" VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, {_MODE_RAW}, NULL, ?)"
)
#: a turn's row and its id row in one statement (all or nothing: a taken qa_id inserts neither)
_INSERT_TURN = (
    "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, filename, value)"
    f" VALUES (?, 1, ?, NULL, ?, 0, NULL, 0, {_MODE_RAW}, NULL, ?), (?, 1, ?, NULL, ?, 0, NULL, 0, {_MODE_RAW}, NULL, ?)"
)
_UPDATE = f"UPDATE Cache SET store_time = ?, value = ?, mode = {_MODE_RAW}, size = 0 WHERE key = ? AND raw = 1"
_DELETE = "DELETE FROM Cache WHERE key = ? AND raw = 1"
_DELETE_RANGE = "DELETE FROM Cache WHERE key >= ? AND key < ? AND raw = 1"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


def _range(prefix: str) -> tuple[str, str]:
    """``(low, high)`` such that ``low <= key < high`` exactly when key starts with ``prefix``.

    ``prefix`` ends with ``:``; ``;`` is the next character.
    """
    return prefix, prefix[:-1] + ";"


def _us(moment: datetime) -> int:
    return (moment - _EPOCH0) // timedelta(microseconds=1)


def _dt(us: int | None) -> datetime | None:
    return None if us is None else _EPOCH0 + timedelta(microseconds=us)


def _new_epoch() -> int:
    return secrets.randbits(62)


class _Keys:
    """The keys of one (kind, user, session), from already escaped ids."""

    __slots__ = ("meta", "rows", "ids")

    def __init__(self, prefix: str, user: str, session: str) -> None:
        self.meta = f"{prefix}#meta:{user}:{session}"
        self.rows = f"{prefix}:{user}:{session}:"
        self.ids = f"{prefix}#ids:{user}:{session}:"

    def row(self, seq: int) -> str:
        return f"{self.rows}{seq:012d}"


class _Meta:
    """A kind's meta row.

    ``stored``: the row exists (update it, else insert). ``dirty``: must be written
    even if nothing else changes (a fresh or rebuilt row). ``broken``: the stored row
    could not be parsed; reads treat the kind as live with no expiry.
    """

    __slots__ = ("next", "exp", "epoch", "stored", "dirty", "broken")

    def __init__(
        self, next_seq: int, exp: int | None, epoch: int, *, stored: bool, dirty: bool = False, broken: bool = False
    ) -> None:
        self.next, self.exp, self.epoch = next_seq, exp, epoch
        self.stored, self.dirty, self.broken = stored, dirty, broken

    def dumps(self) -> str:
        return json.dumps({"next": self.next, "exp": self.exp, "epoch": self.epoch}, separators=(",", ":"))


def _is_busy(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _in_write(cache: diskcache.Cache, work: Callable[[sqlite3.Connection], T]) -> T:
    """``work(connection)`` in one ``BEGIN IMMEDIATE`` transaction: all or nothing, ``diskcache.Timeout`` if locked.

    What ``cache.transact()`` does, minus its two generator context managers and
    per-statement ``_sql`` lookups: an empty ``transact()`` measured ~30 µs more
    than a bare ``BEGIN IMMEDIATE`` + ``COMMIT`` on the 2-core machine (~10 µs), a
    tenth of an append. Nothing else of diskcache's runs inside ``work``, so its
    own nesting bookkeeping (``_txn_id``) is not needed.
    """
    con = cache._con
    try:
        con.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:  # as transact(): locked by another writer (or failing to begin)
        raise diskcache.Timeout from None
    try:
        result = work(con)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    try:
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:  # never leave the connection inside a half-done transaction
            con.execute("ROLLBACK")
        raise
    return result


def _in_read(cache: diskcache.Cache, work: Callable[[sqlite3.Connection], T]) -> T:
    """``work(connection)`` in one read snapshot (deferred ``BEGIN``; never takes the write lock)."""
    con = cache._con
    con.execute("BEGIN")
    try:
        result = work(con)
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    return result


class DiskCache(CacheBackend):
    """Session cache in a local diskcache directory (``fs``). See the module docstring.

    ``directory`` is created when missing. ``lock_timeout`` is how long a write that
    found the store locked (by another process, or this one's sweep) waits, off the
    event loop, before failing with :class:`~memlab.exceptions.CacheConnectionError`.
    Other keyword arguments (``ttl``, ``clock``, ``purge_interval_seconds``) go to
    :class:`~memlab.cache.CacheBackend`. Any number of processes may share the
    directory, each with its own instance (open it after a fork, not before).
    """

    name = "fs"
    default_ttl_policy = "sliding"

    def __init__(self, directory: str | Path, *, lock_timeout: float = 60.0, **backend_kwargs: Any) -> None:
        super().__init__(**backend_kwargs)
        self.path = Path(directory)
        self.lock_timeout = lock_timeout
        self._fast: diskcache.Cache | None = None  # lock timeout 0: used inline on the loop thread
        self._slow: diskcache.Cache | None = None  # lock timeout lock_timeout: used on the executor thread only
        self._executor: ThreadPoolExecutor | None = None
        self._queued = 0  # writes of this instance waiting on the executor
        self._disk: diskcache.Disk | None = None  # to decode rows written by Cache.set itself

    @classmethod
    def from_config(cls, config: Any, *, clock: Clock | None = None, ttl: TTLPolicy | None = None) -> "DiskCache":
        """``fs`` from the config: a cache in ``config.fs_cache_dir``."""
        return cls(config.fs_cache_dir, **config_options(config, clock, ttl))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, ttl={self.ttl.name}:{self.ttl.seconds})"

    # -- lifecycle -----------------------------------------------------------------

    def _make_cache(self, timeout: float) -> diskcache.Cache:
        return diskcache.Cache(str(self.path), timeout=timeout, eviction_policy="none")

    async def _open(self) -> None:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlab-fs")
        loop = asyncio.get_running_loop()
        try:
            slow = await loop.run_in_executor(executor, self._make_cache, self.lock_timeout)
            fast = await loop.run_in_executor(executor, self._make_cache, 0)
            columns = await loop.run_in_executor(
                executor, lambda: {row[1] for row in slow._con.execute("PRAGMA table_info(Cache)")}
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        if not _COLUMNS <= columns:
            executor.shutdown(wait=False)
            raise CacheConnectionError(
                f"fs cache at {self.path}: unexpected diskcache table layout (missing {sorted(_COLUMNS - columns)}); "
                "this build supports diskcache 5.x"
            )
        self._fast, self._slow, self._executor, self._disk = fast, slow, executor, slow.disk

    async def _close(self) -> None:
        fast, slow, executor = self._fast, self._slow, self._executor
        self._fast = self._slow = self._executor = None
        if fast is not None:
            fast.close()  # this thread's connection
        if executor is not None:

            def close_there() -> None:  # diskcache connections are per thread
                for cache in (fast, slow):
                    if cache is not None:
                        cache.close()

            try:
                await asyncio.get_running_loop().run_in_executor(executor, close_there)
            finally:
                executor.shutdown(wait=False)

    # -- running work ----------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``work`` in one transaction: inline when it cannot wait, else on the executor."""
        fast = self._fast
        if fast is None:
            raise RuntimeError(f"{self.name} cache at {self.path} is not open")
        if not (write and self._queued):
            try:
                return _in_write(fast, work) if write else _in_read(fast, work)
            except diskcache.Timeout:
                pass  # another writer holds the lock; nothing was written
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
        runner = _in_write if write else _in_read
        self._queued += write
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, runner, self._slow, work)
        finally:
            self._queued -= write

    async def _job(self, job: Callable[[diskcache.Cache], T]) -> T:
        """Run ``job(cache)`` (which opens its own transactions) on the executor."""
        if self._slow is None:
            raise RuntimeError(f"{self.name} cache at {self.path} is not open")
        return await asyncio.get_running_loop().run_in_executor(self._executor, job, self._slow)

    # -- row helpers (run inside a transaction) -----------------------------------------

    def _keys(self, kind: str, user_id: str, session_id: str) -> _Keys:
        return _Keys(_PREFIX[kind], _escape(user_id), _escape(session_id))

    def _value(self, row: tuple) -> Any:
        mode, filename, value = row
        if mode == _MODE_RAW:
            return value
        if self._disk is None:
            raise RuntimeError(f"{self.name} cache at {self.path} is not open")
        return self._disk.fetch(mode, filename, value, False)  # a row written by Cache.set itself

    def _payloads(self, rows: list[tuple]) -> list[str]:
        payloads = [value for mode, _, value in rows if mode == _MODE_RAW and type(value) is str]
        if len(payloads) == len(rows):
            return payloads
        payloads = []
        for row in rows:
            try:
                value = self._value(row)
            except Exception:  # noqa: BLE001 - an unreadable row is skipped, the rest served
                value = None
            if isinstance(value, str):
                payloads.append(value)
            else:
                logger.warning("skipping unreadable row in %s cache at %s", self.name, self.path)
        return payloads

    def _meta(self, con: sqlite3.Connection, keys: _Keys) -> _Meta | None:
        row = con.execute(_GET, (keys.meta,)).fetchone()
        if row is None:
            return None
        try:
            data = json.loads(self._value(row))
            exp = data["exp"]
            meta = _Meta(int(data["next"]), None if exp is None else int(exp), int(data["epoch"]), stored=True)
        except Exception:  # noqa: BLE001
            logger.warning("unreadable meta row %r in %s cache at %s; reading the session as live", keys.meta, self.name, self.path)
            return _Meta(-1, None, 0, stored=True, broken=True)
        return meta

    def _live(self, meta: _Meta | None, now: datetime) -> bool:
        return meta is not None and self.ttl.is_live(_dt(meta.exp), now)

    def _live_meta(self, con: sqlite3.Connection, keys: _Keys, now: datetime) -> _Meta | None:
        meta = self._meta(con, keys)
        return meta if self._live(meta, now) else None

    @staticmethod
    def _next_seq(con: sqlite3.Connection, keys: _Keys) -> int:
        row = con.execute(_LAST_KEY, _range(keys.rows)).fetchone()
        return 0 if row is None else int(row[0][len(keys.rows):]) + 1

    @staticmethod
    def _purge(con: sqlite3.Connection, keys: _Keys) -> int:
        removed = con.execute(_DELETE_RANGE, _range(keys.rows)).rowcount
        con.execute(_DELETE_RANGE, _range(keys.ids))
        return removed

    def _prepare_write(self, con: sqlite3.Connection, keys: _Keys, now: datetime) -> _Meta:
        """The kind's meta for a write: created when missing, purged and recreated when dead."""
        meta = self._meta(con, keys)
        if meta is None:
            self._purge(con, keys)  # leftovers without a meta row are not a session
            return _Meta(0, None, _new_epoch(), stored=False, dirty=True)
        if meta.broken:
            return self._rebuilt(con, keys)
        if not self._live(meta, now):
            self._purge(con, keys)
            return _Meta(0, None, _new_epoch(), stored=True, dirty=True)
        return meta

    def _rebuilt(self, con: sqlite3.Connection, keys: _Keys) -> _Meta:
        """A fresh meta row for a kind whose row was unreadable; its rows are kept."""
        return _Meta(self._next_seq(con, keys), None, _new_epoch(), stored=True, dirty=True)

    def _restamp(self, meta: _Meta, now: datetime) -> bool:
        if not self.ttl.needs_restamp(_dt(meta.exp), now):
            return False
        expiry = self.ttl.expiry_after_write(now)
        meta.exp = None if expiry is None else _us(expiry)
        return True

    @staticmethod
    def _save_meta(con: sqlite3.Connection, keys: _Keys, meta: _Meta, stamp: float) -> None:
        if meta.stored:
            con.execute(_UPDATE, (stamp, meta.dumps(), keys.meta))
        else:
            con.execute(_INSERT, (keys.meta, stamp, stamp, meta.dumps()))
        meta.stored, meta.dirty = True, False

    def _seq_of(self, con: sqlite3.Connection, keys: _Keys, key: str) -> int | None:
        row = con.execute(_GET, (keys.ids + key,)).fetchone()
        if row is None:
            return None
        value = self._value(row)
        return value if isinstance(value, int) else None

    # -- QA turns --------------------------------------------------------------------

    async def _append_qa(self, user_id, session_id, qa_id, payload, now):
        keys = self._keys("qa", user_id, session_id)

        def work(con: sqlite3.Connection) -> None:
            meta = self._prepare_write(con, keys, now)
            stamp = time.time()
            seq = meta.next
            try:
                con.execute(_INSERT_TURN, (keys.row(seq), stamp, stamp, payload, keys.ids + qa_id, stamp, stamp, seq))
            except sqlite3.IntegrityError:
                raise SessionQAEntryValidationError(f"qa_id {qa_id!r} already exists in this session") from None
            meta.next = seq + 1
            self._restamp(meta, now)
            self._save_meta(con, keys, meta, stamp)

        await self._run(work, write=True)

    async def _read_qa(self, user_id, session_id, last_n, now):
        keys = self._keys("qa", user_id, session_id)
        low, high = _range(keys.rows)

        def work(con: sqlite3.Connection) -> list[tuple]:
            if self._live_meta(con, keys, now) is None:
                return []
            if last_n is None:
                return con.execute(_RANGE, (low, high)).fetchall()
            rows = con.execute(_RANGE_LAST, (low, high, last_n)).fetchall()
            rows.reverse()
            return rows

        return self._payloads(await self._run(work, write=False))

    async def _read_qa_log(self, user_id, session_id, cursor: Hashable | None, now):
        keys = self._keys("qa", user_id, session_id)
        low, high = _range(keys.rows)

        def work(con: sqlite3.Connection):
            meta = self._live_meta(con, keys, now)
            if meta is None:
                return _DEAD_CURSOR, [], True
            if meta.broken:
                return _UNREADABLE_CURSOR, con.execute(_RANGE, (low, high)).fetchall(), True
            incremental, start = False, low
            if isinstance(cursor, tuple) and len(cursor) == 2:
                epoch, seq = cursor
                if epoch == meta.epoch and type(seq) is int and 0 <= seq <= meta.next:
                    incremental, start = True, keys.row(seq)
            return (meta.epoch, meta.next), con.execute(_RANGE, (start, high)).fetchall(), not incremental

        new_cursor, rows, reset = await self._run(work, write=False)
        return new_cursor, self._payloads(rows), reset

    async def _modify(self, kind: str, user_id, session_id, key, change: PayloadChange, now) -> bool:
        keys = self._keys(kind, user_id, session_id)

        def work(con: sqlite3.Connection) -> bool:
            meta = self._live_meta(con, keys, now)
            if meta is None:
                return False
            seq = self._seq_of(con, keys, key)
            if seq is None:
                return False
            row = con.execute(_GET, (keys.row(seq),)).fetchone()
            if row is None:
                return False
            value = self._value(row)
            new = change(value if isinstance(value, str) else "")
            stamp = time.time()
            if new is not None:
                con.execute(_UPDATE, (stamp, new, keys.row(seq)))
            if meta.broken:
                meta = self._rebuilt(con, keys)
            changed = self._restamp(meta, now) or meta.dirty
            if kind == "qa" and new is not None:
                meta.epoch, changed = _new_epoch(), True
            if changed:
                self._save_meta(con, keys, meta, stamp)
            return True

        return await self._run(work, write=True)

    async def _modify_qa(self, user_id, session_id, qa_id, change, now):
        return await self._modify("qa", user_id, session_id, qa_id, change, now)

    async def _delete_row(self, kind: str, user_id, session_id, key, now, *, slide: bool) -> bool:
        keys = self._keys(kind, user_id, session_id)

        def work(con: sqlite3.Connection) -> bool:
            meta = self._live_meta(con, keys, now)
            if meta is None:
                return False
            seq = self._seq_of(con, keys, key)
            if seq is None:
                return False
            con.execute(_DELETE, (keys.ids + key,))
            con.execute(_DELETE, (keys.row(seq),))
            if slide:  # a QA delete slides the expiry and invalidates log cursors
                if meta.broken:
                    meta = self._rebuilt(con, keys)
                self._restamp(meta, now)
                meta.epoch = _new_epoch()
                self._save_meta(con, keys, meta, time.time())
            return True

        return await self._run(work, write=True)

    async def _delete_qa(self, user_id, session_id, qa_id, now):
        return await self._delete_row("qa", user_id, session_id, qa_id, now, slide=True)

    # -- session context -----------------------------------------------------------------

    async def _upsert_context(self, user_id, session_id, entry_id, payload, now):
        keys = self._keys("context", user_id, session_id)

        def work(con: sqlite3.Connection) -> None:
            meta = self._prepare_write(con, keys, now)
            stamp = time.time()
            seq = self._seq_of(con, keys, entry_id)
            changed = meta.dirty
            if seq is not None and con.execute(_UPDATE, (stamp, payload, keys.row(seq))).rowcount:
                pass  # known id: replaced in place, so it keeps its position
            else:
                if seq is not None:  # an id row without its entry: drop it and append afresh
                    con.execute(_DELETE, (keys.ids + entry_id,))
                seq = meta.next
                con.execute(_INSERT, (keys.row(seq), stamp, stamp, payload))
                con.execute(_INSERT, (keys.ids + entry_id, stamp, stamp, seq))
                meta.next, changed = seq + 1, True
            if self._restamp(meta, now) or changed:
                self._save_meta(con, keys, meta, stamp)

        await self._run(work, write=True)

    async def _read_context(self, user_id, session_id, now):
        keys = self._keys("context", user_id, session_id)

        def work(con: sqlite3.Connection) -> list[tuple]:
            if self._live_meta(con, keys, now) is None:
                return []
            return con.execute(_RANGE, _range(keys.rows)).fetchall()

        return self._payloads(await self._run(work, write=False))

    async def _modify_context(self, user_id, session_id, entry_id, change, now):
        return await self._modify("context", user_id, session_id, entry_id, change, now)

    async def _delete_context(self, user_id, session_id, entry_id, now):
        return await self._delete_row("context", user_id, session_id, entry_id, now, slide=False)

    # -- session / maintenance -----------------------------------------------------------

    async def _delete_session(self, user_id, session_id, now):
        def work(con: sqlite3.Connection) -> bool:
            existed = False
            for kind in _PREFIX:
                keys = self._keys(kind, user_id, session_id)
                if self._live_meta(con, keys, now) is not None:
                    existed = existed or con.execute(_ANY, _range(keys.rows)).fetchone() is not None
                self._purge(con, keys)
                con.execute(_DELETE, (keys.meta,))
            return existed

        return await self._run(work, write=True)

    async def _sweep(self, now):
        def dead_kinds(con: sqlite3.Connection) -> list[tuple[str, str, str]]:
            found = []
            for kind, prefix in _PREFIX.items():
                meta_prefix = f"{prefix}#meta:"
                for key, *row in con.execute(_RANGE_KEYS, _range(meta_prefix)):
                    try:
                        exp = json.loads(self._value(tuple(row)))["exp"]
                    except Exception:  # noqa: BLE001 - unreadable meta: reads treat it as live
                        continue
                    if exp is not None and not self.ttl.is_live(_dt(int(exp)), now):
                        user, _, session = key[len(meta_prefix):].partition(":")
                        found.append((kind, user, session))
            return found

        def job(cache: diskcache.Cache) -> int:
            removed = 0
            for kind, user, session in _in_read(cache, dead_kinds):
                keys = _Keys(_PREFIX[kind], user, session)

                def drop(con: sqlite3.Connection) -> int:  # re-checked: a writer may have revived it
                    meta = self._meta(con, keys)
                    if meta is None or meta.broken or self._live(meta, now):
                        return 0
                    count = self._purge(con, keys)
                    con.execute(_DELETE, (keys.meta,))
                    return count

                removed += _in_write(cache, drop)
            return removed

        return await self._job(job)

    def turn_lock(self, user_id: str, session_id: str, *, timeout: float):
        """The session's turn lock: a first-come-first-served queue of lock files under ``{directory}/turn-locks`` (every process of this machine)."""
        super().turn_lock(user_id, session_id, timeout=timeout)  # checks the ids
        return file_turn_lock(self.path / "turn-locks", user_id, session_id, timeout=timeout)

    async def _prune(self):
        def work(con: sqlite3.Connection) -> None:
            for prefix in _PREFIX.values():
                for part in (f"{prefix}:", f"{prefix}#ids:", f"{prefix}#meta:"):
                    con.execute(_DELETE_RANGE, _range(part))

        await self._job(lambda cache: _in_write(cache, work))
