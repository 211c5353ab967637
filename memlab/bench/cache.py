"""Cache backend throughput and storage: what ``memlab bench cache`` runs.

Every backend named in the spec is built through
:func:`memlab.config.build_cache_backend` in a fresh data directory per repeat and
measured at the :class:`~memlab.cache.CacheBackend` level, one awaited call at a
time (each write is committed before the call returns):

``append``
    ``n`` turns appended to one session (``create_qa_entry``); every call is timed
    too, for the flatness check (median of the first 20 vs the last 20 calls).
``read_last_10``
    ``n`` reads of that session's last 10 turns (``get_latest_qa_entries``). For
    the flatness check, 50 reads are timed one by one when the session holds 10
    turns and 50 more when it holds ``n`` (outside the append timing).
``recall``
    ``n`` varied keyword queries over the ``n``-turn session through
    ``SessionManager(backend).search(..., top_k=15)``; the first query builds the
    session's keyword index and is counted.
``multi_append``
    ``sessions`` × ``per_session`` appends, round-robin over the sessions.
``storage``
    bytes the store gained over the repeat, per turn stored, measured the store's
    own way (:mod:`memlab.bench._usage`: SQLite page counts and file sizes,
    Redis ``MEMORY USAGE``, PostgreSQL ``pg_total_relation_size``), and the bytes
    per turn of the first vs the second half of the one-session appends
    (linear storage: the two agree).

Beside each backend runs the **raw ceiling** of its store
(:mod:`memlab.bench._stores`, :data:`RAW_OF`): ``raw-sqlite`` beside ``sqlite``,
``raw-redis`` beside ``redis``, ``raw-postgres-equal-work`` beside ``postgres``,
``raw-diskcache`` beside ``fs`` (and ``tapes``): the plainest client loop doing
the same appends and reads with the byte-identical payloads. For ``postgres``
that ceiling is **equal work**: hand-written SQL on a bare asyncpg connection
doing what the cache contract needs (the TTL state row's liveness check, the
per-session ordering lock, the insert under the unique ``qa_id``; the read's
liveness check), since a bare INSERT / SELECT does not do that work. The bare
``raw-postgres`` runs beside it too (:data:`CONTRACT_COST_OF`), with no target:
the gap to it is what the contract costs. They all run side by side, taking
turns every 50 calls (:func:`~memlab.bench._measure.measure_subjects`), so load
on a shared machine hits them alike. Each operation's ops/s is the median over
the repeats; "of raw" is the median over repeats of the backend's ops/s over
its :data:`RAW_OF` ceiling's in the same repeat (``of_bare``: over the
contract-cost ceiling's).

Backends that need a server (``SERVER_URL_ENV``) run only when their URL is in
the environment; they write under a fresh random user id and delete what they
wrote (the raw postgres table and the equal-work schema are dropped), never
pruning or flushing the server.
Anything that cannot run is reported as skipped (or error) with the reason.

Results are a list of plain dict rows (``backend, operation, ops_per_s, n,
repeats, extra``), ready for ``pandas.DataFrame(rows)`` (:func:`to_frame` picks
the readable columns); :func:`format_table` prints them.
"""

from __future__ import annotations

import asyncio
import functools
import os
import platform
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from memlab.bench import _table
from memlab.bench.errors import BackendSkipped
from memlab.bench._breakdown import BREAKDOWN_CALLS, SEED_TURNS, breakdown_rows
from memlab.bench._measure import (
    BLOCK,
    FLATNESS_WINDOW,
    READ_PROBE_AT,
    READ_PROBE_CALLS,
    SubjectFailed,
    Workload,
    blame,
    flatness,
    measure_subject,
    measure_subjects,
    median,
)
from memlab.bench._stores import (
    RAW_DISKCACHE,
    RAW_POSTGRES,
    RAW_POSTGRES_EQUAL_WORK,
    RAW_REDIS,
    RAW_SQLITE,
    BackendSubject,
    RawDiskcache,
    RawPostgres,
    RawPostgresEqualWork,
    RawRedis,
    RawSQLite,
    Subject,
)

__all__ = [
    "BackendSkipped",
    "CEILINGS",
    "CONTRACT_COST_OF",
    "CacheBenchSpec",
    "FLATNESS_TARGET",
    "GROWTH_TARGET",
    "OPERATIONS",
    "RAW_DISKCACHE",
    "RAW_OF",
    "RAW_POSTGRES",
    "RAW_POSTGRES_EQUAL_WORK",
    "RAW_REDIS",
    "RAW_SQLITE",
    "RAW_TARGETS",
    "SERVER_URL_ENV",
    "SubjectFailed",
    "TARGETS",
    "bench_cache",
    "bench_config",
    "ceilings_of",
    "default_backends",
    "environment",
    "flatness",
    "format_table",
    "median",
    "measure_subject",
    "measure_subjects",
    "open_subject",
    "results_document",
    "run_bench_cache",
    "skipped_backends",
    "to_frame",
]

