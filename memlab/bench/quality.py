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
stack's ``open()``. A name ``bm25+mmr`` runs the retriever with a session reranker
(``SessionConfig(retriever="bm25", reranker="mmr")``, :mod:`memlab.session.rerankers`).

Statistics (:mod:`memlab.stats`): every averaged metric carries its 95% percentile-bootstrap
interval over the questions (``resamples``, default 2000, seeded by ``bootstrap_seed``;
``--resamples 0``: none), and every pair of retrievers is compared on the questions both
were asked (:func:`~memlab.bench.quality_eval.paired_comparisons`: the difference, its paired
bootstrap interval, a two-sided p: exact McNemar for hit@k and the no-result rate, the paired
bootstrap otherwise), one line per pair saying which is better on session recall@5.

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

Answers (``--answers``, :mod:`memlab.bench.quality_answers`): per retriever, every question's
retrieved turns go to an answer model and its answer to a judge model (litellm; both
``memlab/offline`` by default), for answer accuracy per category with its interval beside
the session recall of the same retrieval; ``result["answers"]``.

Targets (issue "Retrieval quality", item 7): on the synthetic benchmark the best
retriever's session recall@5 >= 0.90 and >= 0.15 above ``keyword``'s; on a
10,000-turn session ``bm25`` p50 <= 2 ms and ``hybrid`` p50 <= 25 ms.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from memlab.bench import _table
from memlab.bench.conversations import Benchmark, load_locomo, load_longmemeval, overlap, synthetic
from memlab.bench.quality_answers import AnswersSpec, format_answers_table, run_answers
from memlab.bench.quality_eval import (
    ALL,
    BENCH_USER,
    COMPARISON_COLUMNS,
    DEFAULT_KS,
    Evaluation,
    check_ks,
    check_resamples,
    comparison_line,
    evaluate,
    evaluate_retriever,
    haystack_turns,
    metric_label,
    metric_names,
    paired_comparisons,
    quality_frame,
    summary_rows,
)
from memlab._cli_errors import UsageError
from memlab._stats import percentile
from memlab.exceptions import ValidationError
from memlab.frames import quality_interval_columns
from memlab.stats import DEFAULT_RESAMPLES, format_p

if TYPE_CHECKING:
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever

