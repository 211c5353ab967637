"""Cache backend throughput: what ``memlab bench cache`` runs.

Every backend named in the spec is built through
:func:`memlab.config.build_cache_backend` in a fresh data directory per repeat and
measured at the :class:`~memlab.cache.CacheBackend` level, one awaited call at a
time (each write is committed before the call returns):

``append``
    ``n`` turns appended to one session (``create_qa_entry``); every call is timed
    too, for the flatness check (median of the first 20 vs the last 20 calls).
``read_last_10``
    ``n`` reads of that session's last 10 turns (``get_latest_qa_entries``).
``recall``
    ``n`` varied keyword queries over the ``n``-turn session through
    ``SessionManager(backend).search(..., top_k=15)``; the first query builds the
    session's keyword index and is counted.
``multi_append``
    ``sessions`` × ``per_session`` appends, round-robin over the sessions.

Each operation's ops/s is the median over the repeats. Beside ``sqlite`` runs a
``raw-sqlite`` ceiling: plain :mod:`sqlite3` with the same pragmas (WAL,
``synchronous=NORMAL``), one transaction per append (one ``INSERT`` in autocommit
mode), the byte-identical JSON payloads, and one index on ``(user_id, session_id,
seq)``; it reads the last 10 by that index.

Results are a list of plain dict rows (``backend, operation, ops_per_s, n,
repeats, extra``), ready for ``pandas.DataFrame(rows)``; :func:`format_table`
prints them. A backend that needs a server (``SERVER_URL_ENV``) and has no URL in
the environment is reported as skipped with the reason, as is a name not (yet)
registered in :data:`memlab.config.CACHE_BACKENDS`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import random
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from memlab.bench import _table

__all__ = [
    "BackendSkipped",
    "CacheBenchSpec",
    "FLATNESS_TARGET",
    "OPERATIONS",
    "RAW_SQLITE",
    "SERVER_URL_ENV",
    "TARGETS",
    "bench_cache",
    "bench_config",
    "environment",
    "flatness",
    "format_table",
    "median",
    "results_document",
    "run_bench_cache",
]

#: Operations in table order.
OPERATIONS = ("append", "read_last_10", "recall", "multi_append")
#: Name of the plain-sqlite3 ceiling rows.
RAW_SQLITE = "raw-sqlite"
#: (backend, operation) -> minimum ops/s the issue asks for (2-core machine).
TARGETS: dict[tuple[str, str], float] = {
    ("sqlite", "append"): 5_000.0,
    ("sqlite", "read_last_10"): 10_000.0,
    ("sqlite", "recall"): 2_000.0,
}
#: backend -> maximum ratio of the late to the early median append time.
FLATNESS_TARGET: dict[str, float] = {"sqlite": 2.0}
#: Appends at each end of the session compared for flatness.
FLATNESS_WINDOW = 20

#: Backends that need a server: the env vars that may hold its URL, first set wins.
SERVER_URL_ENV: dict[str, tuple[str, ...]] = {
    "redis": ("MEMLAB_TEST_REDIS_URL",),
    "postgres": ("MEMLAB_TEST_POSTGRES_URL", "CACHE_DB_URL"),
}


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
}


class BackendSkipped(Exception):
    """The backend cannot run here; the message says why."""


@dataclass(frozen=True)
class CacheBenchSpec:
    """What to measure. Defaults are the issue's sizes."""

    backends: tuple[str, ...] = ("memory", "sqlite")
    repeats: int = 3
    n: int = 1000
    sessions: int = 100
    per_session: int = 20
    top_k: int = 15
    seed: int = 0
    raw_ceiling: bool = True

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


def median(values: Sequence[float]) -> float:
    """The median; ValueError on an empty sequence."""
    if not values:
        raise ValueError("median of no values")
    return statistics.median(values)


