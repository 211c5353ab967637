"""``memlab bench quality --tune``: a session retriever's parameters picked on dev splits, reported once on held-out ones.

The procedure (:func:`tune`), for a grid of ``hybrid`` settings (:data:`HYBRID_GRID`)
and the benchmarks given (default: :func:`~memlab.bench.conversations.synthetic` and
:func:`~memlab.bench.conversations.overlap`, seed 0):

1. Every benchmark is split by conversation (:meth:`~memlab.bench.conversations.Benchmark.split`).
2. On each **dev** split, :func:`~memlab.bench.quality_eval.evaluate` runs the baseline
   (:data:`~memlab.session.retrievers.HYBRID_V1`, today's ``hybrid`` before this
   procedure) and every grid entry on a scratch in-memory cache.
3. **The rule** (:data:`RULE`): the gain of an entry on a benchmark is its overall
   session recall@5 minus the baseline's there; the pick maximises the **minimum gain
   over the benchmarks** (the entry that helps where it helps least), ties (within
   1e-9) broken by the larger mean gain, then by grid order (cheaper entries first:
   one vector per turn before two, the candidates of the lanes before every turn).
4. The **held-out** splits are evaluated once, for ``keyword``, ``bm25``, ``vector``,
   the baseline and the pick: every metric's mean with a percentile-bootstrap 95 %
   interval over questions (:func:`memlab.stats.bootstrap_interval`), and the pick minus
   the baseline paired on the same questions, with its interval.

Embeddings: one :class:`MemoEmbedder` wraps the embedder for the whole run, so each
distinct text (a turn side, a question) is embedded once and every grid entry reuses
the vectors; the grid costs the retrievers' own work, not 32 embedding passes.

The shipped defaults of ``hybrid`` are this procedure's output (the table is in
:mod:`memlab.session.retrievers._hybrid`'s docstring); a test runs it on a tiny size.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memlab.stats import Interval, bootstrap_interval, paired_difference
from memlab.bench import _table
from memlab.bench.conversations import Benchmark, overlap, synthetic
from memlab.bench.quality_eval import ALL, DEFAULT_KS, Evaluation, check_ks, evaluate, metric_names, scratch_manager, summary_rows
from memlab.embeddings import Embedder, embedder_from_model
from memlab.exceptions import ValidationError

__all__ = [
    "HYBRID_GRID",
    "HELDOUT_RETRIEVERS",
    "RULE",
    "TUNE_METRIC",
    "MemoEmbedder",
    "TuneResult",
    "default_benchmarks",
    "format_tune_table",
    "hybrid_label",
    "tune",
]

#: the metric the rule compares
TUNE_METRIC = "session_recall_at_5"
#: the rule, as the table prints it
RULE = (
    "pick = argmax over the grid of min over benchmarks of (dev session recall@5 - baseline's); "
    "ties: larger mean gain, then grid order"
)
#: the retrievers evaluated on the held-out splits beside the baseline and the pick
HELDOUT_RETRIEVERS = ("keyword", "bm25", "vector")


def _grid() -> tuple[dict[str, Any], ...]:
    entries: list[dict[str, Any]] = []
    for vectors in ("turn", "user+turn"):
        for candidates in ("lanes", "all"):
            for alpha in (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5):
                entries.append({"fusion": "blend", "alpha": alpha, "vectors": vectors, "candidates": candidates})
            entries.append({"fusion": "rrf", "vectors": vectors, "candidates": candidates})
    return tuple(entries)


#: the ``HybridSessionRetriever`` settings tried: 2 vector layouts x 2 candidate rules x (7 blend weights + RRF), cheaper first
HYBRID_GRID: tuple[dict[str, Any], ...] = _grid()


def hybrid_label(params: Mapping[str, Any]) -> str:
    """A grid entry as a short label: ``blend a=0.3 user+turn all`` / ``rrf turn lanes``."""
    head = f"blend a={params.get('alpha', 0.2):g}" if params.get("fusion", "blend") == "blend" else "rrf"
    return f"{head} {params.get('vectors', 'turn')} {params.get('candidates', 'lanes')}"


class MemoEmbedder(Embedder):
    """Wraps an embedder and remembers every text's vector, so a text is embedded once however often it is asked for.

    Same ``name`` and ``dim`` as the wrapped one. For benchmarks that evaluate many
    settings over the same turns; the memory grows with the distinct texts.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_tokens = inner.max_tokens
        self._memo: dict[str, Any] = {}
        #: texts embedded by the wrapped embedder, and the seconds it took
        self.embedded = 0
        self.embed_s = 0.0

    async def embed(self, texts: Sequence[str]) -> Any:
        missing = [text for text in dict.fromkeys(texts) if text not in self._memo]
        if missing:
            began = time.perf_counter()
            vectors = await self.inner.embed(missing)
            self.embed_s += time.perf_counter() - began
            self.embedded += len(missing)
            self._memo.update(zip(missing, vectors))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[text] for text in texts])

    async def _embed_batch(self, texts: list[str]) -> Any:  # pragma: no cover - embed() is overridden
        return await self.inner.embed(texts)


