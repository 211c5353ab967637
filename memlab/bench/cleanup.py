"""``memlab bench cleanup``: how long provenance cleanup takes after a one-document delete.

Per backend and repeat: one fresh session of ``turns`` turns, ``contaminated`` of
them (spread evenly) citing a graph node the delete removes, the others citing a
node it keeps, plus a persist watermark over every turn; the session is recorded
for the dataset in a metadata store beside it. Timed, each on its own fresh session:

* ``dry run``: :meth:`memlab.provenance.SessionCleaner.after_forget` with
  ``dry_run=True`` (list the candidate sessions, read them, compute the closure);
* ``cleanup``: the same, deleting the contaminated turns and lowering the watermark;
* ``backend ops``: the ceiling: the same backend reads the session and deletes the
  same turn ids through its public API, with no candidate lookup, closure or
  watermark (what any cleanup must at least do on that store).

Medians of the repeats; ``of ceiling`` is ceiling time / cleanup time. Server
backends run when their URL is set (as in ``memlab bench cache``).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench._measure import median
from memlab.bench._table import number, render
from memlab.bench.errors import BackendSkipped

__all__ = ["CleanupBenchSpec", "format_cleanup_table", "run_bench_cleanup"]

DATASET = uuid.UUID(int=1)


@dataclass(frozen=True)
class CleanupBenchSpec:
    """A session of ``turns`` turns of which ``contaminated`` cite the deleted node; ``repeats`` fresh sessions per timing."""

    turns: int = 1_000
    contaminated: int = 100
    repeats: int = 5
    backends: Sequence[str] = ("memory", "sqlite", "fs", "redis", "postgres")

    def __post_init__(self) -> None:
        from memlab.exceptions import ValidationError

        if not 1 <= self.contaminated <= self.turns:
            raise ValidationError(f"contaminated must be between 1 and turns ({self.turns}), got {self.contaminated}")
        if self.repeats < 1:
            raise ValidationError(f"repeats must be >= 1, got {self.repeats}")


async def _session(cache, records, user: str, spec: CleanupBenchSpec) -> tuple[str, list[str]]:
    """Write one benchmark session; returns its id and the contaminated turn ids."""
    from memlab.provenance import PERSIST_WATERMARK_KIND

    session = f"bench-cleanup-{uuid.uuid4()}"
    step = spec.turns / spec.contaminated
    hits = {int(i * step) for i in range(spec.contaminated)}
    bad = []
    for i in range(spec.turns):
        node = "gone" if i in hits else "kept"
        entry = await cache.create_qa_entry(
            user, session, question=f"question {i}", answer=f"answer {i} " * 8, used_graph_element_ids={"node_ids": [node], "edge_ids": []}
        )
        if i in hits:
            bad.append(entry.qa_id)
    await cache.create_session_context_entry(user, session, {"id": f"{PERSIST_WATERMARK_KIND}:{DATASET}", "kind": PERSIST_WATERMARK_KIND, "count": spec.turns})
    await records.sessions.touch(user, session, DATASET)
    return session, bad


async def _bench_backend(name: str, spec: CleanupBenchSpec, root: Path, progress: Callable[[str], None] | None) -> list[dict[str, Any]]:
    from memlab._clock import SystemClock
    from memlab.bench.cache import bench_config
    from memlab.config import build_cache_backend
    from memlab.provenance import ForgetEvent, SessionCleaner
    from memlab.relational import RelationalStore
    from memlab.session import SessionManager

    cache = build_cache_backend(bench_config(name, root / name), SystemClock())
    if cache is None:
        raise BackendSkipped("caching is off")
    records = RelationalStore(root / f"{name}-memlab.db", SystemClock())
    user = str(uuid.uuid4())  # a fresh user: a shared server keeps nobody else's rows in the way
    times: dict[str, list[float]] = {"dry run": [], "cleanup": [], "backend ops": []}
    removed: list[int] = []
    await cache.open()
    await records.open()
    try:
        cleaner = SessionCleaner(cache, records, default_session_id="default_session", turn_lock=SessionManager(cache).turn_lock)
        for repeat in range(spec.repeats):
            for op in times:
                session, bad = await _session(cache, records, user, spec)
                started = time.perf_counter()
                if op == "backend ops":
                    await cache.get_all_qa_entries(user, session)
                    await cache.get_session_context_entries(user, session)
                    for qa_id in bad:
                        await cache.delete_qa_entry(user, session, qa_id)
                else:
                    receipt = await cleaner.after_forget(
                        ForgetEvent(DATASET, frozenset({"doc"}), frozenset({"gone"}), frozenset(), False, dry_run=op == "dry run")
                    )
                    if op == "cleanup":
                        removed.append(len(receipt.qa_ids))
                times[op].append(time.perf_counter() - started)
                await cache.delete_session(user, session)
            if progress:
                progress(f"{name}: repeat {repeat + 1}/{spec.repeats}")
    finally:
        for record in await records.sessions.of_user(uuid.UUID(user)):
            await cache.delete_session(user, record.session_id)
        await records.close()
        await cache.close()
    ceiling = median(times["backend ops"])
    rows = []
    for op, values in times.items():
        rows.append(
            {
                "backend": name,
                "operation": op,
                "turns": spec.turns,
                "contaminated": spec.contaminated,
                "removed": median(removed) if op == "cleanup" else None,
                "median_ms": median(values) * 1000,
                "min_ms": min(values) * 1000,
                "max_ms": max(values) * 1000,
                "of_ceiling": ceiling / median(values) if op == "cleanup" else None,
            }
        )
    return rows


async def run_bench_cleanup(spec: CleanupBenchSpec, *, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """One row per (backend, operation); a backend that cannot run gives one row with ``skipped`` set."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memlab-bench-cleanup-") as tmp:
        for name in spec.backends:
            try:
                rows.extend(await _bench_backend(name, spec, Path(tmp), progress))
            except BackendSkipped as exc:
                rows.append({"backend": name, "operation": None, "skipped": str(exc)})
    return rows


def format_cleanup_table(rows: Sequence[dict[str, Any]], spec: CleanupBenchSpec) -> str:
    """The rows as a text table (medians; skipped backends listed after it)."""
    headers = ["backend", "operation", "turns", "contaminated", "removed", "median ms", "min..max ms", "of ceiling"]
    body = [
        [
            row["backend"],
            row["operation"],
            number(row["turns"]),
            number(row["contaminated"]),
            "" if row["removed"] is None else number(row["removed"]),
            number(row["median_ms"], 1),
            f"{number(row['min_ms'], 1)}..{number(row['max_ms'], 1)}",
            "" if row["of_ceiling"] is None else f"{row['of_ceiling']:.0%}",
        ]
        for row in rows
        if row.get("operation")
    ]
    title = (
        f"memlab bench cleanup: a {spec.turns:,}-turn session, {spec.contaminated:,} turns citing the deleted node, "
        f"medians of {spec.repeats} repeats (of ceiling: backend ops / cleanup)"
    )
    skipped = [f"skipped {row['backend']}: {row['skipped']}" for row in rows if row.get("skipped")]
    return "\n".join([title, "", render(headers, body, right=(2, 3, 4, 5, 6, 7)), *([""] + skipped if skipped else [])])

