"""How one repeat is measured: the workload, and the loop that drives subjects through it.

:func:`measure_subjects` runs one repeat on open
:class:`~memlab.bench._stores.Subject` objects (a backend and its raw ceilings),
side by side in alternating blocks of :data:`BLOCK` calls; see
:mod:`memlab.bench.cache` for what each operation is.
"""

from __future__ import annotations

import contextlib
import gc
import random
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol

from memlab.bench._stores import Subject
from memlab.bench.errors import SubjectFailed


class CacheBenchSpec(Protocol):
    """What the measuring code reads of ``memlab.bench.cache.CacheBenchSpec`` (read-only, as that frozen dataclass)."""

    @property
    def n(self) -> int: ...
    @property
    def sessions(self) -> int: ...
    @property
    def per_session(self) -> int: ...
    @property
    def top_k(self) -> int: ...
    @property
    def seed(self) -> int: ...

__all__ = [
    "BLOCK",
    "FLATNESS_WINDOW",
    "READ_PROBE_AT",
    "READ_PROBE_CALLS",
    "SubjectFailed",
    "Workload",
    "blame",
    "blocks",
    "flatness",
    "measure_subject",
    "measure_subjects",
    "median",
]

#: Appends at each end of the session compared for flatness.
FLATNESS_WINDOW = 20
#: Read-last-10 flatness: timed reads when the session holds READ_PROBE_AT turns, and again at n.
READ_PROBE_AT = 10
READ_PROBE_CALLS = 50
#: A backend and its ceiling take turns every BLOCK calls (see :func:`measure_subjects`).
BLOCK = 50


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


# -- workload ------------------------------------------------------------------------


@dataclass
class Workload:
    """Texts and queries, generated once (deterministic from the seed) and reused by every backend."""

    turns: list[tuple[str, str]]
    multi_turns: list[tuple[str, str]]
    queries: list[str]
    payloads: list[str] = field(default_factory=list)
    multi_payloads: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, spec: "CacheBenchSpec") -> "Workload":
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
    return entry.model_dump_json(exclude_none=True)  # as CacheBackend.create_qa_entry stores it


async def _read_times(subject: Subject, session: str) -> list[float]:
    perf = time.perf_counter
    times = []
    for _ in range(READ_PROBE_CALLS):
        t0 = perf()
        await subject.read_last_10(session)
        times.append(perf() - t0)
    return times


@contextlib.contextmanager
def blame(subject: Subject | str):
    """Re-raise any failure inside as :class:`SubjectFailed` naming the subject."""
    try:
        yield
    except SubjectFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised, tagged with the store that failed
        raise SubjectFailed(subject if isinstance(subject, str) else subject.name, exc) from exc


def blocks(count: int, cuts: Sequence[int] = ()) -> list[tuple[int, int]]:
    """``[lo, hi)`` spans of at most BLOCK calls covering ``range(count)``, also split at ``cuts``."""
    edges = sorted({*range(0, count, BLOCK), *(cut for cut in cuts if 0 < cut < count), count})
    return list(zip(edges, edges[1:]))


class _Run:
    """One subject's measurements during :func:`measure_subjects`."""

    def __init__(self, subject: Subject) -> None:
        self.subject = subject
        self.elapsed: dict[str, float] = {}
        self.append_times: list[float] = []
        self.read_early: list[float] = []
        self.read_late: list[float] = []
        self.points: dict[str, Any] = {}
        self.results: dict[str, Any] = {}

    async def usage(self, label: str) -> None:
        if self.subject.probe is not None:
            self.points[label] = await self.subject.probe.measure()

    def storage(self, spec: "CacheBenchSpec") -> dict | None:
        points = self.points
        if "final" not in points:
            return None
        base, final = points["base"], points["final"]
        storage = {
            "bytes": final.bytes - base.bytes,
            "db_bytes": final.db_bytes,
            "wal_bytes": final.wal_bytes,
            "method": self.subject.method,
        }
        mid = spec.n // 2
        if "mid" in points:
            storage["early"] = (points["mid"].bytes - base.bytes) / mid
            storage["late"] = (points["appended"].bytes - points["mid"].bytes) / (spec.n - mid)
        return storage