def default_benchmarks(seed: int = 0, size: int | str = "default") -> list[Benchmark]:
    """The benchmarks ``--tune`` uses without ``--dataset``: ``synthetic`` and ``overlap`` of ``seed`` and ``size``."""
    return [synthetic(seed, size), overlap(seed, size)]


@dataclass
class TuneResult:
    """What :func:`tune` found: the dev table, the pick, the held-out table (rows are dicts; :func:`format_tune_table` prints them)."""

    metric: str
    rule: str
    baseline: dict[str, Any]
    grid: list[dict[str, Any]]
    #: one row per grid entry: ``label``, ``params``, per benchmark ``dev`` value and ``gain``, ``min_gain``, ``mean_gain``
    dev: list[dict[str, Any]] = field(default_factory=list)
    #: the baseline's dev value per benchmark
    baseline_dev: dict[str, float | None] = field(default_factory=dict)
    pick: dict[str, Any] = field(default_factory=dict)
    #: one row per (benchmark, retriever) on the held-out splits: metric -> (mean, low, high)
    heldout: list[dict[str, Any]] = field(default_factory=list)
    #: one row per benchmark: the pick minus the baseline, paired on the held-out questions, per metric (mean, low, high)
    paired: list[dict[str, Any]] = field(default_factory=list)
    #: the benchmarks: name, dev / held-out questions
    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    #: texts the wrapped embedder embedded, its seconds, and the whole run's seconds
    embedded_texts: int = 0
    embed_s: float = 0.0
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (intervals as ``[mean, low, high]`` lists)."""
        import dataclasses

        return dataclasses.asdict(self)


def _overall(run: Evaluation, metric: str) -> float | None:
    row = next(row for row in summary_rows(run) if row["category"] == ALL)
    value = row.get(metric)
    return float(value) if value is not None else None


def _values(run: Evaluation, metric: str) -> dict[str, float]:
    return {row["question_id"]: float(row[metric]) for row in run.questions if not row["abstention"] and row.get(metric) is not None}


def _retriever(name: str, embedder: Embedder, params: Mapping[str, Any] | None = None) -> Any:
    from memlab.session.retrievers import BM25SessionRetriever, HybridSessionRetriever, KeywordSessionRetriever, VectorSessionRetriever

    if name == "hybrid":
        return HybridSessionRetriever(embedder, **dict(params or {}))
    if name == "vector":
        return VectorSessionRetriever(embedder)
    return {"keyword": KeywordSessionRetriever, "bm25": BM25SessionRetriever}[name]()


async def tune(
    benchmarks: Sequence[Benchmark] | None = None,
    *,
    grid: Sequence[Mapping[str, Any]] = HYBRID_GRID,
    baseline: Mapping[str, Any] | None = None,
    embedder: Embedder | str = "memlab/minilm",
    ks: Sequence[int] = DEFAULT_KS,
    resamples: int = 2000,
    progress: Callable[[str], None] | None = None,
) -> TuneResult:
    """Pick ``hybrid``'s settings from ``grid`` on the dev splits of ``benchmarks`` by :data:`RULE`; evaluate once on the held-out splits.

    ``benchmarks``: whole benchmarks (split here; default :func:`default_benchmarks`);
    ``baseline``: the settings the gains are measured against (default
    :data:`~memlab.session.retrievers.HYBRID_V1`); ``embedder``: an embedder or an
    ``EMBEDDING_MODEL`` string, wrapped in a :class:`MemoEmbedder`; ``resamples``: of
    the bootstrap intervals. A benchmark whose dev or held-out split has no question
    raises :class:`memlab.ValidationError`.
    """
    from memlab.session.retrievers import HYBRID_V1

    began = time.perf_counter()
    ks = check_ks(ks)
    if TUNE_METRIC not in metric_names(ks):
        raise ValidationError(f"the tuning rule needs k = 5 among ks, got {list(ks)}")
    say = progress or (lambda line: None)
    benches = list(benchmarks) if benchmarks is not None else default_benchmarks()
    if not benches or not grid:
        raise ValidationError("tune needs at least one benchmark and one grid entry")
    base = dict(baseline if baseline is not None else HYBRID_V1)
    memo = MemoEmbedder(embedder_from_model(embedder) if isinstance(embedder, str) else embedder)
    parts = []
    for bench in benches:
        dev, heldout = bench.split("dev"), bench.split("heldout")
        if not len(dev) or not len(heldout):
            raise ValidationError(f"{bench.name}: its dev ({len(dev)}) and held-out ({len(heldout)}) splits both need questions")
        parts.append((bench, dev, heldout))
    result = TuneResult(TUNE_METRIC, RULE, base, [dict(entry) for entry in grid])
    result.benchmarks = [{"name": bench.name, "dev_questions": len(dev), "heldout_questions": len(held)} for bench, dev, held in parts]

    async def run(name: str, bench: Benchmark, params: Mapping[str, Any] | None = None) -> Evaluation:
        return await evaluate(scratch_manager(_retriever(name, memo, params)), bench, ks=ks)

    for bench, dev, _ in parts:
        result.baseline_dev[bench.name] = _overall(await run("hybrid", dev, base), TUNE_METRIC)
    for number, entry in enumerate(grid, start=1):
        row: dict[str, Any] = {"label": hybrid_label(entry), "params": dict(entry), "dev": {}, "gain": {}}
        for bench, dev, _ in parts:
            value = _overall(await run("hybrid", dev, entry), TUNE_METRIC)
            reference = result.baseline_dev[bench.name]
            row["dev"][bench.name] = value
            row["gain"][bench.name] = value - reference if value is not None and reference is not None else None
        gains = [gain for gain in row["gain"].values() if gain is not None]
        row["min_gain"] = min(gains) if len(gains) == len(parts) else None
        row["mean_gain"] = sum(gains) / len(gains) if len(gains) == len(parts) else None
        result.dev.append(row)
        say(f"tune: {number}/{len(grid)} {row['label']}: min gain {_table.number(row['min_gain'], 3)}")
    ranked = [row for row in result.dev if row["min_gain"] is not None]
    if not ranked:
        raise ValidationError(f"no grid entry has {TUNE_METRIC} on every dev split")
    order = {id(row): index for index, row in enumerate(result.dev)}
    best = max(ranked, key=lambda row: (round(row["min_gain"], 9), round(row["mean_gain"], 9), -order[id(row)]))
    best["picked"] = True
    result.pick = dict(best["params"])
    metrics = metric_names(ks)
    for bench, _, heldout in parts:
        say(f"tune: held-out {heldout.name}")
        runs = [(name, name, await run(name, heldout)) for name in HELDOUT_RETRIEVERS]
        runs.append(("hybrid v1 (baseline)", hybrid_label(base), await run("hybrid", heldout, base)))
        runs.append(("hybrid (pick)", hybrid_label(result.pick), await run("hybrid", heldout, result.pick)))
        for label, settings, evaluation in runs:
            row = {"dataset": heldout.name, "retriever": label, "settings": settings}
            for name in metrics:
                values = _values(evaluation, name)
                row["questions"] = max(row.get("questions", 0), len(values))
                row[name] = _triple(bootstrap_interval(list(values.values()), resamples=resamples))
            result.heldout.append(row)
        baseline_run, pick_run = runs[-2][2], runs[-1][2]
        paired: dict[str, Any] = {"dataset": heldout.name}
        for name in metrics:
            ours, theirs = _values(pick_run, name), _values(baseline_run, name)
            common = [qid for qid in ours if qid in theirs]
            found = paired_difference([ours[qid] for qid in common], [theirs[qid] for qid in common], resamples=resamples)
            paired[name] = None if found is None else (found.difference, found.lo, found.hi)
            paired["questions"] = len(common)
        result.paired.append(paired)
    result.embedded_texts, result.embed_s = memo.embedded, memo.embed_s
    result.elapsed_s = time.perf_counter() - began
    return result


def _triple(found: Interval | None) -> tuple[float, float, float] | None:
    """``(mean, lo, hi)`` of a bootstrap interval, as the tables store it."""
    return None if found is None else (found.estimate, found.lo, found.hi)


def _interval(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    mean, low, high = value
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _signed(value: Any) -> str:
    if value is None:
        return "—"
    mean, low, high = value
    verdict = "better" if low > 0 else "worse" if high < 0 else "same"
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}] {verdict}"


def format_tune_table(result: TuneResult | Mapping[str, Any]) -> str:
    """The dev table (every grid entry, the pick marked ``*``), the held-out table with intervals, the paired differences."""
    data = result.to_dict() if isinstance(result, TuneResult) else dict(result)
    n = _table.number
    names = [bench["name"] for bench in data["benchmarks"]]
    short = [name.split("-seed")[0] for name in names]
    parts = [
        _table.render(
            ["dev: hybrid settings", *(f"{s} sR@5" for s in short), *(f"{s} gain" for s in short), "min gain", "mean gain", ""],
            [["baseline " + hybrid_label(data["baseline"]), *(n(data["baseline_dev"][name], 3) for name in names), *("" for _ in names), "", "", ""]]
            + [
                [row["label"], *(n(row["dev"][name], 3) for name in names), *(f"{row['gain'][name]:+.3f}" if row["gain"][name] is not None else "—"
                                                                                for name in names),
                 f"{row['min_gain']:+.3f}" if row["min_gain"] is not None else "—", f"{row['mean_gain']:+.3f}" if row["mean_gain"] is not None else "—",
                 "*" if row.get("picked") else ""]
                for row in data["dev"]
            ],
            right=range(1, 2 * len(names) + 3),
        ),
        f"rule: {data['rule']}; pick: {hybrid_label(data['pick'])}",
    ]
    metrics = [key for key in data["heldout"][0] if key.startswith(("session_recall", "turn_recall", "hit_at", "mrr"))] if data["heldout"] else []
    headers = {key: key.replace("session_recall_at_", "sR@").replace("turn_recall_at_", "tR@").replace("hit_at_", "hit@").replace("mrr", "MRR")
               for key in metrics}
    shown = [key for key in metrics if key in ("session_recall_at_5", "session_recall_at_10", "turn_recall_at_5", "hit_at_5", "mrr")] or metrics
    parts.append(
        _table.render(
            ["held-out", "retriever", "settings", "questions", *(headers[key] + " [95% CI]" for key in shown)],
            [[row["dataset"], row["retriever"], row["settings"], row["questions"], *(_interval(row[key]) for key in shown)] for row in data["heldout"]],
            right=(3,),
        )
    )
    parts.append(
        _table.render(
            ["pick - baseline (paired)", "questions", *(headers[key] + " [95% CI]" for key in shown)],
            [[row["dataset"], row["questions"], *(_signed(row[key]) for key in shown)] for row in data["paired"]],
            right=(1,),
        )
    )
    parts.append(
        f"dev and held-out: conversations split by a hash of their id (Benchmark.split); every run on a scratch in-memory "
        f"cache; intervals: percentile bootstrap over answerable questions; paired: the same questions, pick minus baseline "
        f"('better' / 'worse' when the interval excludes 0). {data['embedded_texts']:,} distinct texts embedded once "
        f"({data['embed_s']:.0f} s) and shared by every setting; the run took {data['elapsed_s']:.0f} s."
    )
    return "\n\n".join(parts)
