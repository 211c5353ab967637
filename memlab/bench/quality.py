"""``memlab bench quality``: session-retriever quality and latency on a conversational benchmark.

For each retriever (``keyword``, ``bm25``, ``vector``, ``hybrid``) a fresh stack,
``MemoryStack.from_config(StackConfig(data_root=..., session=SessionConfig(retriever=name),
embedding=EmbeddingConfig(model=embedder)))`` on the default SQLite cache, runs
:func:`memlab.bench.quality_eval.evaluate` on ``stack.session_manager``: every
conversation written as one memlab session (one memlab turn per user/assistant
exchange), every question searched once; per category and overall: session recall@k,
turn recall@k, hit@k, MRR, the abstention questions' no-result rate, steady-state
p50/p95 search latency, cold start, first search per conversation and ingest cost per
turn (definitions: :mod:`memlab.bench.quality_eval`). ``cold_start_s`` here includes the
stack's ``open()``.

Datasets (``--dataset``): ``synthetic`` / ``synthetic:SEED``
(:func:`memlab.bench.conversations.synthetic`, 600 questions), ``overlap`` /
``overlap:SEED`` (:func:`memlab.bench.conversations.overlap`, 600 questions in the
evidence's words), ``longmemeval:PATH``, ``locomo:PATH`` (files the user supplies).
``--split dev`` / ``heldout`` runs one part of it (:meth:`Benchmark.split`; default
``all``). The result's ``overlap`` row is the benchmark's lexical-overlap distribution
(:func:`overlap_row`), printed under the tables.

``--tune``: :mod:`memlab.bench.quality_tune` (parameters picked on the dev splits of
every ``--dataset``, reported once on the held-out ones).

Scale run (``--scale N``, default 10,000; 0 skips): per retriever, ONE session of ``N``
memlab turns, the exchanges of :func:`~memlab.bench.conversations.synthetic`
conversations in order (a larger ``size`` is generated until there are enough, so no
turn repeats), then ``scale_queries`` of those conversations' questions searched after a
warm-up search (the index build, all ``N`` turns embedded for ``vector`` / ``hybrid``,
reported as ``first_query_s``).

Targets (issue "Retrieval quality", item 7): on the synthetic benchmark the best
retriever's session recall@5 >= 0.90 and >= 0.15 above ``keyword``'s; on a
10,000-turn session ``bm25`` p50 <= 2 ms and ``hybrid`` p50 <= 25 ms.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench import _table
from memlab.bench.conversations import Benchmark, load_locomo, load_longmemeval, overlap, synthetic
from memlab.bench.quality_eval import (
    ALL,
    BENCH_USER,
    DEFAULT_KS,
    Evaluation,
    check_ks,
    evaluate,
    haystack_turns,
    metric_names,
    quality_frame,
    summary_rows,
)
from memlab._cli_errors import UsageError
from memlab._stats import percentile
from memlab.exceptions import ValidationError

__all__ = [
    "DATASET_SPLITS",
    "OVERLAP_QUANTILES",
    "OVER_KEYWORD_TARGET",
    "RETRIEVERS",
    "SCALE_P50_TARGETS_MS",
    "SCALE_TARGET_TURNS",
    "SESSION_RECALL_TARGET",
    "QualityBenchSpec",
    "format_overlap_table",
    "format_quality_table",
    "load_dataset",
    "overlap_row",
    "run_bench_quality",
    "scale_haystack",
    "split_dataset",
    "to_frame",
]

#: the retrievers compared by default
RETRIEVERS = ("keyword", "bm25", "vector", "hybrid")
#: the best retriever's overall session recall@5 on the synthetic benchmark, at least
SESSION_RECALL_TARGET = 0.90
#: ... and at least this much above ``keyword``'s
OVER_KEYWORD_TARGET = 0.15
#: p50 search latency on a SCALE_TARGET_TURNS-turn session, at most (ms)
SCALE_P50_TARGETS_MS = {"bm25": 2.0, "hybrid": 25.0}
SCALE_TARGET_TURNS = 10_000
#: the k of the recall targets
TARGET_K = 5
#: ``--split``: the whole benchmark or one part of it
DATASET_SPLITS = ("all", "dev", "heldout")
#: the quantiles of the lexical-overlap distribution reported (:func:`overlap_row`)
OVERLAP_QUANTILES = (10, 25, 50, 75, 90)
#: the generated benchmarks ``--dataset`` names (``NAME`` or ``NAME:SEED``)
_GENERATED = {"synthetic": synthetic, "overlap": overlap}


@dataclass(frozen=True)
class QualityBenchSpec:
    """What ``memlab bench quality`` runs."""

    dataset: str = "synthetic"
    retrievers: Sequence[str] = RETRIEVERS
    ks: Sequence[int] = DEFAULT_KS
    limit: int | None = None
    embedder: str = "memlab/minilm"
    scale: int = SCALE_TARGET_TURNS
    scale_queries: int = 200
    #: ``all``, ``dev`` or ``heldout`` (:data:`DATASET_SPLITS`)
    split: str = "all"


def load_dataset(text: str) -> Benchmark:
    """``synthetic[:SEED[:SIZE]]`` / ``overlap[:SEED[:SIZE]]`` / ``longmemeval:PATH`` / ``locomo:PATH`` as a benchmark; :class:`UsageError` otherwise.

    ``SIZE``: questions of a generated benchmark (default 600), for quick runs.
    """
    kind, sep, rest = text.partition(":")
    if kind in _GENERATED:
        if not sep:
            return _GENERATED[kind]()
        seed_text, _, size_text = rest.partition(":")
        try:
            seed, size = int(seed_text), int(size_text) if size_text else "default"
        except ValueError:
            raise UsageError(f"--dataset {kind}:SEED[:SIZE] takes integers, got {rest!r}") from None
        try:
            return _GENERATED[kind](seed, size)
        except ValidationError as exc:
            raise UsageError(f"--dataset {text}: {exc}") from None
    if kind in ("longmemeval", "locomo") and sep and rest.strip():
        return load_longmemeval(rest) if kind == "longmemeval" else load_locomo(rest)
    raise UsageError(f"--dataset takes synthetic[:SEED[:SIZE]], overlap[:SEED[:SIZE]], longmemeval:PATH or locomo:PATH, got {text!r}")


def split_dataset(benchmark: Benchmark, split: str) -> Benchmark:
    """``benchmark`` itself for ``all``, else its ``dev`` / ``heldout`` part; :class:`UsageError` for another name or an empty part."""
    if split not in DATASET_SPLITS:
        raise UsageError(f"--split takes {', '.join(DATASET_SPLITS)}, got {split!r}")
    if split == "all":
        return benchmark
    part = benchmark.split("dev" if split == "dev" else "heldout")
    if not len(part):
        raise UsageError(f"the {split} split of {benchmark.name} has no question ({len(benchmark.conversations)} conversations)")
    return part


def overlap_row(benchmark: Benchmark) -> dict[str, Any]:
    """The lexical-overlap distribution of ``benchmark``'s questions (:meth:`Benchmark.overlaps`): count, mean, quantiles, share at 0.

    Also ``echo_mean`` / ``paraphrase_mean``: the mean over the questions marked
    ``paraphrase`` False / True (None when there are none, e.g. a public set).
    """
    import statistics

    values = benchmark.overlaps()
    flagged: dict[bool, list[float]] = {False: [], True: []}
    for conversation, question in benchmark.questions():
        value = conversation.lexical_overlap(question)
        if value is not None and question.paraphrase is not None:
            flagged[question.paraphrase].append(value)
    return {
        "kind": "overlap",
        "dataset": benchmark.name,
        "questions": len(values),
        "mean": statistics.mean(values) if values else None,
        **{f"p{q}": percentile(values, q) for q in OVERLAP_QUANTILES},
        "zero_share": sum(value == 0 for value in values) / len(values) if values else None,
        "echo_mean": statistics.mean(flagged[False]) if flagged[False] else None,
        "paraphrase_mean": statistics.mean(flagged[True]) if flagged[True] else None,
    }


def format_overlap_table(rows: Sequence[dict[str, Any]]) -> str:
    """:func:`overlap_row` rows as text: what share of a question's content words its evidence holds."""
    n = _table.number
    return _table.render(
        ["lexical overlap", "questions", "mean", *(f"p{q}" for q in OVERLAP_QUANTILES), "share 0", "echo mean", "paraphrase mean"],
        [
            [row["dataset"], row["questions"], n(row["mean"], 3), *(n(row[f"p{q}"], 2) for q in OVERLAP_QUANTILES), n(row["zero_share"], 2),
             n(row["echo_mean"], 3), n(row["paraphrase_mean"], 3)]
            for row in rows
        ],
        right=range(1, len(OVERLAP_QUANTILES) + 6),
    ) + (
        "\nlexical overlap: the share of a question's content words (stop words dropped, plural s folded) found in its "
        "evidence turns, answerable questions; echo / paraphrase: questions worded from / apart from the evidence."
    )