def flatness(times: Sequence[float], window: int = FLATNESS_WINDOW) -> tuple[float, float, float]:
    """``(early, late, late / early)``: median call time of the first and last ``window`` calls.

    The window shrinks to half the calls when there are fewer than ``2 * window``,
    so the two ends never overlap.
    """
    if len(times) < 2:
        raise ValueError(f"flatness needs at least 2 timings, got {len(times)}")
    width = max(1, min(window, len(times) // 2))
    early, late = median(times[:width]), median(times[-width:])
    return early, late, (late / early if early > 0 else float("inf"))


def _status(value: float | None, target: float | None, *, at_most: bool = False) -> str | None:
    if value is None or target is None:
        return None
    ok = value <= target if at_most else value >= target
    return "PASS" if ok else "MISS"


def bench_config(name: str, data_root: Path, environ: Mapping[str, str] | None = None):
    """The StackConfig the benchmark builds backend ``name`` from, or raise :class:`BackendSkipped`."""
    from memlab.config import CACHE_BACKENDS, CacheConfig, StackConfig

    env = os.environ if environ is None else environ
    if name == RAW_SQLITE:
        raise BackendSkipped(f"{RAW_SQLITE} is the ceiling, measured beside sqlite (it is not a CacheBackend)")
    if name not in CACHE_BACKENDS:
        raise BackendSkipped(f"not registered in memlab.config.CACHE_BACKENDS (known: {', '.join(sorted(CACHE_BACKENDS))})")
    settings: dict[str, Any] = {"backend": name}
    if name in SERVER_URL_ENV:
        names = SERVER_URL_ENV[name]
        url = next((env[var] for var in names if env.get(var)), None)
        if url is None:
            raise BackendSkipped(f"needs a server: set {' or '.join(names)}")
        settings.update(SERVER_SETTINGS[name](url))
    return StackConfig(data_root=data_root, cache=CacheConfig(**settings))


def _storage_bytes(path: Path | None) -> dict[str, int] | None:
    """Bytes on disk of a store: a file (with its ``-wal``) or a directory tree."""
    if path is None:
        return None
    path = Path(path)
    if path.is_file():
        wal = Path(f"{path}-wal")
        return {"db_bytes": path.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0}
    if path.is_dir():
        return {"db_bytes": sum(p.stat().st_size for p in path.rglob("*") if p.is_file()), "wal_bytes": 0}
    return None


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


# -- workload ------------------------------------------------------------------------


@dataclass
class _Workload:
    """Texts and queries, generated once (deterministic from the seed) and reused by every backend."""

    turns: list[tuple[str, str]]
    multi_turns: list[tuple[str, str]]
    queries: list[str]
    payloads: list[str] = field(default_factory=list)
    multi_payloads: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, spec: CacheBenchSpec) -> "_Workload":
        rng = random.Random(spec.seed)
        syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "xe", "zu", "pa", "de", "fo", "gi", "hu", "ji"]
        vocab = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(600)})

        def words(count: int) -> str:
            return " ".join(rng.choice(vocab) for _ in range(count))

        def turn() -> tuple[str, str]:  # ~250 bytes of question + answer text
            question = f"How does {words(3)} relate to {words(3)}?"
            answer = (f"The {words(4)} depends on {words(5)}; see {words(4)} and {words(5)}. " * 2)[:185]
            return question, answer

        turns = [turn() for _ in range(spec.n)]
        multi = [turn() for _ in range(spec.sessions * spec.per_session)]
        queries = []
        for i in range(spec.n):
            query = f"what about {words(rng.randint(1, 3))}"
            if i % 5 == 0:
                query += " zzqunknown"  # a token no turn has
            queries.append(query)
        workload = cls(turns, multi, queries)
        workload.payloads = [_payload(q, a) for q, a in turns]
        workload.multi_payloads = [_payload(q, a) for q, a in multi]
        return workload


def _payload(question: str, answer: str) -> str:
    """The JSON a CacheBackend stores for this turn (what the raw ceiling writes too)."""
    from memlab.models import SessionQAEntry

    entry = SessionQAEntry(
        time=datetime.now(timezone.utc).isoformat(), question=question, context="", answer=answer, qa_id=str(uuid.uuid4())
    )
    return entry.model_dump_json()


# -- one repeat of one backend ---------------------------------------------------------