__all__ = [
    "DATASET_SPLITS",
    "OVERLAP_QUANTILES",
    "OVER_KEYWORD_TARGET",
    "RETRIEVERS",
    "SCALE_P50_TARGETS_MS",
    "SCALE_TARGET_TURNS",
    "SESSION_RECALL_TARGET",
    "QualityBenchSpec",
    "RetrieverUnderTest",
    "compare_retrievers",
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
    #: bootstrap resamples of every interval and paired comparison (0: none)
    resamples: int = DEFAULT_RESAMPLES
    #: the seed of those resamples
    bootstrap_seed: int = 0
    #: ``all``, ``dev`` or ``heldout`` (:data:`DATASET_SPLITS`)
    split: str = "all"
    #: answer-level evaluation of every retriever (``--answers``; :mod:`memlab.bench.quality_answers`); None: none
    answers: AnswersSpec | None = None


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


def _session(name: str) -> Any:
    """The session section of a ``--retrievers`` name: ``bm25``, or ``bm25+mmr`` (the retriever, then a reranker)."""
    from memlab.config import SessionConfig

    retriever, _, reranker = name.partition("+")
    return SessionConfig(retriever=retriever, reranker=reranker or "none")


def _check(spec: QualityBenchSpec) -> tuple[int, ...]:
    from memlab.config import SESSION_RERANKERS, SESSION_RETRIEVERS

    def known(name: str) -> bool:
        retriever, plus, reranker = name.partition("+")
        return retriever in SESSION_RETRIEVERS and (not plus or (reranker in SESSION_RERANKERS and reranker != "none"))

    if spec.split not in DATASET_SPLITS:
        raise UsageError(f"--split takes {', '.join(DATASET_SPLITS)}, got {spec.split!r}")
    unknown = [name for name in spec.retrievers if not known(name)]
    if unknown or not spec.retrievers:
        raise UsageError(
            f"--retrievers takes {', '.join(SESSION_RETRIEVERS)}, each optionally +{'/+'.join(sorted(set(SESSION_RERANKERS) - {'none'}))} "
            f"(a reranker); got {', '.join(map(repr, unknown)) or 'none'}"
        )
    try:
        check_resamples(spec.resamples)
    except ValidationError as exc:
        raise UsageError(f"--resamples: {exc}") from None
    try:
        return check_ks(spec.ks)
    except ValidationError as exc:
        raise UsageError(f"--k: {exc}") from None


async def _evaluate_retriever(benchmark: Benchmark, name: str, spec: QualityBenchSpec, root: Path, say: Callable[[str], None]) -> Evaluation:
    began = time.perf_counter()
    stack = _table.stack(root, spec.embedder, session=_session(name))
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
    exchanges, questions = scale_haystack(spec.scale)
    asked = (questions * (spec.scale_queries // len(questions) + 1))[: spec.scale_queries]
    user, session = BENCH_USER, "quality:scale"
    async with _table.stack(root, spec.embedder, session=_session(name)) as stack:
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


def _targets(rows: Sequence[dict[str, Any]], synthetic_run: bool, comparisons: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The two quality targets (judged on the synthetic benchmark only, with k = 5 measured), each with its interval.

    ``value_lo`` / ``value_hi``: the best retriever's bootstrap interval, and for the gain
    over ``keyword`` the paired comparison's interval (None without resamples).
    """
    key = f"session_recall_at_{TARGET_K}"
    lo_key, hi_key = quality_interval_columns(key)
    overall = {row["retriever"]: row for row in rows if row["category"] == ALL and row.get(key) is not None}
    if not overall:
        return []
    best = max(overall, key=lambda name: overall[name][key])
    found = [
        {
            "kind": "target",
            "name": f"best session recall@{TARGET_K}",
            "retriever": best,
            "value": overall[best][key],
            "value_lo": overall[best].get(lo_key),
            "value_hi": overall[best].get(hi_key),
            **_table.judge(overall[best][key], SESSION_RECALL_TARGET if synthetic_run else None),
        }
    ]
    if "keyword" in overall:
        gain = overall[best][key] - overall["keyword"][key]
        lo = hi = None
        for row in comparisons:
            if row["metric"] == key and {row["a"], row["b"]} == {best, "keyword"}:
                flip = row["a"] == "keyword"
                lo, hi = (0.0 - row["difference_hi"], 0.0 - row["difference_lo"]) if flip else (row["difference_lo"], row["difference_hi"])
        found.append(
            {
                "kind": "target",
                "name": f"best - keyword session recall@{TARGET_K}",
                "retriever": best,
                "value": gain,
                "value_lo": 0.0 if best == "keyword" else lo,
                "value_hi": 0.0 if best == "keyword" else hi,
                **_table.judge(gain, OVER_KEYWORD_TARGET if synthetic_run else None),
            }
        )
    return found


async def run_bench_quality(
    spec: QualityBenchSpec, progress: Callable[[str], None] | None = None, *, benchmark: Benchmark | None = None
) -> dict[str, Any]:
    """The whole run: ``{"rows", "questions", "comparisons", "scale", "targets", "spec"}`` (``benchmark`` overrides ``spec.dataset``).

    ``rows``: :func:`~memlab.bench.quality_eval.summary_rows` of every retriever, with
    bootstrap intervals (``spec.resamples``, ``spec.bootstrap_seed``); ``questions``: the
    per-question rows; ``comparisons``: every pair of retrievers on the same questions
    (:func:`~memlab.bench.quality_eval.paired_comparisons`); ``scale``: one row per retriever of the
    ``spec.scale``-turn latency run (empty with ``scale=0``); ``targets``: the quality
    targets (``passed`` None when not judged: not the synthetic benchmark); ``answers``, only
    with ``spec.answers``: :func:`~memlab.bench.quality_answers.run_answers` of every retriever.
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
            rows.extend(summary_rows(run, resamples=spec.resamples, seed=spec.bootstrap_seed))
            questions.extend(run.questions)
        if spec.scale:
            for name in spec.retrievers:
                scale.append(await _scale_row(name, spec, Path(root) / f"scale-{name}", say))
    answers = None
    if spec.answers is not None:
        answers = await run_answers(
            bench, spec.answers, spec.retrievers, embedder=spec.embedder, top_k=ks[-1], limit=spec.limit,
            resamples=spec.resamples, seed=spec.bootstrap_seed, progress=say,
        )
    synthetic_run = bench.name.startswith("synthetic")
    comparisons = paired_comparisons(questions, ks, resamples=spec.resamples, seed=spec.bootstrap_seed)
    targets = _targets(rows, synthetic_run, comparisons)
    details = {**dataclasses.asdict(spec), "ks": list(ks), "retrievers": list(spec.retrievers), "benchmark": bench.name, "turns": bench.turns}
    result = {
        "rows": rows, "questions": questions, "comparisons": comparisons, "scale": scale, "targets": targets, "spec": details,
        "overlap": [overlap_row(bench)],
    }
    return result if answers is None else {**result, "answers": answers}


#: what :func:`compare_retrievers` takes per name: a session retriever, or a (retriever, reranker) pair
RetrieverUnderTest = Union["SessionRetriever[Any]", "tuple[SessionRetriever[Any], SessionReranker | None]"]


async def compare_retrievers(
    benchmark: Benchmark,
    retrievers: Mapping[str, RetrieverUnderTest],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Retriever objects evaluated on ``benchmark``, each under its name, and compared pairwise on the same questions.

    The in-code counterpart of :func:`run_bench_quality` for what a ``--retrievers`` name
    cannot build: ``HybridSessionRetriever(embedder, **HYBRID_V1)`` beside today's
    ``hybrid``, a retriever of your own, a reranker with other settings. ``retrievers``
    maps a name (the ``retriever`` column) to a
    :class:`~memlab.session.retrievers.SessionRetriever` or a ``(retriever, reranker)``
    pair; each runs through :func:`~memlab.bench.quality_eval.evaluate_retriever` on a
    fresh in-memory cache (so the latencies are not the SQLite ones of
    :func:`run_bench_quality`). One embedder shared by the retrievers that embed, wrapped
    in :class:`~memlab.bench.quality_tune.MemoEmbedder`, embeds each text once.

    Returns ``{"rows", "questions", "comparisons", "overlap", "spec"}`` as
    :func:`run_bench_quality` does (no scale run, no targets): summary rows with bootstrap
    intervals (``resamples`` seeded by ``seed``), per-question rows, every pair of names
    (:func:`~memlab.bench.quality_eval.paired_comparisons`) and the lexical-overlap row;
    :func:`to_frame` reads it. An empty mapping, a blank name, a value that is neither, or
    a bad ``ks`` / ``limit`` / ``resamples`` raises :class:`~memlab.ValidationError`
    before anything runs.
    """
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever

    ks = check_ks(ks)
    check_resamples(resamples)
    if not retrievers:
        raise ValidationError("compare_retrievers needs at least one retriever")
    chosen: list[tuple[str, Any, Any]] = []
    for name, given in retrievers.items():
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"retriever names must be non-blank strings, got {name!r}")
        retriever, reranker = given if isinstance(given, tuple) and len(given) == 2 else (given, None)
        if not isinstance(retriever, SessionRetriever) or not (reranker is None or isinstance(reranker, SessionReranker)):
            raise ValidationError(f"{name}: expected a SessionRetriever or a (SessionRetriever, SessionReranker | None) pair, got {given!r}")
        chosen.append((name, retriever, reranker))
    say = progress or (lambda line: None)
    rows: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for name, retriever, reranker in chosen:
        say(f"{name}: {benchmark.name}")
        run = await evaluate_retriever(retriever, benchmark, ks=ks, limit=limit, reranker=reranker, label=name)
        rows.extend(summary_rows(run, resamples=resamples, seed=seed))
        questions.extend(run.questions)
    spec = {"ks": list(ks), "retrievers": [name for name, _, _ in chosen], "limit": limit, "resamples": resamples,
            "bootstrap_seed": seed, "benchmark": benchmark.name, "turns": benchmark.turns}
    return {
        "rows": rows, "questions": questions, "comparisons": paired_comparisons(questions, ks, resamples=resamples, seed=seed),
        "overlap": [overlap_row(benchmark)], "spec": spec,
    }


def to_frame(result: dict[str, Any], *, questions: bool = False, comparisons: bool = False) -> Any:
    """A :func:`run_bench_quality` (or :func:`compare_retrievers`) result as a typed DataFrame: the summary rows, or the per-question rows, or the paired comparisons."""
    if questions and comparisons:
        raise ValidationError("to_frame takes questions=True or comparisons=True, not both")
    if comparisons:
        import pandas as pd

        rows = result.get("comparisons", [])
        frame = pd.DataFrame.from_records([{name: row.get(name) for name in COMPARISON_COLUMNS} for row in rows], columns=list(COMPARISON_COLUMNS))
        return frame.astype(COMPARISON_COLUMNS)
    ks = result["spec"]["ks"]
    return quality_frame(result["questions"] if questions else result["rows"], ks, questions=questions)


def _with_interval(row: dict[str, Any], key: str, digits: int = 3) -> str:
    """``0.749 [0.71, 0.79]``: the value and its interval (bounds to 2 places: their Monte Carlo error is ~0.005); the value alone without one."""
    value = row.get(key)
    if value is None:
        return _table.number(None)
    lo, hi = (row.get(column) for column in quality_interval_columns(key))
    text = f"{value:.{digits}f}"
    return text if lo is None or hi is None else f"{text} [{lo:.2f}, {hi:.2f}]"


def _verdict(row: dict[str, Any]) -> str:
    """``hybrid+mmr better`` (the retriever whose mean is higher, at p < 0.05) or ``no difference``."""
    if row["verdict"] == "no difference":
        return "no difference"
    return f"{row['a'] if row['verdict'] == 'better' else row['b']} better"


def _headline_metric(ks: Sequence[int]) -> str:
    return f"session_recall_at_{TARGET_K if TARGET_K in ks else ks[0]}"


def format_quality_table(result: dict[str, Any]) -> str:
    """The quality (with intervals), per-category, cost, paired-comparison, scale and target tables as text."""
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
                ["retriever", "questions", *metric_headers, "abst. empty"],
                [
                    [row["retriever"], row["questions"], *(_with_interval(row, key) for key in metric_keys),
                     _with_interval(row, "no_result_rate", 2)]
                    for row in overall
                ],
                right=range(1, len(metric_keys) + 3),
            )
        )
        parts.append(
            _table.render(
                ["retriever", "p50 ms", "p95 ms", "cold s", "1st query ms", "write ms/turn", "ingest ms/turn"],
                [
                    [row["retriever"], n(row["p50_ms"], 2), n(row["p95_ms"], 2), n(row["cold_start_s"], 2), n(row["first_query_ms"], 1),
                     n(row["write_ms_per_turn"], 3), n(row["ingest_ms_per_turn"], 3)]
                    for row in overall
                ],
                right=range(1, 7),
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
                    [row["category"], row["retriever"], row["questions"], *(_with_interval(row, key) for key in metric_keys),
                     _with_interval(row, "no_result_rate", 2), n(row["p50_ms"], 2)]
                    for row in per_category
                ],
                right=range(2, len(metric_keys) + 5),
            )
        )
    comparisons = result.get("comparisons") or []
    if comparisons:
        parts.append(
            _table.render(
                ["paired (same questions)", "metric", "a", "b", "a - b [95% CI]", "p", "test", "n", "verdict"],
                [
                    [f"{row['a']} vs {row['b']}", metric_label(row["metric"]), f"{row['a_mean']:.3f}", f"{row['b_mean']:.3f}",
                     f"{row['difference']:+.3f} [{row['difference_lo']:+.2f}, {row['difference_hi']:+.2f}]",
                     format_p(row["p_value"]).removeprefix("p = ").removeprefix("p "), row["test"], row["n"], _verdict(row)]
                    for row in comparisons
                ],
                right=(2, 3, 4, 5, 7),
            )
        )
        headline = _headline_metric(ks)
        parts.append("\n".join(comparison_line(row) for row in comparisons if row["metric"] == headline))
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
                    [row["name"], row["retriever"], _with_interval(row, "value"),
                     f">= {row['target']:g}" if row["target"] is not None else "not judged", _table.verdict(row)]
                    for row in result["targets"]
                ],
                right=(2,),
            )
        )
    if result.get("overlap"):
        parts.append(format_overlap_table(result["overlap"]))
    spec = result["spec"]
    resamples = spec.get("resamples", 0)
    intervals = (
        f"[lo, hi]: 95% percentile-bootstrap interval over the row's questions ({resamples} resamples, seed "
        f"{spec.get('bootstrap_seed', 0)}); paired: a - b on the questions both were asked, its bootstrap interval, p two-sided "
        "(exact McNemar for hit@k and abst. empty, paired bootstrap otherwise), verdict at p < 0.05. "
        if resamples
        else ""
    )
    parts.append(
        f"{spec['benchmark']}" + (f", first {spec['limit']} questions" if spec["limit"] else "") + f"; embedder {spec['embedder']} "
        "(vector, hybrid); sqlite cache; one memlab session per conversation, one memlab turn per "
        + ("message. " if spec.get("turns") == "message" else "user/assistant exchange. ")
        + "sR/tR@k: share of gold sessions / turns in the top k turns; hit@k: a gold turn in the top k; MRR: first gold turn, "
        "0 past the top max k; means over answerable questions. abst. empty: abstention questions with no result. "
        + intervals
        + "p50/p95: SessionManager.search end to end, after one warm-up search per conversation; cold: open + first write + "
        "first search (model load: first embedding retriever of the process only); 1st query: median first search per "
        "conversation (index build; embeds every turn for vector/hybrid); ingest = writes + first searches, per turn; "
        "index ms/turn: the scale session's first search over its turns (the embedding of every turn for vector/hybrid)."
    )
    if result.get("answers"):
        parts.append(format_answers_table(result["answers"]))
    return "\n\n".join(parts)