def _check(spec: QualityBenchSpec) -> tuple[int, ...]:
    from memlab.config import SESSION_RETRIEVERS

    if spec.split not in DATASET_SPLITS:
        raise UsageError(f"--split takes {', '.join(DATASET_SPLITS)}, got {spec.split!r}")
    unknown = [name for name in spec.retrievers if name not in SESSION_RETRIEVERS]
    if unknown or not spec.retrievers:
        raise UsageError(f"--retrievers takes {', '.join(SESSION_RETRIEVERS)}; got {', '.join(map(repr, unknown)) or 'none'}")
    try:
        return check_ks(spec.ks)
    except ValidationError as exc:
        raise UsageError(f"--k: {exc}") from None


async def _evaluate_retriever(benchmark: Benchmark, name: str, spec: QualityBenchSpec, root: Path, say: Callable[[str], None]) -> Evaluation:
    from memlab.config import SessionConfig

    began = time.perf_counter()
    stack = _table.stack(root, spec.embedder, session=SessionConfig(retriever=name))
    await stack.open()
    try:
        opened = time.perf_counter() - began
        run = await evaluate(stack.session_manager, benchmark, ks=spec.ks, limit=spec.limit, progress=say)
    finally:
        await stack.close()
    return dataclasses.replace(run, cold_start_s=run.cold_start_s + opened, embedder=spec.embedder)