async def _measure_backend(backend: Any, spec: CacheBenchSpec, work: _Workload, user: str, cleanup: bool) -> dict[str, Any]:
    from memlab.session import SessionManager

    perf = time.perf_counter
    session = "bench-append"
    results: dict[str, Any] = {}

    gc.collect()
    times = []
    start = perf()
    for question, answer in work.turns:
        t0 = perf()
        await backend.create_qa_entry(user, session, question=question, answer=answer)
        times.append(perf() - t0)
    results["append"] = (spec.n / (perf() - start), {"flatness": flatness(times)})

    gc.collect()
    start = perf()
    for _ in range(spec.n):
        await backend.get_latest_qa_entries(user, session, 10)
    results["read_last_10"] = (spec.n / (perf() - start), {})

    gc.collect()
    manager = SessionManager(backend)
    hits = 0
    start = perf()
    first = None
    for query in work.queries:
        hits += len(await manager.search(user, query, session_id=session, top_k=spec.top_k))
        if first is None:
            first = perf() - start
    results["recall"] = (spec.n / (perf() - start), {"first_query_ms": first * 1000, "mean_hits": hits / spec.n})

    gc.collect()
    sessions = [f"bench-s{i:04d}" for i in range(spec.sessions)]
    start = perf()
    i = 0
    for _ in range(spec.per_session):
        for sid in sessions:
            question, answer = work.multi_turns[i]
            i += 1
            await backend.create_qa_entry(user, sid, question=question, answer=answer)
    results["multi_append"] = (len(work.multi_turns) / (perf() - start), {})

    if cleanup:  # leave a shared server as we found it
        for sid in [session, *sessions]:
            await backend.delete_session(user, sid)
    return results


async def _backend_repeat(name: str, spec: CacheBenchSpec, work: _Workload, environ: Mapping[str, str] | None):
    from memlab._clock import SystemClock
    from memlab.config import build_cache_backend

    with tempfile.TemporaryDirectory(prefix="memlab-bench-") as tmp:
        config = bench_config(name, Path(tmp), environ)
        backend = build_cache_backend(config, SystemClock())
        await backend.open()
        try:
            results = await _measure_backend(
                backend, spec, work, user=f"bench-{uuid.uuid4().hex[:12]}", cleanup=name in SERVER_URL_ENV
            )
        finally:
            await backend.close()
        storage = _storage_bytes(getattr(backend, "path", None)) if name not in SERVER_URL_ENV else None
    return results, storage


def _raw_repeat(spec: CacheBenchSpec, work: _Workload) -> tuple[dict[str, Any], dict[str, int] | None]:
    perf = time.perf_counter
    user, session = "bench-raw", "bench-append"
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memlab-bench-raw-") as tmp:
        path = Path(tmp) / "raw.db"
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE qa (seq INTEGER PRIMARY KEY AUTOINCREMENT, user_id TEXT NOT NULL, "
                "session_id TEXT NOT NULL, qa_id TEXT NOT NULL, payload TEXT NOT NULL, created_at REAL NOT NULL)"
            )
            conn.execute("CREATE INDEX ix_qa_session_seq ON qa (user_id, session_id, seq)")
            insert = "INSERT INTO qa (user_id, session_id, qa_id, payload, created_at) VALUES (?, ?, ?, ?, ?)"
            last = "SELECT payload FROM qa WHERE user_id = ? AND session_id = ? ORDER BY seq DESC LIMIT ?"

            gc.collect()
            times = []
            start = perf()
            for i, payload in enumerate(work.payloads):
                t0 = perf()
                conn.execute(insert, (user, session, f"q{i}", payload, time.time()))
                times.append(perf() - t0)
            results["append"] = (spec.n / (perf() - start), {"flatness": flatness(times)})

            gc.collect()
            start = perf()
            for _ in range(spec.n):
                rows = conn.execute(last, (user, session, 10)).fetchall()
                rows.reverse()
            results["read_last_10"] = (spec.n / (perf() - start), {})

            gc.collect()
            sessions = [f"bench-s{i:04d}" for i in range(spec.sessions)]
            start = perf()
            i = 0
            for _ in range(spec.per_session):
                for sid in sessions:
                    conn.execute(insert, (user, sid, f"m{i}", work.multi_payloads[i], time.time()))
                    i += 1
            results["multi_append"] = (len(work.multi_payloads) / (perf() - start), {})
        finally:
            conn.close()
        storage = _storage_bytes(path)
    return results, storage


