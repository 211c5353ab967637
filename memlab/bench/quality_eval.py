"""Session-retriever quality on a conversational benchmark: the evaluation itself.

Used by ``memlab bench quality`` (:mod:`memlab.bench.quality`, which builds one stack per
retriever and adds the targets, the 10,000-turn latency run and the table) and by
``stack.frames.quality`` (the stack's configured retriever: :func:`evaluate_retriever`,
which :mod:`memlab.bench` registers with :func:`memlab.frames.register_quality_evaluator`;
:mod:`memlab.frames` and :mod:`memlab.stack` import nothing from here). The frames'
columns (:func:`summary_columns`, :func:`question_columns`, :func:`quality_frame`) are
defined in :mod:`memlab.frames` and re-exported here.

The haystack
------------
Each :class:`~memlab.bench.conversations.Conversation` becomes ONE memlab session,
``quality:<conversation id>``, holding all its sessions' turns in chronological order,
written with ``SessionManager.add_qa``. By default (``Benchmark.turns == "exchange"``)
one memlab turn per **exchange**: a user turn and the assistant turn right after it
become one ``add_qa(question=user text, answer=assistant text)``, the unit memlab's
session lane stores and returns (and LongMemEval's retrieval "round"). A user turn not
followed by an assistant turn is a memlab turn with answer ``""``; an assistant turn not
preceded by a user turn is one with question ``""``. With ``turns == "message"`` every
message is a memlab turn of its own by that same rule (no pairing). Session dates are
not written (the cache stamps the write time), so temporal questions are retrieved on
their content alone. Every memlab ``qa_id``
maps to a :class:`HaystackTurn`: the benchmark session id and the benchmark turn ids
it holds.

Metrics
-------
Each question is asked once with ``search(user, question, session_id=...,
top_k=max(ks))``; over the top ``k`` memlab turns of that ranking:

* ``session_recall_at_k``: share of the gold sessions among the sessions of those turns;
* ``turn_recall_at_k``: share of the gold turns those turns hold;
* ``hit_at_k``: 1.0 when any gold turn is among them, else 0.0;
* ``mrr``: ``1 / rank`` of the first memlab turn holding a gold turn, 0.0 when none is
  in the top ``max(ks)``.

Turn metrics are None for a question with gold sessions but no gold turns (possible in
LongMemEval), session recall None for one without gold sessions. **Abstention**
questions (nothing to find) have no recall: they are left out of every recall / hit /
MRR average and reported as ``no_result_rate``, the share of them for which the
retriever returned nothing (no turn above its floor: a score > 0 for ``keyword`` /
``bm25``, the cosine floor ``session.min_similarity`` for ``vector`` / ``hybrid``).
Averages are means over the questions that have the metric.

Timing
------
* ``cold_start_s``: the manager's first write and search ever, on a one-turn session
  (cache open, imports, the embedder's model load for ``vector`` / ``hybrid``; the
  model loads once per process, so only the first embedding retriever of a process
  pays it). ``memlab bench quality`` adds the stack's ``open()``.
* ``write_ms_per_turn``: the ``add_qa`` calls of all conversations over the memlab
  turns written.
* ``first_query_ms``: per conversation, the first search of its session (an untimed
  warm-up of the steady-state numbers, the conversation's first question): it reads
  the session from the cache and builds the retriever's index, which for ``vector`` /
  ``hybrid`` embeds every turn. Reported as the median over conversations.
* ``ingest_ms_per_turn``: (all writes + all first searches) / memlab turns: what a turn
  costs until it can be ranked, embedding included.
* ``p50_ms`` / ``p95_ms``: steady state, every question's search timed after that
  warm-up (the cache's change-feed read included: ``SessionManager.search`` end to end).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memlab._stats import percentile
from memlab.bench._conversation_model import TurnUnit, check_turn_unit
from memlab.bench.conversations import Benchmark, Conversation, Question
from memlab.bench.errors import BenchmarkError
from memlab.exceptions import ValidationError
from memlab.frames import QUALITY_KS, quality_frame, quality_interval_columns
from memlab.frames import quality_ks as check_ks
from memlab.frames import quality_metric_names as metric_names
from memlab.frames import quality_question_columns as question_columns
from memlab.frames import quality_summary_columns as summary_columns
from memlab.stats import DEFAULT_RESAMPLES, bootstrap_interval, format_p, paired_difference

if TYPE_CHECKING:
    from memlab.session import SessionManager
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever

__all__ = [
    "ALL",
    "BENCH_USER",
    "COMPARISON_COLUMNS",
    "DEFAULT_KS",
    "Evaluation",
    "HaystackTurn",
    "check_ks",
    "check_resamples",
    "comparison_line",
    "comparison_test",
    "evaluate",
    "evaluate_retriever",
    "haystack_turns",
    "lane_name",
    "metric_label",
    "metric_names",
    "paired_comparisons",
    "question_metrics",
    "quality_frame",
    "question_columns",
    "scratch_manager",
    "summary_columns",
    "summary_rows",
]

#: the cut-offs reported by default
DEFAULT_KS = QUALITY_KS
#: the user id the haystacks are written under (not a UUID: no ``session_records`` row is written for it)
BENCH_USER = "memlab-bench-quality"
#: the category name of the overall summary row
ALL = "all"


@dataclass(frozen=True)
class HaystackTurn:
    """One memlab turn of a haystack: its text and the benchmark turns it holds."""

    question: str
    answer: str
    session_id: str
    turn_ids: tuple[str, ...]


def haystack_turns(conversation: Conversation, turns: TurnUnit = "exchange") -> list[HaystackTurn]:
    """The conversation's messages as memlab turns, chronological (module docstring).

    ``turns="exchange"``: a user message and the assistant message right after it paired;
    ``"message"``: every message a turn of its own (user text as the question, assistant
    text as the answer).
    """
    pair = check_turn_unit(turns) == "exchange"
    found: list[HaystackTurn] = []
    for session in conversation.sessions:
        messages = session.turns
        i = 0
        while i < len(messages):
            turn = messages[i]
            if turn.role == "user":
                reply = messages[i + 1] if pair and i + 1 < len(messages) and messages[i + 1].role == "assistant" else None
                if reply is not None:
                    found.append(HaystackTurn(turn.text, reply.text, session.session_id, (turn.turn_id, reply.turn_id)))
                    i += 2
                    continue
                found.append(HaystackTurn(turn.text, "", session.session_id, (turn.turn_id,)))
            else:
                found.append(HaystackTurn("", turn.text, session.session_id, (turn.turn_id,)))
            i += 1
    return found


def question_metrics(question: Question, ranked: Sequence[HaystackTurn], ks: Sequence[int]) -> dict[str, Any]:
    """Recall, hit and MRR of one question from its ranking (best first, at most ``max(ks)`` turns; module docstring)."""
    ks = check_ks(ks)
    ranked = list(ranked)[: ks[-1]]
    gold_sessions, gold_turns = set(question.evidence_session_ids), set(question.evidence_turn_ids)
    answerable = not question.abstention
    row: dict[str, Any] = {}
    for k in ks:
        top = ranked[:k]
        sessions = {turn.session_id for turn in top}
        turns = {turn_id for turn in top for turn_id in turn.turn_ids}
        row[f"session_recall_at_{k}"] = len(gold_sessions & sessions) / len(gold_sessions) if answerable and gold_sessions else None
        row[f"turn_recall_at_{k}"] = len(gold_turns & turns) / len(gold_turns) if answerable and gold_turns else None
        row[f"hit_at_{k}"] = float(bool(gold_turns & turns)) if answerable and gold_turns else None
    rank = next((place for place, turn in enumerate(ranked, start=1) if gold_turns.intersection(turn.turn_ids)), None)
    row["first_gold_rank"] = rank
    row["mrr"] = (1.0 / rank if rank else 0.0) if answerable and gold_turns else None
    return row


@dataclass
class Evaluation:
    """What :func:`evaluate` measured for one retriever over one benchmark (rows: :func:`summary_rows`)."""

    retriever: str
    dataset: str
    ks: tuple[int, ...]
    #: one dict per question (columns :func:`question_columns`)
    questions: list[dict[str, Any]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    conversations: int = 0
    #: memlab turns written
    turns: int = 0
    write_s: float = 0.0
    #: the first search of each conversation's session (index build), seconds
    first_query_s: list[float] = field(default_factory=list)
    cold_start_s: float = 0.0
    embedder: str | None = None

    def summary_rows(self, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
        """:func:`summary_rows` of this run."""
        return summary_rows(self, resamples=resamples, seed=seed)


def scratch_manager(retriever: "SessionRetriever[Any]", reranker: "SessionReranker | None" = None) -> "SessionManager":
    """A :class:`~memlab.session.SessionManager` over a fresh in-memory cache ranking with ``retriever`` (then ``reranker``).

    What ``stack.frames.quality`` runs on: the stack's retriever (and so its embedder)
    and reranker, none of its stores.
    """
    from memlab.cache import MemoryCache
    from memlab.session import SessionManager

    return SessionManager(MemoryCache(), retriever=retriever, reranker=reranker)


async def evaluate_retriever(
    retriever: "SessionRetriever[Any]",
    benchmark: Benchmark,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    reranker: "SessionReranker | None" = None,
    label: str | None = None,
) -> Evaluation:
    """``stack.frames.quality``'s evaluation: :func:`evaluate` with ``retriever`` (and ``reranker``) on a :func:`scratch_manager`.

    ``embedder`` is set to the retriever's embedder where it embeds (``vector``, or
    ``hybrid`` with its vector lane); None for ``keyword`` / ``bm25``. ``label``: as for
    :func:`evaluate`.
    """
    run = await evaluate(scratch_manager(retriever, reranker), benchmark, ks=ks, limit=limit, label=label)
    if getattr(retriever, "needs_embedder", False):
        vector = getattr(retriever, "semantic", retriever)
        run.embedder = getattr(getattr(vector, "embedder", None), "name", None)
    return run


def _selected(benchmark: Benchmark, limit: int | None) -> list[tuple[Conversation, list[Question]]]:
    """The conversations to run, each with its questions, the first ``limit`` questions of the benchmark at most."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValidationError(f"limit must be an integer >= 1 or None, got {limit!r}")
    left = len(benchmark) if limit is None else limit
    chosen = []
    for conversation in benchmark.conversations:
        if left <= 0:
            break
        questions = conversation.questions[:left]
        if questions:
            chosen.append((conversation, questions))
            left -= len(questions)
    return chosen