async def measure_subjects(
    subjects: Sequence[Subject], spec: "CacheBenchSpec", work: Workload | None = None
) -> list[tuple[dict[str, Any], dict | None]]:
    """One repeat on **open** subjects: per subject ``({operation: (ops_per_s, info)}, storage or None)``.

    The subjects (a backend and its ceilings) run each operation side by side in
    blocks of :data:`BLOCK` calls, each timed on its own clock, so a burst of
    load on a shared machine lands on all alike. The order flips every block
    (``a b c``, then ``c b a``), so each pair of subjects runs in either order
    equally often. Every subject deletes
    what it wrote (:meth:`Subject.cleanup`) before this returns, also on failure.

    ``storage`` holds the bytes gained over the repeat (``bytes``), the physical file
    sizes at its end (``db_bytes``/``wal_bytes``, None on servers), and the bytes per
    turn of the first and second half of the one-session appends (``early``/``late``).
    """
    work = work or Workload.make(spec)
    perf = time.perf_counter
    session = "bench-append"
    sessions = [f"bench-s{i:04d}" for i in range(spec.sessions)]
    runs = [_Run(subject) for subject in subjects]
    mid, probe_at = spec.n // 2, min(READ_PROBE_AT, spec.n)

    async def phase(op: str, spans: list[tuple[int, int]], call, after=None) -> None:
        for run in runs:
            run.elapsed[op] = 0.0
        gc.collect()
        for b, (lo, hi) in enumerate(spans):
            for run in runs if b % 2 == 0 else reversed(runs):  # neither goes first every time
                with blame(run.subject):
                    start = perf()
                    for i in range(lo, hi):
                        await call(run, i)
                    run.elapsed[op] += perf() - start
            if after is not None:
                for run in runs:
                    with blame(run.subject):
                        await after(run, hi)  # side measurements, not timed

    async def append(run: _Run, i: int) -> None:
        (question, answer), payload = work.turns[i], work.payloads[i]
        t0 = perf()
        await run.subject.append(session, i, question, answer, payload)
        run.append_times.append(perf() - t0)

    async def probes(run: _Run, done: int) -> None:
        if done == probe_at:
            run.read_early = await _read_times(run.subject, session)
        if done == mid:
            await run.usage("mid")

    async def read(run: _Run, i: int) -> None:
        await run.subject.read_last_10(session)

    async def multi(run: _Run, i: int) -> None:
        question, answer = work.multi_turns[i]
        await run.subject.append(sessions[i % spec.sessions], spec.n + i, question, answer, work.multi_payloads[i])

    try:
        for run in runs:
            with blame(run.subject):
                await run.usage("base")
        await phase("append", blocks(spec.n, (probe_at, mid)), append, after=probes)
        for run in runs:
            with blame(run.subject):
                await run.usage("appended")
                run.read_late = await _read_times(run.subject, session)
            run.results["append"] = (spec.n / run.elapsed["append"], {"flatness": flatness(run.append_times)})

        await phase("read_last_10", blocks(spec.n), read)
        for run in runs:
            early, late = median(run.read_early), median(run.read_late)
            info = {"flatness": (early, late, late / early if early > 0 else float("inf"))}
            run.results["read_last_10"] = (spec.n / run.elapsed["read_last_10"], info)

        for run in runs:
            if not run.subject.has_recall:
                continue
            gc.collect()
            hits, first = 0, None
            with blame(run.subject):
                start = perf()
                for query in work.queries:
                    hits += await run.subject.recall(session, query, spec.top_k)
                    if first is None:
                        first = perf() - start
                elapsed = perf() - start
            if first is None:
                raise ValueError("the workload has no recall queries")
            run.results["recall"] = (spec.n / elapsed, {"first_query_ms": first * 1000, "mean_hits": hits / spec.n})

        count = len(work.multi_turns)  # round-robin: turn i goes to session i % sessions
        await phase("multi_append", blocks(count), multi)
        for run in runs:
            run.results["multi_append"] = (count / run.elapsed["multi_append"], {})
            with blame(run.subject):
                await run.usage("final")
    finally:
        for run in runs:
            with blame(run.subject):
                await run.subject.cleanup([session, *sessions])
    return [(run.results, run.storage(spec)) for run in runs]


async def measure_subject(subject: Subject, spec: "CacheBenchSpec", work: Workload | None = None) -> tuple[dict[str, Any], dict | None]:
    """:func:`measure_subjects` for one subject."""
    return (await measure_subjects([subject], spec, work))[0]