# -- aggregation ---------------------------------------------------------------------


def _rows_for(name: str, spec: CacheBenchSpec, repeats: list[dict[str, Any]], storages: list[dict[str, int] | None]) -> list[dict]:
    rows = []
    for op in OPERATIONS:
        runs = [rep[op] for rep in repeats if op in rep]
        if not runs:
            continue
        ops = median([value for value, _ in runs])
        target = TARGETS.get((name, op))
        extra: dict[str, Any] = {"runs": [round(value, 1) for value, _ in runs], "target": target, "status": _status(ops, target)}
        if op == "append":
            early, late, ratio = (median([info["flatness"][k] for _, info in runs]) for k in range(3))
            limit = FLATNESS_TARGET.get(name)
            extra.update(
                first_median_us=early * 1e6,
                last_median_us=late * 1e6,
                flatness_ratio=ratio,
                flatness_window=max(1, min(FLATNESS_WINDOW, spec.n // 2)),
                flatness_target=limit,
                flatness_status=_status(ratio, limit, at_most=True),
            )
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
        db = int(median([s["db_bytes"] for s in measured]))
        rows.append(
            {
                "backend": name,
                "operation": "storage",
                "ops_per_s": None,
                "n": spec.entries_per_repeat,
                "repeats": len(measured),
                "extra": {
                    "db_bytes": db,
                    "wal_bytes": int(median([s["wal_bytes"] for s in measured])),
                    "bytes_per_entry": db / spec.entries_per_repeat,
                },
            }
        )
    return rows


def _skipped_rows(name: str, spec: CacheBenchSpec, reason: str, status: str = "skipped") -> list[dict]:
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

    ``progress`` (e.g. ``print``) receives a line as each repeat starts.
    """
    from memlab.exceptions import MemlabError

    spec = spec or CacheBenchSpec()
    note = progress or (lambda _line: None)
    work = _Workload.make(spec)
    rows: list[dict] = []

    def raw_rows() -> list[dict]:
        repeats, storages = [], []
        for r in range(spec.repeats):
            note(f"{RAW_SQLITE}: repeat {r + 1}/{spec.repeats}")
            results, storage = _raw_repeat(spec, work)
            repeats.append(results)
            storages.append(storage)
        return _rows_for(RAW_SQLITE, spec, repeats, storages)

    for name in spec.backends:
        repeats, storages = [], []
        try:
            bench_config(name, Path(tempfile.gettempdir()), environ)  # skip early, before any progress line
            for r in range(spec.repeats):
                note(f"{name}: repeat {r + 1}/{spec.repeats}")
                results, storage = await _backend_repeat(name, spec, work, environ)
                repeats.append(results)
                storages.append(storage)
        except BackendSkipped as exc:
            rows.extend(_skipped_rows(name, spec, str(exc)))
        except MemlabError as exc:
            rows.extend(_skipped_rows(name, spec, f"{type(exc).__name__}: {exc}", status="error"))
        else:
            rows.extend(_rows_for(name, spec, repeats, storages))
        if name == "sqlite" and spec.raw_ceiling:
            rows.extend(raw_rows())
    if spec.raw_ceiling and "sqlite" not in spec.backends:
        rows.extend(raw_rows())
    return rows


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


def format_table(rows: Sequence[Mapping[str, Any]], spec: CacheBenchSpec | None = None, env: Mapping[str, Any] | None = None) -> str:
    """The report ``memlab bench cache`` prints: throughput, append flatness, storage."""
    spec = spec or CacheBenchSpec()
    env = env or environment()
    out = [
        f"memlab bench cache: n={spec.n:,}, {spec.sessions}×{spec.per_session} multi-session appends, "
        f"medians of {spec.repeats} repeat{'s' if spec.repeats != 1 else ''}",
        f"Python {env['python']}, SQLite {env['sqlite']}, {env['cpus']} CPUs"
        + (f", load avg {env['load_avg'][0]:.2f}" if env.get("load_avg") else ""),
        "",
    ]
    order = {name: i for i, name in enumerate(dict.fromkeys(row["backend"] for row in rows))}
    skipped = {row["backend"]: row["extra"] for row in rows if row["extra"].get("status") in ("skipped", "error")}
    measured = [row for row in rows if row["backend"] not in skipped]
    raw = {row["operation"]: row["ops_per_s"] for row in measured if row["backend"] == RAW_SQLITE}

    table = []
    for op in OPERATIONS:
        for row in sorted((r for r in measured if r["operation"] == op), key=lambda r: order[r["backend"]]):
            extra = row["extra"]
            runs = extra.get("runs") or []
            spread = f"{_table.number(min(runs))}..{_table.number(max(runs))}" if len(runs) > 1 else ""
            versus = ""
            if row["backend"] == "sqlite" and raw.get(op):
                versus = f"{100 * row['ops_per_s'] / raw[op]:.0f}%"
            target = f">= {_table.number(extra['target'])}/s" if extra.get("target") else ""
            table.append(
                [
                    row["backend"],
                    _OP_LABEL[op].format(sessions=spec.sessions, per_session=spec.per_session),
                    _table.number(row["n"]),
                    _table.number(row["ops_per_s"]),
                    spread,
                    versus,
                    target,
                    extra.get("status") or "",
                ]
            )
    out.append(
        _table.render(
            ["backend", "operation", "n", "ops/s", "min..max", "of raw", "target", "result"], table, right=(2, 3, 4, 5)
        )
    )

    flat = [r for r in measured if r["operation"] == "append"]
    if flat:
        window = flat[0]["extra"].get("flatness_window", FLATNESS_WINDOW)
        out += ["", f"append flatness: median µs per append, first {window} vs last {window} of {spec.n:,} in one session"]
        out.append(
            _table.render(
                ["backend", "first", "last", "last/first", "target", "result"],
                [
                    [
                        r["backend"],
                        f"{r['extra']['first_median_us']:,.1f}",
                        f"{r['extra']['last_median_us']:,.1f}",
                        f"{r['extra']['flatness_ratio']:.2f}×",
                        f"<= {r['extra']['flatness_target']:.1f}×" if r["extra"].get("flatness_target") else "",
                        r["extra"].get("flatness_status") or "",
                    ]
                    for r in sorted(flat, key=lambda r: order[r["backend"]])
                ],
                right=(1, 2, 3),
            )
        )

    storage = [r for r in measured if r["operation"] == "storage"]
    if storage:
        out += ["", f"storage after one repeat ({spec.entries_per_repeat:,} turns, file size after close)"]
        out.append(
            _table.render(
                ["backend", "db file", "bytes/turn"],
                [[r["backend"], _table.size(r["extra"]["db_bytes"]), f"{r['extra']['bytes_per_entry']:,.0f}"] for r in storage],
                right=(1, 2),
            )
        )

    if skipped:
        out.append("")
        out.extend(f"{name}: {extra['status']}: {extra['reason']}" for name, extra in skipped.items())

    recall = [r for r in measured if r["operation"] == "recall"]
    out += ["", "ops/s: calls per second of wall-clock time (time.perf_counter), one awaited call at a time, fresh data dir per repeat."]
    if any(row["backend"] == "sqlite" for row in measured):
        out.append("sqlite commits every append before it returns (WAL, synchronous=NORMAL).")
    if raw:
        out.append(f"{RAW_SQLITE}: plain sqlite3, same pragmas and payload bytes, one INSERT per transaction, index (user, session, seq).")
    if recall:
        r = recall[0]["extra"]
        out.append(
            f"keyword recall: SessionManager.search, top_k={r.get('top_k')}, varied 1-3 word queries; "
            "the first query builds the index and is included."
        )
    return "\n".join(out)


def results_document(rows: Sequence[Mapping[str, Any]], spec: CacheBenchSpec, env: Mapping[str, Any] | None = None) -> dict:
    """What ``--json`` writes: the spec, the environment and the rows."""
    return {"benchmark": "cache", "spec": asdict(spec), "environment": dict(env or environment()), "rows": list(rows)}
