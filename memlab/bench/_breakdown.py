"""Where one cache call's time goes: the breakdown section of ``memlab bench cache``.

For each backend measured beside a raw ceiling, one short run after its repeats
fills a session with :data:`SEED_TURNS` turns, then times, in alternating blocks of
:data:`BLOCK` calls (the order flipping every block, as in the main loop):

``append``
    ``create_qa_entry`` (the public call); the backend's store primitive
    ``_append_qa`` alone, given the payload, id and time the public call would
    have built (see :class:`~memlab.cache.CacheBackend`: the primitives are the
    subclass contract); the ceiling's append of the same payload.
``read last 10``
    ``get_latest_qa_entries``; the primitive ``_read_qa``; ``_parse_qa``, the
    decoding of those ten stored payloads into ``SessionQAEntry`` objects; the
    ceiling's read.

Reported per call (µs, the median of the blocks): the public call, the store
primitive, the decoding, memlab's own remainder (public minus store minus
decoding: argument checks, the entry and its JSON, the TTL rule, the call chain),
the ceiling, and what the target allows (the ceiling's time over the target
share). So a miss reads as "this many µs over, and here is which part".
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memlab.bench._measure import BLOCK, Workload, blame
from memlab.bench._stores import BackendSubject, Subject

__all__ = ["BREAKDOWN_CALLS", "SEED_TURNS", "breakdown_rows"]

#: turns in the session before the timed calls
SEED_TURNS = 200
#: timed calls per kind of call and operation
BREAKDOWN_CALLS = 1000


async def _timed_blocks(calls: dict[str, Any], count: int) -> dict[str, float]:
    """Median µs per call of each ``calls[label](i)`` coroutine function, in alternating blocks."""
    perf = time.perf_counter
    per_block: dict[str, list[float]] = {label: [] for label in calls}
    labels = list(calls)
    gc.collect()
    for b, lo in enumerate(range(0, count, BLOCK)):
        hi = min(count, lo + BLOCK)
        for label in labels if b % 2 == 0 else reversed(labels):
            call = calls[label]
            start = perf()
            for i in range(lo, hi):
                await call(i)
            per_block[label].append((perf() - start) / (hi - lo) * 1e6)
    return {label: statistics.median(times) for label, times in per_block.items()}


async def _measure(backend_subject: BackendSubject, ceiling: Subject, work: Workload, calls: int) -> dict[str, dict[str, float]]:
    calls = min(calls, len(work.payloads))  # each ceiling append stores a payload of its own (its qa_id is unique)
    cache, user = backend_subject.backend, backend_subject.user
    seeded, timed = "breakdown-seed", "breakdown-append"
    for i in range(SEED_TURNS):
        question, answer = work.turns[i % len(work.turns)]
        await cache.create_qa_entry(user, seeded, question=question, answer=answer)
        await ceiling.append(seeded, i, question, answer, work.payloads[i % len(work.payloads)])
    await cache.create_qa_entry(user, timed, question="q", answer="a")  # the store primitive appends to a live session
    turns, payloads = work.turns, work.payloads
    qa_ids = [str(uuid.uuid4()) for _ in range(calls)]  # drawn before the clock starts

    async def public_append(i: int) -> None:
        question, answer = turns[i % len(turns)]
        await cache.create_qa_entry(user, timed, question=question, answer=answer)

    async def store_append(i: int) -> None:
        await cache._append_qa(user, timed, qa_ids[i], payloads[i % len(payloads)], cache.clock.now())

    async def raw_append(i: int) -> None:
        question, answer = turns[i % len(turns)]
        await ceiling.append(timed, SEED_TURNS + i, question, answer, payloads[i % len(payloads)])

    stored = await cache._read_qa(user, seeded, 10, cache.clock.now())

    async def public_read(i: int) -> None:
        await cache.get_latest_qa_entries(user, seeded, 10)

    async def store_read(i: int) -> None:
        await cache._read_qa(user, seeded, 10, cache.clock.now())

    async def decode(i: int) -> None:
        cache._parse_qa(stored)

    async def raw_read(i: int) -> None:
        await ceiling.read_last_10(seeded)

    try:
        append = await _timed_blocks({"public": public_append, "store": store_append, "raw": raw_append}, calls)
        read = await _timed_blocks({"public": public_read, "store": store_read, "decode": decode, "raw": raw_read}, calls)
    finally:
        await backend_subject.cleanup([seeded, timed])
        await ceiling.cleanup([seeded, timed])
    append["decode"] = 0.0
    return {"append": append, "read_last_10": read}


async def breakdown_rows(
    name: str,
    ceiling_name: str,
    targets: Mapping[str, float | None],
    work: Workload,
    open_subject: Callable[[str, Path], Subject],
    calls: int = BREAKDOWN_CALLS,
) -> list[dict]:
    """One ``breakdown`` row per operation of ``name`` beside ``ceiling_name`` (see the module docstring).

    ``targets`` maps ``append`` / ``read_last_10`` to the share of the ceiling the
    backend must reach (None: no target, no allowance printed); ``open_subject(label,
    directory)`` gives the unopened subject of ``name`` or its ceiling.
    """
    with tempfile.TemporaryDirectory(prefix="memlab-breakdown-") as tmp:
        subjects: list[Subject] = []
        try:
            for label in (name, ceiling_name):
                directory = Path(tmp) / label
                directory.mkdir()
                with blame(label):
                    subjects.append(open_subject(label, directory))
                    await subjects[-1].open()
            backend_subject, ceiling = subjects
            if not isinstance(backend_subject, BackendSubject):
                raise TypeError(f"{name} is not a cache backend")
            with blame(name):
                measured = await _measure(backend_subject, ceiling, work, calls)
        finally:
            for subject in reversed(subjects):
                with blame(subject):
                    await subject.close()
    rows = []
    for op, us in measured.items():
        share = targets.get(op)
        own = max(0.0, us["public"] - us["store"] - us["decode"])
        allowed = us["raw"] / share if share else None
        rows.append(
            {
                "backend": name,
                "operation": "breakdown",
                "ops_per_s": None,
                "n": calls,
                "repeats": 1,
                "extra": {
                    "of": op,
                    "raw": ceiling_name,
                    "public_us": us["public"],
                    "store_us": us["store"],
                    "decode_us": us["decode"],
                    "own_us": own,
                    "raw_us": us["raw"],
                    "target_of_raw": share,
                    "allowed_us": allowed,
                    "over_us": None if allowed is None else us["public"] - allowed,
                },
            }
        )
    return rows
