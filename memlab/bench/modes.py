"""``memlab bench modes``: wall-clock and LLM cost per session turn in each turn-analysis mode.

A seeded conversation (:func:`memlab.bench.corpus.synthetic_conversation`: new
questions about a remembered :func:`~memlab.bench.corpus.synthetic_qa` corpus,
terse follow-ups, guidance statements, thanks, corrections) runs turn by turn
through ``stack.search(message, session_id=...)`` (``--entry recall``: through
``stack.recall(..., scope="graph")``, the same turn) once per mode (``concurrent``,
``sequential``, ``off``), each on a fresh stack: the fast hashing embedder and the
offline LLM with a simulated ``latency_ms`` per call. The corpus is remembered
first by a stack on the same data root without simulated latency (not timed).

Reported per mode: median and p95 wall-clock of the answered turns (a
``sequential`` turn gated by its analysis is counted apart), the LLM calls
(answer / analysis), tokens in / out per turn, answered and gated turns, and
turns that fell back to another mode. The ``baseline`` row is the raw ceiling:
the plain retriever call ``stack.retrievers.get(search_type).get_completion(message,
RetrievalScope(...))`` on the ``off`` stack (same memory, same latency), without
the session machinery (no lock, no history, nothing stored), timed just before
each ``off`` turn so both see the same machine load.

Targets (issue 6): concurrent / sequential median <= 0.55 (0.5 when analysis and
answer take equal time); ``off`` at most 5 % over the baseline median.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench import _table
from memlab.exceptions import ValidationError

MODES = ("concurrent", "sequential", "off")
CONCURRENT_RATIO_TARGET = 0.55
OFF_OVERHEAD_TARGET = 0.05
SESSION_ID = "bench-modes"


@dataclass(frozen=True)
class ModesBenchSpec:
    """What ``memlab bench modes`` runs."""

    turns: int = 200
    latency_ms: float = 200.0
    modes: Sequence[str] = MODES
    documents: int = 60
    embedder: str = "memlab/hashing"
    search_type: str = "GRAPH_COMPLETION"
    top_k: int = 15
    baseline: bool = True
    seed: int = 0
    #: the entry point each turn goes through: ``"search"`` or ``"recall"`` (``scope="graph"``); the same turn either way
    entry: str = "search"

    def __post_init__(self) -> None:
        check_entry(self.entry)


#: the entry points a turn of the conversation can be sent through
ENTRIES = ("search", "recall")


def check_entry(entry: Any) -> str:
    """``entry`` when it is one of :data:`ENTRIES`, else a :class:`~memlab.exceptions.ValidationError` naming it."""
    if entry not in ENTRIES:
        raise ValidationError(f"entry must be one of {', '.join(ENTRIES)}, got {entry!r}")
    return str(entry)


def conversation(spec: ModesBenchSpec) -> tuple[list[str], list[Any]]:
    """The corpus documents and the conversation (:class:`~memlab.bench.corpus.ConversationTurn` s) of ``spec``."""
    from memlab.bench.corpus import synthetic_conversation, synthetic_qa

    corpus = synthetic_qa(spec.documents, seed=spec.seed)
    return corpus.documents, synthetic_conversation(spec.turns, [item.question for item in corpus.questions], seed=spec.seed)


def _stack(root: Path, spec: ModesBenchSpec, mode: str, latency_ms: float) -> Any:
    from memlab.config import AnalysisConfig, LLMConfig

    return _table.stack(root, spec.embedder, llm=LLMConfig(offline_latency_ms=latency_ms), analysis=AnalysisConfig(search_mode=mode))


@asynccontextmanager
async def bench_stack(root: Path, mode: str, spec: ModesBenchSpec, documents: Sequence[str]) -> AsyncIterator[Any]:
    """An open stack of ``mode`` at ``spec.latency_ms`` over ``documents``, remembered beforehand without latency."""
    async with _stack(root, spec, mode, 0.0) as builder:
        await builder.remember(list(documents), progress=False)
    async with _stack(root, spec, mode, spec.latency_ms) as stack:
        yield stack


async def baseline_scope(stack: Any, top_k: int) -> Any:
    """A fresh :class:`~memlab.retrievers.RetrievalScope` over every dataset the default user reads (what ``search()`` uses)."""
    from memlab.retrievers import RetrievalScope

    user = await stack.users.resolve(None)
    targets = await stack.datasets.list(user, "read")
    return RetrievalScope(stack.memory, [dataset.id for dataset in targets], top_k, stack.llm, retrievers=stack.retrievers.get)


async def converse(
    stack: Any,
    turns: Sequence[Any],
    *,
    session_id: str = SESSION_ID,
    search_type: str = "GRAPH_COMPLETION",
    top_k: int = 15,
    baseline: bool = False,
    warm_up: bool = False,
    lanes: bool = False,
    entry: str = "search",
) -> list[dict[str, Any]]:
    """Send ``turns`` (``ConversationTurn`` s or strings) one by one through ``stack.search`` (``entry="recall"``:
    ``stack.recall(..., scope="graph")``, the same session turn); one row per turn.

    Row: ``turn``, ``kind``, ``message``, ``wall_ms`` (around ``search()``), the turn
    record's ``mode``, ``requested_mode``, ``fallback_reason``, ``answered``,
    ``answer_calls``, ``analysis_calls``, ``tokens_in``, ``tokens_out``,
    ``effective_query``, ``rewrite``, ``analysis_error``, ``guidance`` (ids served),
    ``answer``; with ``baseline`` also ``baseline_ms`` / ``baseline_tokens_in`` /
    ``baseline_tokens_out`` of the bare retriever call made just before the turn.
    With ``warm_up``, one untimed bare retriever call on the first turn comes first (imports, caches).
    With ``lanes``, also ``lanes``: the turn record's ``{"raw", "rewrite", "merged"}`` element ids (None for a gated turn).
    """
    retriever = stack.retrievers.get(search_type)
    if warm_up and turns:
        await retriever.get_completion(getattr(turns[0], "text", turns[0]), await baseline_scope(stack, top_k))
    rows = []
    for index, turn in enumerate(turns):
        message = getattr(turn, "text", turn)
        row: dict[str, Any] = {"turn": index, "kind": getattr(turn, "kind", None), "message": message}
        if baseline:
            scope = await baseline_scope(stack, top_k)  # outside the timing: search() resolves its targets inside
            started = time.perf_counter()
            bare = await retriever.get_completion(message, scope)
            row["baseline_ms"] = (time.perf_counter() - started) * 1000
            row["baseline_tokens_in"], row["baseline_tokens_out"] = bare.usage["tokens_in"], bare.usage["tokens_out"]
        started = time.perf_counter()
        if entry == "recall":
            [result] = await stack.recall(message, search_type, session_id=session_id, top_k=top_k, scope="graph")
        else:
            [result] = await stack.search(message, search_type, session_id=session_id, top_k=top_k)
        row["wall_ms"] = (time.perf_counter() - started) * 1000
        record = result.raw["turn"]
        row.update(
            mode=record["mode"],
            requested_mode=record["requested_mode"],
            fallback_reason=record["fallback_reason"],
            answered=bool(record["answered"]),
            answer_calls=record["llm_calls"]["answer"],
            analysis_calls=record["llm_calls"]["analysis"],
            tokens_in=record["tokens_in"],
            tokens_out=record["tokens_out"],
            effective_query=record["effective_query"],
            rewrite=record["rewrite"],
            analysis_error=record["analysis_error"],
            guidance=list(record["guidance_ids"]),
            answer=result.text,
        )
        if lanes:
            row["lanes"] = record.get("lanes")
        rows.append(row)
    return rows


def summary_row(mode: str, turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures of one mode over its :func:`converse` rows."""
    answered = [row["wall_ms"] for row in turns if row["answered"]]
    n = len(turns)
    return {
        "kind": "mode",
        "mode": mode,
        "turns": n,
        "answered": len(answered),
        "gated": n - len(answered),
        "fallbacks": sum(1 for row in turns if row["mode"] != row["requested_mode"]),
        "analysis_errors": sum(1 for row in turns if row["analysis_error"]),
        "median_ms": _table.percentile(answered, 50),
        "p95_ms": _table.percentile(answered, 95),
        "mean_ms_all_turns": sum(row["wall_ms"] for row in turns) / n if n else None,
        "answer_calls": sum(row["answer_calls"] for row in turns),
        "analysis_calls": sum(row["analysis_calls"] for row in turns),
        "tokens_in_per_turn": sum(row["tokens_in"] for row in turns) / n if n else None,
        "tokens_out_per_turn": sum(row["tokens_out"] for row in turns) / n if n else None,
        "vs": None,
        "ratio": None,
        "target": None,
        "passed": None,
    }