#: Operations in table order.
OPERATIONS = ("append", "read_last_10", "recall", "multi_append")
#: backend -> the raw ceiling measured beside it, the one its "of raw" (and RAW_TARGETS) is judged against
RAW_OF: dict[str, str] = {
    "sqlite": RAW_SQLITE,
    "postgres": RAW_POSTGRES_EQUAL_WORK,
    "redis": RAW_REDIS,
    "fs": RAW_DISKCACHE,
    "tapes": RAW_DISKCACHE,
}
#: backend -> a bare ceiling also measured beside it (the plain client without the cache
#: contract's work): the gap to it is the contract's cost, reported, with no target
CONTRACT_COST_OF: dict[str, str] = {
    "postgres": RAW_POSTGRES,
}
#: every raw ceiling (none of them is a CacheBackend)
CEILINGS: frozenset[str] = frozenset({*RAW_OF.values(), *CONTRACT_COST_OF.values()})
#: (backend, operation) -> minimum ops/s the issue asks for (2-core machine).
TARGETS: dict[tuple[str, str], float] = {
    ("sqlite", "recall"): 2_000.0,
}
#: (backend, operation) -> minimum share of the raw ceiling's ops/s, judged in the same run.
#: postgres: of raw-postgres-equal-work (the same statements' work, hand-written), not of the bare raw-postgres.
RAW_TARGETS: dict[tuple[str, str], float] = {
    ("sqlite", "append"): 0.6,
    ("sqlite", "read_last_10"): 0.5,
    ("redis", "append"): 0.8,
    ("redis", "read_last_10"): 0.7,
    ("postgres", "append"): 0.75,
    ("postgres", "read_last_10"): 0.75,
    ("fs", "append"): 0.8,
    ("fs", "read_last_10"): 1.0,
}
#: (backend, operation) -> maximum ratio of the late to the early median call time.
FLATNESS_TARGET: dict[tuple[str, str], float] = {
    ("sqlite", "append"): 2.0,
    ("fs", "append"): 2.0,
    ("fs", "read_last_10"): 2.0,
}
#: Maximum ratio of bytes per turn in the second half of the one-session appends to the first half.
GROWTH_TARGET = 1.5
#: Backends that need a server: the env vars that may hold its URL, first set wins.
SERVER_URL_ENV: dict[str, tuple[str, ...]] = {
    "redis": ("MEMLAB_TEST_REDIS_URL",),
    "postgres": ("MEMLAB_TEST_POSTGRES_URL", "CACHE_DB_URL"),
    "tapes": ("TAPES_INGEST_URL",),
}
#: Backends whose data outlives the run (on a server): the benchmark deletes what it wrote.
NETWORKED = frozenset({"redis", "postgres"})
#: Registered backends left out of the default list unless their URL is set (tapes: fs + an HTTP mirror).
OPT_IN = frozenset({"tapes"})


def _redis_settings(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "localhost",
        "port": parts.port or 6379,
        "username": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else None,
        "ssl": parts.scheme == "rediss",
    }


def _postgres_settings(url: str) -> dict[str, Any]:
    if not url.startswith("postgres"):
        raise BackendSkipped(f"not a PostgreSQL URL: {url.split('://', 1)[0]}://...")
    return {"db_url": url}


#: Backend name -> CacheConfig fields derived from its server URL.
SERVER_SETTINGS: dict[str, Callable[[str], dict[str, Any]]] = {
    "redis": _redis_settings,
    "postgres": _postgres_settings,
    "tapes": lambda url: {"tapes_ingest_url": url},
}