def lane_name(manager: "SessionManager") -> str:
    """What ranks ``manager``'s searches, as the ``retriever`` column names it: ``bm25``, or ``bm25+mmr`` with a reranker."""
    reranker = manager.reranker
    return manager.retriever.name if reranker is None else f"{manager.retriever.name}+{reranker.name}"


async def _write(manager: "SessionManager", user: str, session: str, question: str, answer: str) -> str:
    qa_id = await manager.add_qa(user, question, answer, session_id=session)
    if qa_id is None:
        raise BenchmarkError(f"the session cache did not store a turn of {session!r} (caching off or the cache unavailable)")
    return qa_id


async def evaluate(
    manager: "SessionManager",
    benchmark: Benchmark,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    user_id: str = BENCH_USER,
    progress: Callable[[str], None] | None = None,
    label: str | None = None,
) -> Evaluation:
    """Write each conversation's haystack through ``manager`` and ask its questions (see the module docstring).

    ``limit``: at most that many questions (the benchmark's first), and only the
    conversations they belong to. The manager's cache must be empty for ``user_id``'s
    ``quality:*`` sessions (a fresh stack or :func:`scratch_manager`). ``label``: the
    ``retriever`` column's value (default :func:`lane_name`), so that two settings of one
    retriever class (``hybrid`` and ``HYBRID_V1``) stay apart in the rows and
    :func:`paired_comparisons`; a blank one raises :class:`~memlab.ValidationError`.
    """
    ks = check_ks(ks)
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise ValidationError(f"label must be a non-blank string or None, got {label!r}")
    say = progress or (lambda line: None)
    run = Evaluation(retriever=label or lane_name(manager), dataset=benchmark.name, ks=ks, categories=benchmark.categories())
    selected = _selected(benchmark, limit)
    started = time.perf_counter()
    await _write(manager, user_id, "quality:cold-start", "memlab warm-up turn", "ok")
    await manager.search(user_id, "memlab warm-up turn", session_id="quality:cold-start", top_k=1)
    run.cold_start_s = time.perf_counter() - started
    for number, (conversation, questions) in enumerate(selected, start=1):
        session = f"quality:{conversation.conversation_id}"
        haystack: dict[str, HaystackTurn] = {}
        for turn in haystack_turns(conversation, benchmark.turns):
            began = time.perf_counter()
            qa_id = await _write(manager, user_id, session, turn.question, turn.answer)
            run.write_s += time.perf_counter() - began
            haystack[qa_id] = turn
        run.turns += len(haystack)
        run.conversations += 1
        began = time.perf_counter()
        await manager.search(user_id, questions[0].question, session_id=session, top_k=ks[-1])  # index build: untimed warm-up
        run.first_query_s.append(time.perf_counter() - began)
        for question in questions:
            began = time.perf_counter()
            hits = await manager.search(user_id, question.question, session_id=session, top_k=ks[-1])
            latency = time.perf_counter() - began
            ranked = [haystack[entry.qa_id] for entry, _ in hits if entry.qa_id in haystack]
            run.questions.append(
                {
                    "dataset": benchmark.name,
                    "retriever": run.retriever,
                    "conversation_id": conversation.conversation_id,
                    "question_id": question.question_id,
                    "category": question.category,
                    "abstention": question.abstention,
                    "gold_sessions": len(question.evidence_session_ids),
                    "gold_turns": len(question.evidence_turn_ids),
                    "paraphrase": question.paraphrase,
                    "overlap": conversation.lexical_overlap(question),
                    "returned": len(hits),
                    "no_result": not hits,
                    **question_metrics(question, ranked, ks),
                    "top_score": float(hits[0][1]) if hits else None,
                    "latency_ms": latency * 1000,
                }
            )
        if number % 10 == 0 or number == len(selected):
            say(f"{run.retriever}: {number}/{len(selected)} conversations, {len(run.questions)} questions")
    return run


