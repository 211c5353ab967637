"""``memlab bench usage``: what usage tracking adds to a session turn.

Two stacks over the same remembered :func:`~memlab.bench.corpus.synthetic_qa` corpus,
both on the default SQLite cache with the offline LLM at ``latency_ms`` (0 by
default): one with usage tracking (``session.track_usage``, the default), one
without. The same seeded conversation runs through ``stack.search(..., session_id=...)``
on both, the two taking turns every ``block`` turns so machine load hits both alike.

Reported: the median wall-clock per turn of each, the difference and its share of an
untracked turn, and the recording itself timed directly (the metered calls added to
``session_records`` / ``session_model_usage``: one SQLite transaction per turn).
Target: the added cost per turn <= 5 % of a turn.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench import _table
from memlab.bench._measure import median

__all__ = ["OVERHEAD_TARGET", "UsageBenchSpec", "format_usage_table", "run_bench_usage"]

#: usage tracking may add at most this share of a turn's wall-clock time
OVERHEAD_TARGET = 0.05


@dataclass(frozen=True)
class UsageBenchSpec:
    """What ``memlab bench usage`` runs."""

    turns: int = 200
    documents: int = 60
    latency_ms: float = 0.0
    embedder: str = "memlab/hashing"
    block: int = 10
    seed: int = 0


class _TimedRecorder:
    """Times each call of a stack's usage recorder (wraps its ``record``)."""

    def __init__(self, recorder: Any) -> None:
        self.times: list[float] = []
        self._record = recorder.record
        recorder.record = self.record

    async def record(self, *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        await self._record(*args, **kwargs)
        self.times.append(time.perf_counter() - started)


async def run_bench_usage(spec: UsageBenchSpec, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Rows: ``tracked``, ``untracked`` (median / p95 ms per turn) and ``overhead`` (difference, share, the write timed)."""
    from memlab.bench.corpus import synthetic_conversation, synthetic_qa
    from memlab.config import LLMConfig, SessionConfig

    say = progress or (lambda line: None)
    corpus = synthetic_qa(spec.documents, seed=spec.seed)
    turns = [turn.text for turn in synthetic_conversation(spec.turns, [item.question for item in corpus.questions], seed=spec.seed)]
    times: dict[str, list[float]] = {"tracked": [], "untracked": []}
    with tempfile.TemporaryDirectory(prefix="memlab-bench-usage-") as root:
        stacks = {
            name: _table.stack(
                Path(root) / name, spec.embedder, llm=LLMConfig(offline_latency_ms=spec.latency_ms), session=SessionConfig(track_usage=name == "tracked")
            )
            for name in times
        }
        for stack in stacks.values():
            await stack.open()
        try:
            for name, stack in stacks.items():
                say(f"{name}: remember {len(corpus.documents)} documents")
                await stack.remember(list(corpus.documents), progress=False)
                await stack.search(turns[0], session_id="warm-up")  # imports and caches, untimed
            timed = _TimedRecorder(stacks["tracked"].usage.recorder)
            for start in range(0, len(turns), spec.block):
                for name, stack in stacks.items():
                    for message in turns[start : start + spec.block]:
                        began = time.perf_counter()
                        await stack.search(message, session_id="bench-usage")
                        times[name].append(time.perf_counter() - began)
                say(f"{min(start + spec.block, len(turns))}/{len(turns)} turns on each stack")
            tracked = await stacks["tracked"].usage.get("bench-usage")
        finally:
            for stack in stacks.values():
                await stack.close()
    rows = [_row(name, values) for name, values in times.items()]
    difference = rows[0]["median_ms"] - rows[1]["median_ms"]
    write_ms = median(timed.times) * 1000 if timed.times else None
    rows.append(
        {
            "name": "overhead",
            "turns": len(turns),
            "median_ms": difference,
            "p95_ms": None,
            "share": difference / rows[1]["median_ms"],
            "write_ms": write_ms,
            "write_share": write_ms / rows[1]["median_ms"] if write_ms is not None else None,
            "recorded_calls": (sum(model.calls for model in tracked.models) if tracked else 0),
            "target": OVERHEAD_TARGET,
        }
    )
    return rows


def _row(name: str, values: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {"name": name, "turns": len(values), "median_ms": median(values) * 1000, "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1000}


def format_usage_table(rows: Sequence[dict[str, Any]], spec: UsageBenchSpec) -> str:
    """The rows as text, with the verdict on the overhead row (the larger of the A/B difference and the timed write)."""
    n = _table.number
    body = []
    for row in rows:
        if row["name"] != "overhead":
            body.append([row["name"], n(row["turns"]), n(row["median_ms"], 2), n(row["p95_ms"], 2), "", "", ""])
            continue
        worst = max(row["share"], row["write_share"] or 0.0)
        verdict = "PASS" if worst <= row["target"] else "MISS"
        body.append(
            [
                "overhead (tracked - untracked)", n(row["turns"]), n(row["median_ms"], 2), "",
                f"{row['share'] * 100:+.1f} % (write alone {n(row['write_ms'], 3)} ms = {(row['write_share'] or 0) * 100:.1f} %)",
                f"<= {row['target'] * 100:.0f} %", verdict,
            ]
        )
    table = _table.render(["", "turns", "median ms", "p95 ms", "of an untracked turn", "target", "result"], body, right=(1, 2, 3))
    notes = (
        f"{spec.turns} turns of a seeded conversation over {spec.documents} remembered synthetic_qa documents, stack.search(..., session_id=...) "
        f"on the default sqlite cache, offline LLM at {spec.latency_ms:g} ms, embedder {spec.embedder}; the two stacks take turns every "
        f"{spec.block} turns. write alone: UsageRecorder.record timed inside the tracked turns (one metadata-DB transaction per turn)."
    )
    return f"{table}\n\n{notes}"