def default_backends(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every registered backend, in registry order; ``tapes`` only when ``TAPES_INGEST_URL`` is set.

    Server backends are listed whether or not their URL is set: without one they
    are reported as skipped, with the variable to set.
    """
    from memlab.config import CACHE_BACKENDS

    env = os.environ if environ is None else environ
    return tuple(
        name
        for name in CACHE_BACKENDS
        if name not in OPT_IN or any(env.get(var) for var in SERVER_URL_ENV.get(name, ()))
    )


@dataclass(frozen=True)
class CacheBenchSpec:
    """What to measure. Defaults are the issue's sizes, over :func:`default_backends`."""

    backends: tuple[str, ...] = field(default_factory=default_backends)
    repeats: int = 3
    n: int = 1000
    sessions: int = 100
    per_session: int = 20
    top_k: int = 15
    seed: int = 0
    raw_ceiling: bool = True
    #: after the repeats, time each backend's store primitive and decoding beside its ceiling (:mod:`memlab.bench._breakdown`)
    breakdown: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(self.backends))
        for name in ("repeats", "n", "sessions", "per_session", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not self.backends:
            raise ValueError("backends must name at least one backend")

    @property
    def entries_per_repeat(self) -> int:
        return self.n + self.sessions * self.per_session


# -- helpers -------------------------------------------------------------------------


def _status(value: float | None, target: float | None, *, at_most: bool = False) -> str | None:
    if value is None or target is None:
        return None
    ok = value <= target if at_most else value >= target
    return "PASS" if ok else "MISS"


def ceilings_of(name: str) -> tuple[str, ...]:
    """The raw ceilings measured beside backend ``name``: its :data:`RAW_OF` one, then its :data:`CONTRACT_COST_OF` one."""
    return tuple(raw for raw in (RAW_OF.get(name), CONTRACT_COST_OF.get(name)) if raw)


def _server_url(name: str, env: Mapping[str, str]) -> str | None:
    return next((env[var] for var in SERVER_URL_ENV.get(name, ()) if env.get(var)), None)


def bench_config(name: str, data_root: Path, environ: Mapping[str, str] | None = None):
    """The StackConfig the benchmark builds backend ``name`` from, or raise :class:`BackendSkipped`."""
    from memlab.config import CACHE_BACKENDS, CacheConfig, StackConfig

    env = os.environ if environ is None else environ
    if name in CEILINGS:
        raise BackendSkipped(f"{name} is a ceiling, measured beside its backend (it is not a CacheBackend)")
    if name not in CACHE_BACKENDS:
        raise BackendSkipped(f"not registered in memlab.config.CACHE_BACKENDS (known: {', '.join(sorted(CACHE_BACKENDS))})")
    settings: dict[str, Any] = {"backend": name}
    if name in SERVER_URL_ENV:
        url = _server_url(name, env)
        if url is None:
            raise BackendSkipped(f"needs a server: set {' or '.join(SERVER_URL_ENV[name])}")
        settings.update(SERVER_SETTINGS[name](url))
    return StackConfig(data_root=data_root, cache=CacheConfig(**settings))


def environment() -> dict[str, Any]:
    """Where the numbers came from."""
    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(terse=True),
        "cpus": os.cpu_count(),
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# -- subjects: what one repeat drives -------------------------------------------------


def _redis_kwargs(url: str) -> dict[str, Any]:
    """Connection kwargs for the raw loop and the probe: the settings the backend gets (db 0)."""
    from memlab.cache import redis_connection_kwargs

    return redis_connection_kwargs(**_redis_settings(url))


def _required_url(name: str, url: str | None) -> str:
    if url is None:
        raise BackendSkipped(f"needs a server: set {' or '.join(SERVER_URL_ENV[name])}")
    return url


def _backend_probe(name: str, backend: Any, user: str, url: str | None) -> tuple[Any, str]:
    from memlab.bench._usage import FileProbe, PostgresProbe, RedisProbe

    if name == "redis":
        from memlab.cache import RedisCache

        return RedisProbe(_redis_kwargs(_required_url(name, url)), [f"{prefix}{user}:*" for prefix in RedisCache.KEY_PREFIXES]), "MEMORY USAGE"
    if name == "postgres":
        from memlab.cache import SQL_SCHEMA as metadata

        return PostgresProbe(_required_url(name, url), [table.name for table in metadata.sorted_tables]), "pg_total_relation_size"
    path = getattr(backend, "path", None)
    if isinstance(path, Path):
        return FileProbe(path), "files"
    return None, ""


def open_subject(name: str, data_root: Path, environ: Mapping[str, str] | None = None, *, backend: str | None = None) -> Subject:
    """The (unopened) :class:`~memlab.bench._stores.Subject` for ``name``: a backend or a raw ceiling.

    A raw ceiling takes its server URL from ``backend`` (the backend it is measured
    beside; by default the one :data:`RAW_OF` maps to it). Raises
    :class:`BackendSkipped` when it cannot run here.
    """
    from memlab._clock import SystemClock
    from memlab.config import build_cache_backend

    env = os.environ if environ is None else environ
    user = f"bench-{uuid.uuid4().hex[:12]}"
    if name in CEILINGS:
        owner = backend or next(key for key in (*RAW_OF, *CONTRACT_COST_OF) if name in ceilings_of(key))
        url = _server_url(owner, env)
        if name == RAW_SQLITE:
            return RawSQLite(data_root, user)
        if name == RAW_DISKCACHE:
            return RawDiskcache(data_root, user)
        if url is None:
            raise BackendSkipped(f"needs a server: set {' or '.join(SERVER_URL_ENV[owner])}")
        if name == RAW_REDIS:
            return RawRedis(_redis_kwargs(url), user)
        if name == RAW_POSTGRES_EQUAL_WORK:
            return RawPostgresEqualWork(url, user)
        return RawPostgres(url, user)
    config = bench_config(name, data_root, env)
    cache = build_cache_backend(config, SystemClock())
    probe, method = _backend_probe(name, cache, user, _server_url(name, env))
    return BackendSubject(name, cache, user, probe=probe, method=method, networked=name in NETWORKED)


async def _repeat(labels: Sequence[str], spec: CacheBenchSpec, work: Workload, environ: Mapping[str, str], owner: str):
    """One repeat of ``labels`` (a backend, and maybe its ceilings) side by side, each in a fresh directory."""
    with tempfile.TemporaryDirectory(prefix="memlab-bench-") as tmp:
        subjects: list[Subject] = []
        try:
            for label in labels:
                directory = Path(tmp) / label
                directory.mkdir()
                with blame(label):
                    subjects.append(open_subject(label, directory, environ, backend=owner))
                    await subjects[-1].open()
            return await measure_subjects(subjects, spec, work)
        finally:
            for subject in reversed(subjects):
                with blame(subject):
                    await subject.close()


# -- aggregation ---------------------------------------------------------------------


def _rows_for(name: str, spec: CacheBenchSpec, repeats: list[dict[str, Any]], storages: list[dict | None]) -> list[dict]:
    rows = []
    for op in OPERATIONS:
        runs = [rep[op] for rep in repeats if op in rep]
        if not runs:
            continue
        ops = median([value for value, _ in runs])
        target = TARGETS.get((name, op))
        extra: dict[str, Any] = {"runs": [round(value, 1) for value, _ in runs], "target": target, "status": _status(ops, target)}
        if op in ("append", "read_last_10"):
            early, late = (median([info["flatness"][k] for _, info in runs]) for k in range(2))
            ratio = late / early if early > 0 else float("inf")
            limit = FLATNESS_TARGET.get((name, op))
            extra.update(
                first_median_us=early * 1e6,
                last_median_us=late * 1e6,
                flatness_ratio=ratio,
                flatness_target=limit,
                flatness_status=_status(ratio, limit, at_most=True),
            )
            if op == "append":
                extra["flatness_window"] = max(1, min(FLATNESS_WINDOW, spec.n // 2))
            else:
                extra.update(flatness_calls=READ_PROBE_CALLS, flatness_turns=(min(READ_PROBE_AT, spec.n), spec.n))
        elif op == "recall":
            extra.update(
                first_query_ms=median([info["first_query_ms"] for _, info in runs]),
                mean_hits=runs[0][1]["mean_hits"],
                top_k=spec.top_k,
            )
        elif op == "multi_append":
            extra.update(sessions=spec.sessions, per_session=spec.per_session)
        n = spec.sessions * spec.per_session if op == "multi_append" else spec.n
        rows.append({"backend": name, "operation": op, "ops_per_s": ops, "n": n, "repeats": len(runs), "extra": extra})
    measured = [s for s in storages if s]
    if measured:
        entries = spec.entries_per_repeat

        def mid(key: str) -> float | None:
            values = [s[key] for s in measured if s.get(key) is not None]
            return median(values) if values else None

        total, early_per_entry, late_per_entry = mid("bytes"), mid("early"), mid("late")
        db_bytes, wal_bytes = mid("db_bytes"), mid("wal_bytes")
        if total is None:
            raise ValueError(f"{name}: no storage measurement holds a byte count")
        growth = late_per_entry / early_per_entry if early_per_entry and late_per_entry is not None else None
        limit = GROWTH_TARGET if name not in CEILINGS else None
        rows.append(
            {
                "backend": name,
                "operation": "storage",
                "ops_per_s": None,
                "n": entries,
                "repeats": len(measured),
                "extra": {
                    "method": measured[0].get("method", ""),
                    "bytes": int(total),
                    "db_bytes": None if db_bytes is None else int(db_bytes),
                    "wal_bytes": None if wal_bytes is None else int(wal_bytes),
                    "bytes_per_entry": total / entries,
                    "early_bytes_per_entry": early_per_entry,
                    "late_bytes_per_entry": late_per_entry,
                    "growth_ratio": growth,
                    "growth_target": limit,
                    "growth_status": _status(growth, limit, at_most=True),
                },
            }
        )
    return rows


def _share(row: Mapping[str, Any], base: Mapping[str, Any] | None) -> float | None:
    """``row``'s ops/s over ``base``'s: the median over repeats of the ratio in the same repeat.

    The two ran side by side, so this cancels slow drifts in machine load better
    than a ratio of the two medians (used when the repeats do not pair up).
    """
    if base is None or not base["ops_per_s"] or row["ops_per_s"] is None:
        return None
    ours, theirs = row["extra"].get("runs") or [], base["extra"].get("runs") or []
    pairs = list(zip(ours, theirs))
    if pairs and len(pairs) == len(ours) and all(b > 0 for _, b in pairs):
        return median([a / b for a, b in pairs])  # repeat r beside ceiling repeat r
    return row["ops_per_s"] / base["ops_per_s"]


def _judge_against_raw(rows: list[dict]) -> None:
    """Set ``of_raw`` (and the ``RAW_TARGETS`` verdicts) on each backend row whose ceiling ran.

    ``of_raw`` is the backend's share of its :data:`RAW_OF` ceiling (:func:`_share`).
    Where a :data:`CONTRACT_COST_OF` ceiling ran too, the backend's rows and its
    ``RAW_OF`` ceiling's get ``of_bare`` (their share of it), and the bare
    ceiling's rows are labelled ``role: "contract cost"`` (they carry no target).
    """
    ceiling = {(row["backend"], row["operation"]): row for row in rows if row["backend"] in CEILINGS}
    bare_ones = set(CONTRACT_COST_OF.values())
    for row in rows:
        if row["backend"] in bare_ones:
            row["extra"]["role"] = "contract cost"
    for row in rows:
        name, op, extra = row["backend"], row["operation"], row["extra"]
        raw, bare = RAW_OF.get(name), CONTRACT_COST_OF.get(name)
        if bare:
            base = ceiling.get((bare, op))
            for subject in (row, ceiling.get((raw, op))):
                if subject is not None and (value := _share(subject, base)) is not None:
                    subject["extra"].update(of_bare=value, bare=bare)
        value = _share(row, ceiling.get((raw, op))) if raw else None
        if value is None:
            continue
        extra.update(of_raw=value, raw=raw)
        share = RAW_TARGETS.get((name, op))
        if share is not None:
            extra.update(target_of_raw=share, status=_status(value, share))


def _unmeasured_rows(name: str, spec: CacheBenchSpec, reason: str, status: str = "skipped") -> list[dict]:
    return [
        {"backend": name, "operation": op, "ops_per_s": None, "n": spec.n, "repeats": 0, "extra": {"status": status, "reason": reason}}
        for op in OPERATIONS
    ]


async def bench_cache(
    spec: CacheBenchSpec | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Run the benchmark; one dict row per (backend, operation), plus ``storage`` rows.

    Each backend's rows are followed by its raw ceilings' (:func:`ceilings_of`, the
    first time each comes up); they are measured side by side (:func:`measure_subjects`).
    A store that fails is reported as an ``error`` row and left out of the rest of
    the run; a backend's ceiling never runs without it. ``progress`` (e.g.
    ``print``) receives a line as each repeat starts.
    """
    spec = spec or CacheBenchSpec()
    env = os.environ if environ is None else environ
    note = progress or (lambda _line: None)
    work = Workload.make(spec)
    rows: list[dict] = []
    ceilings_done: set[str] = set()

    for name in spec.backends:
        try:
            bench_config(name, Path(tempfile.gettempdir()), env)  # skip early, before any progress line
        except BackendSkipped as exc:
            rows.extend(_unmeasured_rows(name, spec, str(exc)))
            continue
        raws = ceilings_of(name) if spec.raw_ceiling else ()
        labels = [name] + [raw for raw in raws if raw not in ceilings_done]
        runs: dict[str, tuple[list, list]] = {label: ([], []) for label in labels}
        failed: dict[str, tuple[str, str]] = {}
        r = 0
        while r < spec.repeats and name not in failed:
            active = [label for label in labels if label not in failed]
            note(f"{' + '.join(active)}: repeat {r + 1}/{spec.repeats}")
            try:
                outcomes = await _repeat(active, spec, work, env, owner=name)
            except SubjectFailed as exc:  # run this repeat again without it (over when it is the backend)
                error = exc.error
                if isinstance(error, BackendSkipped):
                    failed[exc.label] = ("skipped", str(error))
                else:
                    failed[exc.label] = ("error", f"{type(error).__name__}: {error}")
                continue
            for label, (results, storage) in zip(active, outcomes):
                runs[label][0].append(results)
                runs[label][1].append(storage)
            r += 1
        if name in failed:
            status, reason = failed[name]
            rows.extend(_unmeasured_rows(name, spec, reason, status))
            continue  # no ceiling without its backend (a later backend on the same store may run it)
        for label in labels:
            if label in failed:
                status, reason = failed[label]
                rows.extend(_unmeasured_rows(label, spec, reason, status))
            else:
                rows.extend(_rows_for(label, spec, *runs[label]))
        ceilings_done.update(labels[1:])
        if spec.breakdown and spec.raw_ceiling and name in RAW_OF and RAW_OF[name] not in failed:
            note(f"{name}: where the time goes")
            targets = {op: RAW_TARGETS.get((name, op)) for op in ("append", "read_last_10")}
            try:
                opener = functools.partial(open_subject, environ=env, backend=name)
                rows.extend(await breakdown_rows(name, RAW_OF[name], targets, work, opener))
            except SubjectFailed as exc:
                rows.append(_breakdown_failed(name, exc))
    _judge_against_raw(rows)
    return rows


def _breakdown_failed(name: str, exc: SubjectFailed) -> dict:
    error = exc.error
    return {
        "backend": name,
        "operation": "breakdown",
        "ops_per_s": None,
        "n": 0,
        "repeats": 0,
        "extra": {"breakdown_error": f"{exc.label}: {type(error).__name__}: {error}"},
    }


def run_bench_cache(spec: CacheBenchSpec | None = None, **kwargs: Any) -> list[dict]:
    """Synchronous :func:`bench_cache` (outside a running event loop)."""
    return asyncio.run(bench_cache(spec, **kwargs))


# -- output --------------------------------------------------------------------------

_OP_LABEL = {
    "append": "append (1 session)",
    "read_last_10": "read last 10",
    "recall": "keyword recall",
    "multi_append": "append ({sessions}×{per_session})",
}

_RAW_NOTES = {
    RAW_SQLITE: "plain sqlite3, same pragmas (WAL, synchronous=NORMAL), one INSERT per transaction, index (user, session, seq).",
    RAW_REDIS: "redis.asyncio, RPUSH + EXPIRE per append in one pipeline (one round trip), LRANGE -10 -1 per read.",
    RAW_POSTGRES_EQUAL_WORK: "asyncpg, hand-written SQL doing the cache contract's work on memlab's table layout "
    "(own schema, dropped after): per append one autocommitted statement, the state row's liveness check "
    "(real 7-day expiry) and FOR NO KEY UPDATE ordering lock in a CTE, then the INSERT under UNIQUE "
    "(user, session, qa_id); per read the liveness check (EXISTS) and ORDER BY seq DESC LIMIT 10.",
    RAW_POSTGRES: "the contract's cost, no target: asyncpg, one bare autocommitted INSERT per append, "
    "SELECT ... ORDER BY seq DESC LIMIT 10 per read, own table with index (user, session, seq), dropped after; "
    "no TTL state, no ordering lock, no unique qa_id.",
    RAW_DISKCACHE: "diskcache.Cache (default settings), one set per append, ten gets per read (keys known in Python).",
}


def _target_text(extra: Mapping[str, Any]) -> str:
    if extra.get("target_of_raw") is not None:
        return f">= {extra['target_of_raw']:g}× raw"
    if extra.get("role"):
        return f"none ({extra['role']})"
    if extra.get("target"):
        return f">= {_table.number(extra['target'])}/s"
    return ""


def skipped_backends(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{backend: "skipped: reason"}`` (or ``"error: ..."``) for every backend that did not run."""
    return {
        row["backend"]: f"{row['extra']['status']}: {row['extra']['reason']}"
        for row in rows
        if row["extra"].get("status") in ("skipped", "error")
    }


def to_frame(rows: Sequence[Mapping[str, Any]]):
    """The rows as a pandas DataFrame with the report's columns (``extra`` flattened).

    Columns: backend, operation, n, ops_per_s, of_raw, target, result,
    bytes_per_turn (storage rows), reason (skipped rows).
    """
    import pandas as pd

    records = []
    for row in rows:
        extra = row["extra"]
        result = extra.get("status") if row["operation"] != "storage" else extra.get("growth_status")
        records.append(
            {
                "backend": row["backend"],
                "operation": row["operation"],
                "n": row["n"],
                "ops_per_s": row["ops_per_s"],
                "of_raw": extra.get("of_raw"),
                "target": _target_text(extra),
                "result": result if result in ("PASS", "MISS") else None,
                "bytes_per_turn": extra.get("bytes_per_entry"),
                "reason": extra.get("reason"),
            }
        )
    return pd.DataFrame.from_records(
        records, columns=["backend", "operation", "n", "ops_per_s", "of_raw", "target", "result", "bytes_per_turn", "reason"]
    )


def _contract_cost_lines(measured: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per bare ceiling that ran: the shares of it (``of_bare``) of the backend and its equal-work ceiling."""
    lines = []
    for name, bare in CONTRACT_COST_OF.items():
        parts = []
        for subject in (name, RAW_OF.get(name)):
            shares = {
                row["operation"]: row["extra"]["of_bare"]
                for row in measured
                if row["backend"] == subject and row["extra"].get("bare") == bare and row["operation"] in ("append", "read_last_10")
            }
            if len(shares) == 2:
                parts.append(f"{subject} at {100 * shares['append']:.0f}% / {100 * shares['read_last_10']:.0f}%")
        if parts:
            lines.append(f"contract cost ({bare}, bare statements; no target): {', '.join(parts)} of it (append / read last 10)")
    return lines


def _breakdown_lines(measured: Sequence[Mapping[str, Any]], order: Mapping[str, int]) -> list[str]:
    """The "where the time goes" section (:mod:`memlab.bench._breakdown`), or nothing when it did not run."""
    rows = sorted((r for r in measured if r["operation"] == "breakdown"), key=lambda r: order[r["backend"]])
    if not rows:
        return []
    us = lambda value: "" if value is None else f"{value:,.1f}"  # noqa: E731
    table, failed = [], []
    for row in rows:
        extra = row["extra"]
        if "breakdown_error" in extra:
            failed.append(f"{row['backend']}: breakdown failed: {extra['breakdown_error']}")
            continue
        share = extra.get("target_of_raw")
        table.append(
            [
                row["backend"],
                _OP_LABEL[extra["of"]].replace(" (1 session)", ""),
                us(extra["public_us"]),
                us(extra["store_us"]),
                us(extra["decode_us"]) if extra["of"] == "read_last_10" else "",
                us(extra["own_us"]),
                f"{extra['raw']} {us(extra['raw_us'])}",
                f"{share:g}×" if share else "",
                us(extra.get("allowed_us")),
                "" if extra.get("over_us") is None else f"{extra['over_us']:+,.1f}",
            ]
        )
    out = [
        "",
        f"where the time goes: µs per call, medians of blocks of {BLOCK} ({BREAKDOWN_CALLS:,} calls each, one session of "
        f"{SEED_TURNS} turns, after the repeats); store = the backend's primitive alone (_append_qa / _read_qa), "
        "decode = the ten payloads into SessionQAEntry, memlab own = the rest of the public call (checks, entry and JSON, TTL rule, call chain)",
        _table.render(
            ["backend", "operation", "memlab", "store", "decode", "memlab own", "raw ceiling", "target", "allowed", "over"],
            table,
            right=(2, 3, 4, 5, 7, 8, 9),
        ),
    ]
    return out + failed


def format_table(rows: Sequence[Mapping[str, Any]], spec: CacheBenchSpec | None = None, env: Mapping[str, Any] | None = None) -> str:
    """The report ``memlab bench cache`` prints: throughput, flatness, storage, skipped backends."""
    spec = spec or CacheBenchSpec()
    env = env or environment()
    load = env.get("load_avg")
    out = [
        f"memlab bench cache: n={spec.n:,}, {spec.sessions}×{spec.per_session} multi-session appends, "
        f"medians of {spec.repeats} repeat{'s' if spec.repeats != 1 else ''}",
        f"Python {env['python']}, SQLite {env['sqlite']}, {env['cpus']} CPUs"
        + (f", load avg {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min, at the end)" if load else ""),
        "",
    ]
    order = {name: i for i, name in enumerate(dict.fromkeys(row["backend"] for row in rows))}
    skipped = skipped_backends(rows)
    measured = [row for row in rows if row["backend"] not in skipped]

    table = []
    for op in OPERATIONS:
        for row in sorted((r for r in measured if r["operation"] == op), key=lambda r: order[r["backend"]]):
            extra = row["extra"]
            runs = extra.get("runs") or []
            spread = f"{_table.number(min(runs))}..{_table.number(max(runs))}" if len(runs) > 1 else ""
            versus = f"{100 * extra['of_raw']:.0f}%" if extra.get("of_raw") is not None else ""
            table.append(
                [
                    row["backend"],
                    _OP_LABEL[op].format(sessions=spec.sessions, per_session=spec.per_session),
                    _table.number(row["n"]),
                    _table.number(row["ops_per_s"]),
                    spread,
                    versus,
                    _target_text(extra),
                    extra.get("status") or "",
                ]
            )
    out.append(
        _table.render(
            ["backend", "operation", "n", "ops/s", "min..max", "of raw", "target", "result"], table, right=(2, 3, 4, 5)
        )
    )
    out.extend(_contract_cost_lines(measured))

    flat = [r for r in measured if r["operation"] in ("append", "read_last_10") and "flatness_ratio" in r["extra"]]
    if flat:
        window = max(1, min(FLATNESS_WINDOW, spec.n // 2))
        out += [
            "",
            f"append flatness: median µs per append, first {window} vs last {window} of {spec.n:,} in one session;",
            f"read flatness: median µs of {READ_PROBE_CALLS} last-10 reads with the session at "
            f"{min(READ_PROBE_AT, spec.n):,} turns vs at {spec.n:,}",
        ]
        out.append(
            _table.render(
                ["backend", "operation", "early µs", "late µs", "late/early", "target", "result"],
                [
                    [
                        r["backend"],
                        "append" if r["operation"] == "append" else "read last 10",
                        f"{r['extra']['first_median_us']:,.1f}",
                        f"{r['extra']['last_median_us']:,.1f}",
                        f"{r['extra']['flatness_ratio']:.2f}×",
                        f"<= {r['extra']['flatness_target']:.1f}×" if r["extra"].get("flatness_target") else "",
                        r["extra"].get("flatness_status") or "",
                    ]
                    for r in sorted(flat, key=lambda r: (order[r["backend"]], r["operation"]))
                ],
                right=(2, 3, 4),
            )
        )

    storage = [r for r in measured if r["operation"] == "storage"]
    if storage:
        half = spec.n // 2
        out += [
            "",
            f"storage: bytes gained per turn over a repeat ({spec.entries_per_repeat:,} turns); bytes per turn of the first "
            f"{half:,} vs the last {spec.n - half:,} one-session appends (linear: equal); files at the end, before close",
        ]

        def per_turn(value: float | None) -> str:
            return "—" if value is None else f"{value:,.0f}"

        out.append(
            _table.render(
                ["backend", "measured by", "db file", "wal file", "bytes/turn", "1st half", "2nd half", "2nd/1st", "target", "result"],
                [
                    [
                        r["backend"],
                        r["extra"]["method"],
                        _table.size(r["extra"]["db_bytes"]),
                        _table.size(r["extra"]["wal_bytes"]),
                        per_turn(r["extra"]["bytes_per_entry"]),
                        per_turn(r["extra"]["early_bytes_per_entry"]),
                        per_turn(r["extra"]["late_bytes_per_entry"]),
                        "—" if r["extra"]["growth_ratio"] is None else f"{r['extra']['growth_ratio']:.2f}×",
                        f"<= {r['extra']['growth_target']:.1f}×" if r["extra"].get("growth_target") else "",
                        r["extra"].get("growth_status") or "",
                    ]
                    for r in storage
                ],
                right=(2, 3, 4, 5, 6, 7),
            )
        )

    out.extend(_breakdown_lines(measured, order))

    if skipped:
        out.append("")
        out.extend(f"{name}: {reason}" for name, reason in skipped.items())

    present = {row["backend"] for row in measured}
    out += ["", "ops/s: calls per second of wall-clock time (time.perf_counter), one awaited call at a time, fresh data dir per repeat."]
    if "sqlite" in present:
        out.append("sqlite commits every append before it returns (WAL, synchronous=NORMAL).")
    out.extend(f"{raw}: {note}" for raw, note in _RAW_NOTES.items() if raw in present)
    if present & CEILINGS:
        judged = ", ".join(f"{name} of {RAW_OF[name]}" for name in order if name in RAW_OF and RAW_OF[name] in present)
        out.append(
            "of raw: median over repeats of backend ops/s / ceiling ops/s"
            + (f" ({judged})" if judged else "")
            + "; they take turns every 50 calls."
        )
    recall = [r for r in measured if r["operation"] == "recall"]
    if recall:
        r = recall[0]["extra"]
        out.append(
            f"keyword recall: SessionManager.search, top_k={r.get('top_k')}, varied 1-3 word queries; "
            "the first query builds the index and is included."
        )
    if storage:
        out.append(
            "storage: files = SQLite page_count × page_size (WAL content included) plus value files; "
            "MEMORY USAGE = sum over the run's keys; pg_total_relation_size = the cache tables (heap, TOAST, indexes)."
        )
    return "\n".join(out)


def results_document(rows: Sequence[Mapping[str, Any]], spec: CacheBenchSpec, env: Mapping[str, Any] | None = None) -> dict:
    """What ``--json`` writes: the spec, the environment and the rows."""
    return {"benchmark": "cache", "spec": asdict(spec), "environment": dict(env or environment()), "rows": list(rows)}