def _mean(values: Sequence[Any]) -> float | None:
    present = [float(value) for value in values if value is not None]
    return sum(present) / len(present) if present else None


def check_resamples(resamples: int) -> int:
    """``resamples`` when an integer >= 0 (0: no intervals); :class:`ValidationError` otherwise."""
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 0:
        raise ValidationError(f"resamples must be an integer >= 0 (0: no intervals), got {resamples!r}")
    return resamples


def _with_interval(name: str, values: Sequence[Any], resamples: int, seed: int) -> dict[str, float | None]:
    """``{name: mean, name_lo: ..., name_hi: ...}`` of the values present (None when none; bounds None without resamples)."""
    lo, hi = quality_interval_columns(name)
    interval = bootstrap_interval(values, resamples=resamples, seed=seed) if resamples else None
    return {name: _mean(values), lo: interval.lo if interval else None, hi: interval.hi if interval else None}


def summary_rows(run: Evaluation, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """One row per category present (benchmark order), then the overall row (``category == "all"``).

    Columns :func:`summary_columns`: the averaged metrics of the category's answerable
    questions, ``no_result_rate`` of its abstention questions, each with the bounds of
    its 95% percentile-bootstrap interval over those questions
    (:func:`memlab.stats.bootstrap_interval` with ``resamples`` and ``seed``; ``resamples=0``
    leaves the bounds None), the p50 / p95 of its searches, and the retriever-level costs
    (the same on every row of the retriever).
    """
    check_resamples(resamples)
    first_ms = statistics.median(run.first_query_s) * 1000 if run.first_query_s else None
    costs = {
        "conversations": run.conversations,
        "turns": run.turns,
        "cold_start_s": run.cold_start_s,
        "first_query_ms": first_ms,
        "write_ms_per_turn": run.write_s * 1000 / run.turns if run.turns else None,
        "ingest_ms_per_turn": (run.write_s + sum(run.first_query_s)) * 1000 / run.turns if run.turns else None,
    }
    groups = [(category, [row for row in run.questions if row["category"] == category]) for category in run.categories]
    rows = []
    for category, members in [*((c, m) for c, m in groups if m), (ALL, run.questions)]:
        answerable = [row for row in members if not row["abstention"]]
        abstaining = [row for row in members if row["abstention"]]
        latencies = [row["latency_ms"] for row in members]
        rows.append(
            {
                "kind": "quality",
                "dataset": run.dataset,
                "retriever": run.retriever,
                "embedder": run.embedder,
                "category": category,
                "questions": len(members),
                "answerable": len(answerable),
                **{
                    column: value
                    for name in metric_names(run.ks)
                    for column, value in _with_interval(name, [row[name] for row in answerable], resamples, seed).items()
                },
                "abstention_questions": len(abstaining),
                **_with_interval("no_result_rate", [float(row["no_result"]) for row in abstaining], resamples, seed),
                "resamples": resamples,
                "p50_ms": percentile(latencies, 50),
                "p95_ms": percentile(latencies, 95),
                **costs,
            }
        )
    return rows


# -- paired comparisons ---------------------------------------------------------------------------

#: the columns of :func:`paired_comparisons`' rows
COMPARISON_COLUMNS: dict[str, str] = {
    "kind": "string", "dataset": "string", "category": "string", "a": "string", "b": "string", "metric": "string",
    "test": "string", "n": "Int64", "a_mean": "Float64", "b_mean": "Float64", "difference": "Float64",
    "difference_lo": "Float64", "difference_hi": "Float64", "p_value": "Float64", "a_only": "Int64", "b_only": "Int64",
    "resamples": "Int64", "verdict": "string",
}


def comparison_test(metric: str) -> Literal["bootstrap", "mcnemar"]:
    """The paired test of ``metric``: ``"mcnemar"`` for the 0/1 ones (``hit_at_<k>``, ``no_result_rate``), else ``"bootstrap"``."""
    return "mcnemar" if metric.startswith("hit_at_") or metric == "no_result_rate" else "bootstrap"


def metric_label(metric: str) -> str:
    """``session_recall_at_5`` -> ``session recall@5``, ``mrr`` -> ``MRR``, ``no_result_rate`` -> ``abstention no-result rate``."""
    if metric == "mrr":
        return "MRR"
    if metric == "no_result_rate":
        return "abstention no-result rate"
    stem, _, k = metric.rpartition("_at_")
    return f"{stem.replace('_', ' ')}@{k}" if stem else metric.replace("_", " ")


def paired_comparisons(
    questions: Sequence[dict[str, Any]], ks: Sequence[int], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> list[dict[str, Any]]:
    """Every pair of the retrievers in ``questions`` (per-question rows), compared on the questions both answered.

    Pairs in first-appearance order (``a`` the earlier); per pair, one row per averaged
    metric (the answerable questions) and ``no_result_rate`` (the abstention questions):
    :func:`memlab.stats.paired_difference` of ``a - b`` with :func:`comparison_test`'s
    test, ``resamples`` draws seeded by ``seed``, and a ``verdict``: ``"better"`` / ``"worse"``
    (``a`` against ``b``, p < 0.05) or ``"no difference"``. Columns
    :data:`COMPARISON_COLUMNS`; a metric no shared question has is left out. ``resamples=0``:
    no comparisons.
    """
    ks = check_ks(ks)
    if not check_resamples(resamples):
        return []
    by_retriever: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for row in questions:
        by_retriever.setdefault(row["retriever"], {})[(row["dataset"], row["question_id"])] = row
    found = []
    for a, b in itertools.combinations(by_retriever, 2):
        shared = [key for key in by_retriever[a] if key in by_retriever[b]]
        pairs = [(by_retriever[a][key], by_retriever[b][key]) for key in shared]
        answerable = [(x, y) for x, y in pairs if not x["abstention"]]
        columns = [(name, [(x[name], y[name]) for x, y in answerable]) for name in metric_names(ks)]
        columns.append(("no_result_rate", [(float(x["no_result"]), float(y["no_result"])) for x, y in pairs if x["abstention"]]))
        datasets = sorted({x["dataset"] for x, _ in pairs})
        for name, values in columns:
            test = comparison_test(name)
            result = paired_difference([v for v, _ in values], [w for _, w in values], test=test, resamples=resamples, seed=seed)
            if result is None:
                continue
            verdict = "no difference" if not result.significant() else ("better" if result.difference > 0 else "worse")
            found.append(
                {
                    "kind": "paired", "dataset": ", ".join(datasets), "category": ALL, "a": a, "b": b, "metric": name, "test": test,
                    "n": result.n, "a_mean": result.a_mean, "b_mean": result.b_mean, "difference": result.difference,
                    "difference_lo": result.lo, "difference_hi": result.hi, "p_value": result.p_value,
                    "a_only": result.a_only, "b_only": result.b_only, "resamples": resamples, "verdict": verdict,
                }
            )
    return found


def comparison_line(row: dict[str, Any]) -> str:
    """One :func:`paired_comparisons` row as a sentence, the retriever with the higher mean first.

    ``hybrid > bm25 on synthetic-seed0-600: session recall@5 +0.120 [+0.080, +0.160], p < 0.001 (paired bootstrap, 500 questions)``;
    ``hybrid ~ vector on ...: ... (...; no difference at 95%)`` when ``p >= 0.05``.
    """
    a, b, difference, lo, hi = row["a"], row["b"], row["difference"], row["difference_lo"], row["difference_hi"]
    if difference < 0:
        a, b, difference, lo, hi = b, a, 0.0 - difference, 0.0 - hi, 0.0 - lo
    sign = "~" if row["verdict"] == "no difference" else ">"
    test = "exact McNemar" if row["test"] == "mcnemar" else "paired bootstrap"
    questions = "abstention questions" if row["metric"] == "no_result_rate" else "questions"
    tail = "; no difference at 95%" if sign == "~" else ""
    return (
        f"{a} {sign} {b} on {row['dataset']}: {metric_label(row['metric'])} {difference:+.3f} [{lo:+.3f}, {hi:+.3f}], "
        f"{format_p(row['p_value'])} ({test}, {row['n']} {questions}{tail})"
    )
