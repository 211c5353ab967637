"""The session-retriever quality benchmark (``memlab bench quality`` / ``stack.frames.quality``) as a grid workload."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ValidationError
from memlab.experiments._checks import benchmark_size, optional_limit, session_reranker, session_retriever
from memlab.experiments._workload import Workload, WorkloadResult
from memlab.frames import quality_interval_columns
from memlab.stats import DEFAULT_RESAMPLES

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = ["QUALITY_CACHES", "ConversationalBenchmark"]

#: where :class:`ConversationalBenchmark` writes the haystacks
QUALITY_CACHES = ("scratch", "stack")
#: question-row columns left out of the turn rows (the same on every row of a run)
_DROPPED = ("dataset", "retriever")
#: the nullable dtypes of the turn frame for question_columns' numpy ones
_NULLABLE = {"bool": "boolean", "float64": "Float64"}


class ConversationalBenchmark(Workload):
    """Recall of the cell's session retriever on the seed's synthetic conversational benchmark.

    :func:`memlab.bench.conversations.synthetic` (``seed``, ``size`` questions: ``"tiny"``
    12, ``"small"`` 60, ``"default"`` 600, or an int; ``limit``: the first ``limit``
    only) evaluated by :func:`memlab.bench.quality_eval.evaluate` with the retriever
    ``session.retriever`` names (and ``embedding.model`` for ``vector`` / ``hybrid``),
    built by :func:`memlab.config.build_session_retriever` as the stack builds it, or the
    cell's ``session_retriever`` object (a cell's ``embedder`` object serves a built
    ``vector`` / ``hybrid`` one), reranked by ``session.reranker`` or the cell's
    ``session_reranker`` object.
    ``cache="scratch"`` (default) writes the haystacks to a fresh in-memory cache
    (:func:`~memlab.bench.quality_eval.scratch_manager`, what ``stack.frames.quality``
    does); ``cache="stack"`` writes them through the session manager of an open stack of
    the cell's config and strategy objects, so ``cache.*`` counts in the timings too.

    Metrics (names of :func:`~memlab.bench.quality_eval.summary_rows`' overall row; for
    each ``k`` of ``ks``):

    ==========================  ============  ====================================================
    metric                      unit          what
    ==========================  ============  ====================================================
    ``questions``               questions     questions asked
    ``answerable``              questions     questions with evidence (the recall metrics' base)
    ``session_recall_at_<k>``   ratio         mean share of gold sessions among the top k's sessions
    ``turn_recall_at_<k>``      ratio         mean share of gold turns the top k hold
    ``hit_at_<k>``              ratio         share of questions with a gold turn in the top k
    ``mrr``                     ratio         mean 1 / rank of the first gold turn (0 beyond max(ks))
    ``no_result_rate``          ratio         abstention questions answered with nothing (None: none asked)
    ``p50_ms`` / ``p95_ms``     ms            steady-state search latency
    ``cold_start_s``            s             the manager's first write + search ever
    ``first_query_ms``          ms            median first search per conversation (index build)
    ``write_ms_per_turn``       ms            haystack writes per memlab turn
    ``ingest_ms_per_turn``      ms            writes + first searches per memlab turn
    ``conversations``           conversations conversations run
    ``turns``                   turns         memlab turns written
    ``<metric>_lo`` / ``_hi``   ratio         the bounds of each recall / hit / mrr metric's and
                                              ``no_result_rate``'s 95% percentile-bootstrap interval
                                              over the questions (``resamples`` draws, seeded by the
                                              run's seed; absent with ``resamples=0``): the error
                                              bars of :func:`memlab.charts.comparison_figure`
    ``<metric>/<category>``     ratio         each recall / hit / mrr metric and ``no_result_rate``
                                              per benchmark category (None where the category has
                                              no question with the metric, e.g. recall of
                                              ``abstention``)
    ==========================  ============  ====================================================

    Per-turn rows: one per question (``turn`` = its index), the columns of
    :func:`~memlab.bench.quality_eval.question_columns` except ``dataset`` / ``retriever``.
    """

    name = "quality"

    def __init__(
        self, size: int | str = "small", limit: int | None = None, ks: Sequence[int] = (5, 10), cache: str = "scratch",
        resamples: int = DEFAULT_RESAMPLES,
    ) -> None:
        from memlab.bench.quality_eval import check_ks, check_resamples, question_columns

        self.size = benchmark_size(size)
        self.limit = optional_limit(limit)
        self.ks = check_ks(ks)
        self.resamples = check_resamples(resamples)
        if cache not in QUALITY_CACHES:
            raise ValidationError(f"cache must be one of {', '.join(QUALITY_CACHES)}, got {cache!r}")
        self.cache = cache
        columns = {name: dtype for name, dtype in question_columns(self.ks).items() if name not in _DROPPED}
        self.turn_columns = {"turn": "Int64", **{name: _NULLABLE.get(dtype, dtype) for name, dtype in columns.items()}}

    def fingerprint(self) -> dict[str, Any]:
        return {"size": self.size, "limit": self.limit, "ks": list(self.ks), "cache": self.cache, "resamples": self.resamples}

    def metric_names(self, categories: Sequence[str]) -> list[str]:
        """The metric names a run reports over ``categories`` (the benchmark's), in order."""
        from memlab.bench.quality_eval import metric_names

        averaged = [*metric_names(self.ks), "no_result_rate"]
        bounds = [bound for name in averaged for bound in quality_interval_columns(name)] if self.resamples else []
        overall = ["questions", "answerable", *averaged, *bounds, "p50_ms", "p95_ms", "cold_start_s", "first_query_ms",
                   "write_ms_per_turn", "ingest_ms_per_turn", "conversations", "turns"]
        return overall + [f"{name}/{category}" for category in categories for name in averaged]

    async def run(self, config: "StackConfig", seed: int, objects: Mapping[str, Any] | None = None) -> WorkloadResult:
        from memlab.bench.conversations import synthetic
        from memlab.bench.quality_eval import (
            ALL,
            evaluate,
            scratch_manager,
            summary_rows,
        )
        given = dict(objects or {})
        benchmark = synthetic(seed, self.size)
        if self.cache == "scratch":
            manager = scratch_manager(session_retriever(config, given), session_reranker(config, given))
            run = await evaluate(manager, benchmark, ks=self.ks, limit=self.limit)
        else:
            from memlab.stack import MemoryStack

            async with MemoryStack.from_config(config, **given) as stack:
                run = await evaluate(stack.session_manager, benchmark, ks=self.ks, limit=self.limit)
        rows = {row["category"]: row for row in summary_rows(run, resamples=self.resamples, seed=seed)}
        overall = rows[ALL]
        metrics: dict[str, float | int | None] = {}
        units: dict[str, str] = {}
        for name in self.metric_names(run.categories):
            metric, _, category = name.partition("/")
            row = rows.get(category) if category else overall
            metrics[name] = row.get(metric) if row is not None else None
            units[name] = _UNITS.get(metric, "ratio")
        turns = [{"turn": index, **{key: value for key, value in question.items() if key not in _DROPPED}}
                 for index, question in enumerate(run.questions)]
        return WorkloadResult(metrics, units, turns)


_UNITS = {
    "questions": "questions", "answerable": "questions", "p50_ms": "ms", "p95_ms": "ms", "cold_start_s": "s", "first_query_ms": "ms",
    "write_ms_per_turn": "ms", "ingest_ms_per_turn": "ms", "conversations": "conversations", "turns": "turns",
}