def baseline_row(turns: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The figures of the bare retriever calls recorded in ``turns`` (:func:`converse` rows made with ``baseline``)."""
    bare = [
        {"wall_ms": row["baseline_ms"], "answered": True, "answer_calls": 1, "analysis_calls": 0, "analysis_error": None,
         "tokens_in": row["baseline_tokens_in"], "tokens_out": row["baseline_tokens_out"], "mode": "baseline", "requested_mode": "baseline"}
        for row in turns
    ]
    return {**summary_row("baseline", bare), "kind": "baseline"}


def compare(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill ``vs`` / ``ratio`` / ``target`` / ``passed``: concurrent over sequential, off over the baseline."""
    by_mode = {row["mode"]: row for row in rows}
    for mode, against, target in (("concurrent", "sequential", CONCURRENT_RATIO_TARGET), ("off", "baseline", 1 + OFF_OVERHEAD_TARGET)):
        row, other = by_mode.get(mode), by_mode.get(against)
        if row is None or other is None or not row["median_ms"] or not other["median_ms"]:
            continue
        ratio = row["median_ms"] / other["median_ms"]
        row.update(vs=against, ratio=ratio, **_table.judge(ratio, target, at_most=True))
    return rows


async def run_bench_modes(
    spec: ModesBenchSpec, progress: Callable[[str], None] | None = None
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(summary rows: one per mode in ``spec.modes`` order, the baseline after ``off``; the turn rows of each mode)."""
    say = progress or (lambda line: None)
    documents, turns = conversation(spec)
    rows, per_turn = [], {}
    with tempfile.TemporaryDirectory(prefix="memlab-bench-modes-") as root:
        for mode in spec.modes:
            baseline = spec.baseline and mode == "off"
            say(f"{mode}: remember {len(documents)} documents, then {len(turns)} turns at {spec.latency_ms:g} ms per LLM call"
                + (" (with the bare baseline call before each turn)" if baseline else ""))
            async with bench_stack(Path(root) / mode, mode, spec, documents) as stack:
                found = await converse(
                    stack, turns, search_type=spec.search_type, top_k=spec.top_k, baseline=baseline, warm_up=True, entry=spec.entry
                )
            per_turn[mode] = found
            rows.append(summary_row(mode, found))
            if baseline:
                rows.append(baseline_row(found))
    return compare(rows), per_turn


def _ratio(row: dict[str, Any]) -> str:
    if row["ratio"] is None:
        return ""
    if row["vs"] == "baseline":
        return f"{(row['ratio'] - 1) * 100:+.1f} % over baseline"
    return f"{row['ratio']:.3f} × {row['vs']}"


def _target(row: dict[str, Any]) -> str:
    if row["target"] is None:
        return ""
    if row["vs"] == "baseline":
        return f"<= +{(row['target'] - 1) * 100:.0f} %"
    return f"<= {row['target']:.2f}"


def format_modes_table(rows: Sequence[dict[str, Any]], spec: ModesBenchSpec) -> str:
    """The modes table as text."""
    n = _table.number
    table = _table.render(
        ["mode", "turns", "answered", "gated", "fallbacks", "median ms", "p95 ms", "answer calls", "analysis calls",
         "tok in/turn", "tok out/turn", "ratio", "target", "result"],
        [
            [
                row["mode"], row["turns"], row["answered"], row["gated"], row["fallbacks"], n(row["median_ms"], 1), n(row["p95_ms"], 1),
                n(row["answer_calls"]), n(row["analysis_calls"]), n(row["tokens_in_per_turn"], 0), n(row["tokens_out_per_turn"], 1),
                _ratio(row), _target(row), _table.verdict(row),
            ]
            for row in rows
        ],
        right=range(1, 11),
    )
    notes = (
        f"{spec.turns} turns of a seeded conversation (seed {spec.seed}) over {spec.documents} remembered synthetic_qa documents; "
        f"stack.{spec.entry}(..., {spec.search_type}, top_k {spec.top_k}) turn by turn, a fresh stack per mode; "
        f"offline LLM at {spec.latency_ms:g} ms per call, embedder {spec.embedder}.\n"
        "median / p95: wall-clock of the answered turns (gated = turns the sequential analysis answered without retrieval). "
        "baseline: the bare retriever get_completion() on the off stack, timed just before each off turn (no session machinery)."
    )
    return f"{table}\n\n{notes}"


@dataclass
class ModeRun:
    """One mode's run of a conversation (:func:`run_conversation`), as DataFrames.

    ``turns``: :func:`converse` rows; ``stored``: ``stack.frames.turns(session)``
    (the turn records as stored); ``context``: ``stack.frames.context(session)``
    (the guidance, feedback and watermark rows the session's analyses wrote).
    """

    mode: str
    turns: Any
    stored: Any
    context: Any


async def run_conversation(
    modes: Sequence[str] = ("concurrent", "sequential"),
    *,
    turns: int = 20,
    latency_ms: float = 100.0,
    documents: int = 20,
    seed: int = 0,
    root: str | Path | None = None,
    entry: str = "search",
) -> dict[str, ModeRun]:
    """The same seeded conversation in each of ``modes`` (a fresh stack each, under ``root`` or a temporary directory),
    each turn sent through ``entry`` (``"search"`` or ``"recall"``)."""
    import pandas as pd

    spec = ModesBenchSpec(turns=turns, latency_ms=latency_ms, modes=tuple(modes), documents=documents, seed=seed, entry=entry)
    corpus, conversation_turns = conversation(spec)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="memlab-modes-") as scratch:
        base = Path(root) if root is not None else Path(scratch)
        for mode in spec.modes:
            async with bench_stack(base / mode, mode, spec, corpus) as stack:
                rows = await converse(stack, conversation_turns, search_type=spec.search_type, top_k=spec.top_k, entry=spec.entry)
                runs[mode] = ModeRun(mode, pd.DataFrame(rows), await stack.frames.turns(SESSION_ID), await stack.frames.context(SESSION_ID))
    return runs