def scale_haystack(turns: int, seed: int = 0) -> tuple[list[tuple[str, str]], list[str]]:
    """``turns`` (question, answer) exchanges of synthetic conversations, in order, and those conversations' questions."""
    size = 600
    while True:
        benchmark = synthetic(seed, size)
        exchanges: list[tuple[str, str]] = []
        questions: list[str] = []
        for conversation in benchmark.conversations:
            if len(exchanges) >= turns:
                break
            exchanges.extend((turn.question, turn.answer) for turn in haystack_turns(conversation))
            questions.extend(question.question for question in conversation.questions)
        if len(exchanges) >= turns:
            return exchanges[:turns], questions
        size *= 2


async def _scale_row(name: str, spec: QualityBenchSpec, root: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from memlab.config import SessionConfig

    exchanges, questions = scale_haystack(spec.scale)
    asked = (questions * (spec.scale_queries // len(questions) + 1))[: spec.scale_queries]
    user, session = BENCH_USER, "quality:scale"
    async with _table.stack(root, spec.embedder, session=SessionConfig(retriever=name)) as stack:
        manager = stack.session_manager
        say(f"scale: {name}: write {len(exchanges):,} turns to one session")
        began = time.perf_counter()
        for question, answer in exchanges:
            await manager.add_qa(user, question, answer, session_id=session)
        write_s = time.perf_counter() - began
        began = time.perf_counter()
        await manager.search(user, asked[0], session_id=session, top_k=max(spec.ks))
        first_s = time.perf_counter() - began
        timings: list[float] = []
        for query in asked:
            began = time.perf_counter()
            await manager.search(user, query, session_id=session, top_k=max(spec.ks))
            timings.append(time.perf_counter() - began)
    p50 = _table.percentile(timings, 50, scale=1000)
    target = SCALE_P50_TARGETS_MS.get(name) if spec.scale >= SCALE_TARGET_TURNS else None
    return {
        "kind": "scale",
        "retriever": name,
        "turns": len(exchanges),
        "queries": len(timings),
        "write_s": write_s,
        "first_query_s": first_s,
        "index_ms_per_turn": first_s * 1000 / len(exchanges) if exchanges else None,
        "p50_ms": p50,
        "p95_ms": _table.percentile(timings, 95, scale=1000),
        **_table.judge(p50, target, at_most=True),
    }


def _targets(rows: Sequence[dict[str, Any]], synthetic_run: bool) -> list[dict[str, Any]]:
    """The two quality targets (judged on the synthetic benchmark only, with k = 5 measured)."""
    key = f"session_recall_at_{TARGET_K}"
    overall = {row["retriever"]: row[key] for row in rows if row["category"] == ALL and row.get(key) is not None}
    if not overall:
        return []
    best = max(overall, key=lambda name: overall[name])
    found = [
        {
            "kind": "target",
            "name": f"best session recall@{TARGET_K}",
            "retriever": best,
            "value": overall[best],
            **_table.judge(overall[best], SESSION_RECALL_TARGET if synthetic_run else None),
        }
    ]
    if "keyword" in overall:
        gain = overall[best] - overall["keyword"]
        found.append(
            {
                "kind": "target",
                "name": f"best - keyword session recall@{TARGET_K}",
                "retriever": best,
                "value": gain,
                **_table.judge(gain, OVER_KEYWORD_TARGET if synthetic_run else None),
            }
        )
    return found


async def run_bench_quality(
    spec: QualityBenchSpec, progress: Callable[[str], None] | None = None, *, benchmark: Benchmark | None = None
) -> dict[str, Any]:
    """The whole run: ``{"rows", "questions", "scale", "targets", "spec"}`` (``benchmark`` overrides ``spec.dataset``).

    ``rows``: :func:`~memlab.bench.quality_eval.summary_rows` of every retriever;
    ``questions``: the per-question rows; ``scale``: one row per retriever of the
    ``spec.scale``-turn latency run (empty with ``scale=0``); ``targets``: the quality
    targets (``passed`` None when not judged: not the synthetic benchmark).
    """
    ks = _check(spec)
    say = progress or (lambda line: None)
    bench = split_dataset(benchmark if benchmark is not None else load_dataset(spec.dataset), spec.split)
    rows: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    scale: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memlab-bench-quality-") as root:
        for name in spec.retrievers:
            say(f"{name}: {bench.name}")
            run = await _evaluate_retriever(bench, name, spec, Path(root) / name, say)
            rows.extend(summary_rows(run))
            questions.extend(run.questions)
        if spec.scale:
            for name in spec.retrievers:
                scale.append(await _scale_row(name, spec, Path(root) / f"scale-{name}", say))
    synthetic_run = bench.name.startswith("synthetic")
    targets = _targets(rows, synthetic_run)
    details = {**dataclasses.asdict(spec), "ks": list(ks), "retrievers": list(spec.retrievers), "benchmark": bench.name}
    return {"rows": rows, "questions": questions, "scale": scale, "targets": targets, "spec": details, "overlap": [overlap_row(bench)]}


def to_frame(result: dict[str, Any], *, questions: bool = False) -> Any:
    """The summary rows (``questions=True``: the per-question rows) of a :func:`run_bench_quality` result as a typed DataFrame."""
    ks = result["spec"]["ks"]
    return quality_frame(result["questions"] if questions else result["rows"], ks, questions=questions)


def format_quality_table(result: dict[str, Any]) -> str:
    """The overall, per-category, scale and target tables as text."""
    n = _table.number
    ks = result["spec"]["ks"]
    rows = result["rows"]
    parts = []
    metric_headers = [f"sR@{k}" for k in ks] + [f"tR@{k}" for k in ks] + [f"hit@{k}" for k in ks] + ["MRR"]
    metric_keys = metric_names(ks)
    overall = [row for row in rows if row["category"] == ALL]
    if overall:
        parts.append(
            _table.render(
                ["retriever", "questions", *metric_headers, "abst. empty", "p50 ms", "p95 ms", "cold s", "1st query ms", "write ms/turn", "ingest ms/turn"],
                [
                    [
                        row["retriever"], row["questions"], *(n(row[key], 3) for key in metric_keys), n(row["no_result_rate"], 2),
                        n(row["p50_ms"], 2), n(row["p95_ms"], 2), n(row["cold_start_s"], 2), n(row["first_query_ms"], 1),
                        n(row["write_ms_per_turn"], 3), n(row["ingest_ms_per_turn"], 3),
                    ]
                    for row in overall
                ],
                right=range(1, len(metric_keys) + 9),
            )
        )
    categories = list(dict.fromkeys(row["category"] for row in rows))
    retrievers = list(dict.fromkeys(row["retriever"] for row in rows))
    per_category = sorted(
        (row for row in rows if row["category"] != ALL),
        key=lambda row: (categories.index(row["category"]), retrievers.index(row["retriever"])),
    )
    if per_category:
        parts.append(
            _table.render(
                ["category", "retriever", "questions", *metric_headers, "abst. empty", "p50 ms"],
                [
                    [row["category"], row["retriever"], row["questions"], *(n(row[key], 3) for key in metric_keys),
                     n(row["no_result_rate"], 2), n(row["p50_ms"], 2)]
                    for row in per_category
                ],
                right=range(2, len(metric_keys) + 5),
            )
        )
    if result["scale"]:
        parts.append(
            _table.render(
                ["scale", "turns", "queries", "write s", "1st query s", "index ms/turn", "p50 ms", "p95 ms", "target", "result"],
                [
                    [row["retriever"], n(row["turns"]), row["queries"], n(row["write_s"], 1), n(row["first_query_s"], 2),
                     n(row.get("index_ms_per_turn"), 2), n(row["p50_ms"], 2), n(row["p95_ms"], 2),
                     f"p50 <= {row['target']:g} ms" if row["target"] else "", _table.verdict(row)]
                    for row in result["scale"]
                ],
                right=range(1, 8),
            )
        )
    if result["targets"]:
        parts.append(
            _table.render(
                ["target", "retriever", "measured", "threshold", "result"],
                [
                    [row["name"], row["retriever"], n(row["value"], 3), f">= {row['target']:g}" if row["target"] is not None else "not judged",
                     _table.verdict(row)]
                    for row in result["targets"]
                ],
                right=(2,),
            )
        )
    if result.get("overlap"):
        parts.append(format_overlap_table(result["overlap"]))
    spec = result["spec"]
    parts.append(
        f"{spec['benchmark']}" + (f", first {spec['limit']} questions" if spec["limit"] else "") + f"; embedder {spec['embedder']} "
        "(vector, hybrid); sqlite cache; one memlab session per conversation, one memlab turn per user/assistant exchange. "
        "sR/tR@k: share of gold sessions / turns in the top k turns; hit@k: a gold turn in the top k; MRR: first gold turn, "
        "0 past the top max k; means over answerable questions. abst. empty: abstention questions with no result. "
        "p50/p95: SessionManager.search end to end, after one warm-up search per conversation; cold: open + first write + "
        "first search (model load: first embedding retriever of the process only); 1st query: median first search per "
        "conversation (index build; embeds every turn for vector/hybrid); ingest = writes + first searches, per turn; "
        "index ms/turn: the scale session's first search over its turns (the embedding of every turn for vector/hybrid)."
    )
    return "\n\n".join(parts)
