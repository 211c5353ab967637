"""Answer-level evaluation: retrieve, answer, judge; accuracy per category beside retrieval recall.

LongMemEval and LoCoMo report answer accuracy judged by an LLM; this runs that protocol on
any :class:`~memlab.bench.conversations.Benchmark` with a memlab session retriever::

    from memlab.bench.conversations import synthetic
    from memlab.bench.quality_answers import evaluate_answers

    run = await evaluate_answers(synthetic(), retriever="hybrid", answer_model="gpt-4o-mini", judge_model="gpt-4o")
    run.summary_rows()          # per category, then "all": accuracy [95% CI], session recall@k, failures, tokens, cost
    run.to_frame(questions=True)

``memlab bench quality --answers [--answer-model M] [--judge-model M] [--answers-limit N]``
runs it for every ``--retrievers`` name beside the retrieval tables (:func:`run_answers`,
:func:`format_answers_table`).

Per question
------------
1. **Retrieve**: each conversation is written as one memlab session on a scratch in-memory
   cache (the haystack of :mod:`memlab.bench.quality_eval`: one memlab turn per exchange or
   per message, as the benchmark's ``turns`` says) and the question searched once with
   ``top_k``; ``session_recall`` / ``turn_recall`` / ``hit`` are the retrieval metrics of
   :func:`~memlab.bench.quality_eval.question_metrics` at that ``k`` (None for abstention
   questions), ``retrieved_ids`` the benchmark turn ids of the returned memlab turns, best
   first.
2. **Answer**: one call of the answer model with the retrieved turns as context (the prompt:
   :mod:`memlab.bench._answer_judge`, :data:`~memlab.bench._answer_judge.ANSWER_INSTRUCTIONS`).
3. **Judge**: one call of the judge model with the question, the gold answer and the answer
   (:data:`~memlab.bench._answer_judge.JUDGE_INSTRUCTIONS`; an abstention question gets
   :data:`~memlab.bench._answer_judge.ABSTENTION_JUDGE_INSTRUCTIONS`, which says yes when the
   model declines). A judge output that is neither the JSON verdict nor readable by
   :func:`~memlab.bench._answer_judge.parse_verdict`, or a judge call that fails
   (:class:`~memlab.llm.LLMError`), is a **judge failure**: ``verdict`` and ``correct`` None,
   ``judge_error`` says why. A failed answer call is an **answer failure** (no judge call).
   Failures are left out of the accuracy and counted beside it; nothing raises mid-run.

Both calls go through :class:`~memlab.llm.LLMClient` (litellm): each question's tokens and
cost are what the calls reported to a :func:`memlab.llm.metering` meter (cost from
litellm's cost map; None when the model is unpriced, as ``memlab/offline`` is), and the
calls are reported on to any meter the caller has open.

Accuracy
--------
``accuracy`` = judged correct / judged, per category and overall, with its 95%
percentile-bootstrap interval over the judged questions (:func:`memlab.stats.bootstrap_interval`,
``resamples`` seeded by ``seed``); ``session_recall`` and ``hit`` of the same run beside it,
with theirs. :func:`answer_comparisons` pairs retrievers on the questions both had judged
(exact McNemar on correct / not).

Offline
-------
With ``memlab/offline`` (the default of both models) the answerer echoes every retrieved
turn and the judge says yes when the gold answer's normalised words occur in the answer, or,
for abstention, when the answer declines (which it does only when nothing was retrieved);
see :mod:`memlab.bench._answer_judge`. So offline accuracy is the share of questions whose
gold answer text is among the retrieved turns: it tracks the retriever and tests the
pipeline, and says nothing about a model. Gold answers that are not spans of the conversation (totals, day
counts, recommendations) are never matched offline.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memlab.bench._answer_judge import (
    ABSTENTION_JUDGE_INSTRUCTIONS,
    ANSWER_INSTRUCTIONS,
    DECLINE_PHRASES,
    JUDGE_INSTRUCTIONS,
    AnswerJudgement,
    GeneratedAnswer,
    answer_messages,
    context_line,
    judge_messages,
    normalise_answer,
    offline_answer,
    offline_judgement,
    parse_verdict,
    register_offline_handlers,
)
from memlab.bench._conversation_model import parse_iso
from memlab.bench.conversations import Benchmark, Conversation, Question
from memlab.bench import _table
from memlab.bench.quality_eval import (
    ALL,
    BENCH_USER,
    COMPARISON_COLUMNS,
    _selected,
    _with_interval,
    _write,
    check_resamples,
    comparison_line,
    haystack_turns,
    lane_name,
    question_metrics,
    scratch_manager,
)
from memlab.exceptions import ValidationError
from memlab.llm import OFFLINE_MODEL, CallUsage, LLMClient, LLMError, StructuredOutputError, metering, record_usage
from memlab.stats import DEFAULT_RESAMPLES, paired_difference

if TYPE_CHECKING:
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever

__all__ = [
    "ABSTENTION_JUDGE_INSTRUCTIONS",
    "ANSWER_INSTRUCTIONS",
    "ANSWER_QUESTION_COLUMNS",
    "ANSWER_SUMMARY_COLUMNS",
    "DECLINE_PHRASES",
    "DEFAULT_TOP_K",
    "JUDGE_INSTRUCTIONS",
    "AnswerEvaluation",
    "AnswerJudgement",
    "AnswersSpec",
    "GeneratedAnswer",
    "answer_comparisons",
    "answer_summary_rows",
    "answers_failure",
    "check_model",
    "evaluate_answers",
    "format_answers_table",
    "normalise_answer",
    "offline_answer",
    "offline_judgement",
    "parse_verdict",
    "run_answers",
    "to_frame",
]

#: retrieved memlab turns given to the answer model by default
DEFAULT_TOP_K = 10
#: answer + judge calls in flight at once by default
DEFAULT_CONCURRENCY = 4

#: the columns of the per-question rows and their pandas dtypes
ANSWER_QUESTION_COLUMNS: dict[str, str] = {
    "dataset": "string", "retriever": "string", "answer_model": "string", "judge_model": "string",
    "conversation_id": "string", "question_id": "string", "category": "string", "abstention": "bool", "top_k": "Int64",
    "retrieved_ids": "object", "returned": "Int64", "session_recall": "Float64", "turn_recall": "Float64", "hit": "Float64",
    "first_gold_rank": "Int64", "gold_answer": "string", "answer": "string", "answer_error": "string",
    "verdict": "string", "correct": "boolean", "judge_failure": "bool", "judge_error": "string", "judge_reason": "string",
    "answer_tokens_in": "Int64", "answer_tokens_out": "Int64", "judge_tokens_in": "Int64", "judge_tokens_out": "Int64",
    "tokens": "Int64", "answer_cost_usd": "Float64", "judge_cost_usd": "Float64", "cost_usd": "Float64",
}

#: the columns of the summary rows (a category's, then ``"all"``) and their pandas dtypes
ANSWER_SUMMARY_COLUMNS: dict[str, str] = {
    "kind": "string", "dataset": "string", "retriever": "string", "answer_model": "string", "judge_model": "string",
    "top_k": "Int64", "category": "string", "questions": "Int64", "judged": "Int64", "correct": "Int64",
    "accuracy": "Float64", "accuracy_lo": "Float64", "accuracy_hi": "Float64",
    "answer_failures": "Int64", "judge_failures": "Int64", "answerable": "Int64",
    "session_recall": "Float64", "session_recall_lo": "Float64", "session_recall_hi": "Float64",
    "hit": "Float64", "hit_lo": "Float64", "hit_hi": "Float64",
    "tokens_in": "Int64", "tokens_out": "Int64", "cost_usd": "Float64", "resamples": "Int64",
}


def check_model(model: str, name: str = "model") -> str:
    """``model`` when it is a litellm model string litellm can route (``memlab/offline`` the only ``memlab/`` one).

    Raises :class:`~memlab.ValidationError` naming ``name`` and the value otherwise: not a
    string, empty, containing whitespace, another ``memlab/`` name, or a name litellm
    cannot map to a provider (``"nonsense"``: write it ``provider/model``). Makes no call.
    """
    if not isinstance(model, str) or not model.strip() or any(ch.isspace() for ch in model.strip()):
        raise ValidationError(f"{name} must be a litellm model string without spaces (e.g. gpt-4o-mini, ollama/llama3.1), got {model!r}")
    model = model.strip()
    if model.lower().startswith("memlab/"):
        if model != OFFLINE_MODEL:
            raise ValidationError(f"{name}: memlab serves one model, {OFFLINE_MODEL}; got {model!r}")
        return model
    from memlab.llm import load_litellm

    try:
        load_litellm().get_llm_provider(model)
    except Exception:  # litellm raises its BadRequestError for a name it cannot route
        raise ValidationError(f"{name}: litellm cannot tell the provider of {model!r}; write it provider/model (e.g. openai/gpt-4o)") from None
    return model


def _client(model: str | LLMClient, name: str) -> LLMClient:
    if isinstance(model, LLMClient):
        return model
    return LLMClient(check_model(model, name))


def _positive(value: Any, name: str, *, none: bool = False) -> None:
    if none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be an integer >= 1{' or None' if none else ''}, got {value!r}")


def _retriever(retriever: "str | SessionRetriever[Any]", reranker: "SessionReranker | None", embedder: str) -> Any:
    """A scratch :class:`~memlab.session.SessionManager` ranking with ``retriever`` (a name ``bm25`` / ``bm25+mmr``, or an instance)."""
    if not isinstance(retriever, str):
        return scratch_manager(retriever, reranker)
    from memlab.config import EmbeddingConfig, SessionConfig, StackConfig, build_session_reranker, build_session_retriever

    name, plus, rerank = retriever.partition("+")
    if plus and reranker is not None:
        raise ValidationError(f"retriever {retriever!r} names a reranker; pass reranker=None with it")
    config = StackConfig(session=SessionConfig(retriever=name, reranker=rerank or "none"), embedding=EmbeddingConfig(model=embedder))
    return scratch_manager(build_session_retriever(config), reranker if reranker is not None else build_session_reranker(config))


def _shown_date(date: str) -> str:
    """A session date for the prompt: ``2023-05-20 14:30`` (``2023-05-20`` at midnight), else the source's text."""
    moment = parse_iso(date)
    if moment is None:
        return date
    return moment.strftime("%Y-%m-%d") if moment.time() == datetime.min.time() else moment.strftime("%Y-%m-%d %H:%M")


@dataclass
class _Job:
    conversation: Conversation
    question: Question
    lines: list[str]
    row: dict[str, Any]


@dataclass
class AnswerEvaluation:
    """What :func:`evaluate_answers` measured: one row per question (columns :data:`ANSWER_QUESTION_COLUMNS`)."""

    retriever: str
    dataset: str
    answer_model: str
    judge_model: str
    top_k: int
    questions: list[dict[str, Any]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)

    def summary_rows(self, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
        """:func:`answer_summary_rows` of this run."""
        return answer_summary_rows(self.questions, self.categories, resamples=resamples, seed=seed)

    def to_frame(self, *, questions: bool = False, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> Any:
        """The summary rows (or, with ``questions=True``, the per-question rows) as a typed DataFrame."""
        return _frame(self.questions if questions else self.summary_rows(resamples=resamples, seed=seed), questions=questions)


async def evaluate_answers(
    benchmark: Benchmark,
    *,
    retriever: "str | SessionRetriever[Any]" = "keyword",
    reranker: "SessionReranker | None" = None,
    answer_model: str | LLMClient = OFFLINE_MODEL,
    judge_model: str | LLMClient = OFFLINE_MODEL,
    top_k: int = DEFAULT_TOP_K,
    limit: int | None = None,
    embedder: str = "memlab/minilm",
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Callable[[str], None] | None = None,
) -> AnswerEvaluation:
    """Retrieve, answer and judge every question of ``benchmark`` (the first ``limit``; see the module docstring).

    ``retriever``: a session retriever name (``keyword``, ``bm25``, ``vector``, ``hybrid``,
    optionally ``+<reranker>``; ``embedder`` is the embedding model of those that embed) or
    a :class:`~memlab.session.retrievers.SessionRetriever` instance (with ``reranker``).
    ``answer_model`` / ``judge_model``: litellm model strings (:func:`check_model`) or
    :class:`~memlab.llm.LLMClient` s (their handlers get the offline answerer / judge unless
    they hold one for :class:`GeneratedAnswer` / :class:`AnswerJudgement` already). ``top_k``
    memlab turns are retrieved and shown; ``concurrency`` questions are answered and judged at
    once. Every argument is checked before the first call: a bad one raises
    :class:`~memlab.ValidationError` naming it.
    """
    _positive(top_k, "top_k")
    _positive(limit, "limit", none=True)
    _positive(concurrency, "concurrency")
    answer_llm, judge_llm = _client(answer_model, "answer_model"), _client(judge_model, "judge_model")
    manager = _retriever(retriever, reranker, embedder)
    register_offline_handlers(answer_llm, judge_llm)
    say = progress or (lambda line: None)
    run = AnswerEvaluation(lane_name(manager), benchmark.name, answer_llm.model, judge_llm.model, top_k, categories=benchmark.categories())
    jobs: list[_Job] = []
    for conversation, questions in _selected(benchmark, limit):
        session = f"answers:{conversation.conversation_id}"
        haystack = {}
        for turn in haystack_turns(conversation, benchmark.turns):
            haystack[await _write(manager, BENCH_USER, session, turn.question, turn.answer)] = turn
        for question in questions:
            hits = await manager.search(BENCH_USER, question.question, session_id=session, top_k=top_k)
            ranked = [haystack[entry.qa_id] for entry, _ in hits if entry.qa_id in haystack]
            metrics = question_metrics(question, ranked, (top_k,))
            lines = [context_line(_shown_date(conversation.session(turn.session_id).date), turn.question, turn.answer) for turn in ranked]
            row = {
                "dataset": benchmark.name, "retriever": run.retriever, "answer_model": run.answer_model, "judge_model": run.judge_model,
                "conversation_id": conversation.conversation_id, "question_id": question.question_id, "category": question.category,
                "abstention": question.abstention, "top_k": top_k, "retrieved_ids": [i for turn in ranked for i in turn.turn_ids],
                "returned": len(ranked), "session_recall": metrics[f"session_recall_at_{top_k}"],
                "turn_recall": metrics[f"turn_recall_at_{top_k}"], "hit": metrics[f"hit_at_{top_k}"],
                "first_gold_rank": metrics["first_gold_rank"], "gold_answer": question.answer,
            }
            jobs.append(_Job(conversation, question, lines, row))
    say(f"{run.retriever}: retrieved for {len(jobs)} questions; answering with {run.answer_model}, judging with {run.judge_model}")
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(job: _Job) -> dict[str, Any]:
        nonlocal done
        async with gate:
            row = {**job.row, **await _answer_and_judge(answer_llm, judge_llm, job)}
        done += 1
        if done % 50 == 0 or done == len(jobs):
            say(f"{run.retriever}: {done}/{len(jobs)} questions answered and judged")
        return row

    run.questions = list(await asyncio.gather(*(one(job) for job in jobs)))
    return run


async def _metered(call: Any) -> tuple[Any, list[CallUsage]]:
    """``(await call, the calls it reported)``; an exception is returned, not raised. The calls go on to the caller's meter."""
    with metering() as meter:
        try:
            outcome = await call
        except (LLMError, StructuredOutputError) as exc:
            outcome = exc
    for usage in meter.calls:
        record_usage(usage)
    return outcome, meter.calls


def _usage(prefix: str, calls: Sequence[CallUsage]) -> dict[str, Any]:
    priced = [call.cost_usd for call in calls if call.cost_usd is not None]
    return {
        f"{prefix}_tokens_in": sum(call.tokens_in for call in calls),
        f"{prefix}_tokens_out": sum(call.tokens_out for call in calls),
        f"{prefix}_cost_usd": sum(priced) if priced else None,
    }


async def _answer_and_judge(answer_llm: LLMClient, judge_llm: LLMClient, job: _Job) -> dict[str, Any]:
    """The answer, verdict, errors, tokens and cost of one question (the judge only runs on an answer)."""
    question = job.question
    outcome, answer_calls = await _metered(
        answer_llm.complete(answer_messages(question.question, job.lines, question.question_date), response_model=GeneratedAnswer)
    )
    row: dict[str, Any] = {"answer": None, "answer_error": None, "verdict": None, "correct": None, "judge_failure": False,
                           "judge_error": None, "judge_reason": None, **_usage("answer", answer_calls), **_usage("judge", ())}
    if isinstance(outcome, StructuredOutputError):
        row["answer"] = outcome.raw_text.strip()  # not the JSON object: the text is the answer
    elif isinstance(outcome, LLMError):
        row["answer_error"] = str(outcome)
    else:
        row["answer"] = outcome.structured.answer.strip()
    if row["answer"] is not None:
        messages = judge_messages(question.question, question.answer, row["answer"], abstention=question.abstention)
        judged, judge_calls = await _metered(judge_llm.complete(messages, response_model=AnswerJudgement))
        row.update(_usage("judge", judge_calls))
        if isinstance(judged, StructuredOutputError):
            row["verdict"] = parse_verdict(judged.raw_text)
            if row["verdict"] is None:
                row["judge_error"] = f"unreadable judge output: {judged.raw_text.strip()[:200]!r}"
        elif isinstance(judged, LLMError):
            row["judge_error"] = str(judged)
        else:
            row["verdict"], row["judge_reason"] = judged.structured.verdict, judged.structured.reason
        row["judge_failure"] = row["verdict"] is None
        row["correct"] = None if row["verdict"] is None else row["verdict"] == "yes"
    costs = [row[key] for key in ("answer_cost_usd", "judge_cost_usd") if row[key] is not None]
    row["tokens"] = sum(row[f"{side}_tokens_{way}"] for side in ("answer", "judge") for way in ("in", "out"))
    row["cost_usd"] = sum(costs) if costs else None
    return row


def answer_summary_rows(
    questions: Sequence[dict[str, Any]], categories: Sequence[str] = (), *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> list[dict[str, Any]]:
    """Per retriever: one row per category present (``categories`` order first), then ``"all"`` (columns :data:`ANSWER_SUMMARY_COLUMNS`).

    ``accuracy`` over the judged questions and ``session_recall`` / ``hit`` over the
    answerable ones, each with its 95% bootstrap interval (``resamples`` seeded by ``seed``;
    0: bounds None); ``correct`` / ``judged`` / failures / tokens are counts, so a
    retriever's category rows add up to its ``"all"`` row.
    """
    check_resamples(resamples)
    rows = []
    for retriever in dict.fromkeys(row["retriever"] for row in questions):
        mine = [row for row in questions if row["retriever"] == retriever]
        order = [*categories, *(row["category"] for row in mine if row["category"] not in categories)]
        groups = [(category, [row for row in mine if row["category"] == category]) for category in dict.fromkeys(order)]
        for category, members in [*((c, m) for c, m in groups if m), (ALL, mine)]:
            judged = [row for row in members if row["correct"] is not None]
            answerable = [row for row in members if not row["abstention"]]
            costs = [row["cost_usd"] for row in members if row["cost_usd"] is not None]
            rows.append(
                {
                    "kind": "answers", "dataset": members[0]["dataset"], "retriever": retriever,
                    "answer_model": members[0]["answer_model"], "judge_model": members[0]["judge_model"], "top_k": members[0]["top_k"],
                    "category": category, "questions": len(members), "judged": len(judged),
                    "correct": sum(1 for row in judged if row["correct"]),
                    **_with_interval("accuracy", [float(row["correct"]) for row in judged], resamples, seed),
                    "answer_failures": sum(1 for row in members if row["answer_error"] is not None),
                    "judge_failures": sum(1 for row in members if row["judge_failure"]),
                    "answerable": len(answerable),
                    **_with_interval("session_recall", [row["session_recall"] for row in answerable], resamples, seed),
                    **_with_interval("hit", [row["hit"] for row in answerable], resamples, seed),
                    "tokens_in": sum(row["answer_tokens_in"] + row["judge_tokens_in"] for row in members),
                    "tokens_out": sum(row["answer_tokens_out"] + row["judge_tokens_out"] for row in members),
                    "cost_usd": sum(costs) if costs else None, "resamples": resamples,
                }
            )
    return rows


def answer_comparisons(questions: Sequence[dict[str, Any]], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[dict[str, Any]]:
    """Every pair of retrievers on the questions both had judged: accuracy ``a - b``, its paired interval, exact McNemar p.

    Rows in the shape of :data:`~memlab.bench.quality_eval.COMPARISON_COLUMNS` (``metric``
    ``"answer_accuracy"``), so :func:`~memlab.bench.quality_eval.comparison_line` prints them;
    none with ``resamples=0`` or no shared judged question.
    """
    if not check_resamples(resamples):
        return []
    by_retriever: dict[str, dict[tuple[str, str], float]] = {}
    for row in questions:
        if row["correct"] is not None:
            by_retriever.setdefault(row["retriever"], {})[(row["dataset"], row["question_id"])] = float(row["correct"])
    found = []
    for a, b in itertools.combinations(by_retriever, 2):
        shared = [key for key in by_retriever[a] if key in by_retriever[b]]
        result = paired_difference([by_retriever[a][k] for k in shared], [by_retriever[b][k] for k in shared], test="mcnemar", resamples=resamples, seed=seed)
        if result is None:
            continue
        verdict = "no difference" if not result.significant() else ("better" if result.difference > 0 else "worse")
        found.append(
            {
                "kind": "paired", "dataset": ", ".join(sorted({key[0] for key in shared})), "category": ALL, "a": a, "b": b,
                "metric": "answer_accuracy", "test": "mcnemar", "n": result.n, "a_mean": result.a_mean, "b_mean": result.b_mean,
                "difference": result.difference, "difference_lo": result.lo, "difference_hi": result.hi, "p_value": result.p_value,
                "a_only": result.a_only, "b_only": result.b_only, "resamples": resamples, "verdict": verdict,
            }
        )
    return found


# -- the benchmark command's part ------------------------------------------------------------------


@dataclass(frozen=True)
class AnswersSpec:
    """The answer-level part of ``memlab bench quality --answers`` (checked on construction, before any call).

    ``limit``: at most that many questions per retriever (None: the quality run's
    ``--limit``, else all); ``top_k``: retrieved turns shown to the answer model (None: the
    run's largest ``--k``).
    """

    answer_model: str = OFFLINE_MODEL
    judge_model: str = OFFLINE_MODEL
    limit: int | None = None
    top_k: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY

    def __post_init__(self) -> None:
        check_model(self.answer_model, "answer_model")
        check_model(self.judge_model, "judge_model")
        _positive(self.limit, "answers limit", none=True)
        _positive(self.top_k, "answers top_k", none=True)
        _positive(self.concurrency, "concurrency")


async def run_answers(
    benchmark: Benchmark,
    spec: AnswersSpec,
    retrievers: Sequence[str],
    *,
    embedder: str = "memlab/minilm",
    top_k: int = DEFAULT_TOP_K,
    limit: int | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """:func:`evaluate_answers` for each retriever name: ``{"rows", "questions", "comparisons", "spec"}``.

    ``top_k`` / ``limit`` apply where ``spec`` leaves them None; ``rows`` are
    :func:`answer_summary_rows`, ``comparisons`` :func:`answer_comparisons`.
    """
    top_k = spec.top_k or top_k
    limit = spec.limit if spec.limit is not None else limit
    questions: list[dict[str, Any]] = []
    for name in retrievers:
        run = await evaluate_answers(
            benchmark, retriever=name, answer_model=spec.answer_model, judge_model=spec.judge_model, top_k=top_k,
            limit=limit, embedder=embedder, concurrency=spec.concurrency, progress=progress,
        )
        questions.extend(run.questions)
    return {
        "rows": answer_summary_rows(questions, benchmark.categories(), resamples=resamples, seed=seed),
        "questions": questions,
        "comparisons": answer_comparisons(questions, resamples=resamples, seed=seed),
        "spec": {"answer_model": spec.answer_model, "judge_model": spec.judge_model, "top_k": top_k, "limit": limit,
                 "benchmark": benchmark.name, "resamples": resamples, "bootstrap_seed": seed},
    }


def answers_failure(result: dict[str, Any] | None) -> str | None:
    """Why nothing was judged (the first question's error) when questions were asked and none got a verdict; else None."""
    if not result or not result["questions"] or any(row["correct"] is not None for row in result["questions"]):
        return None
    first = result["questions"][0]
    return f"no answer was judged: {first['answer_error'] or first['judge_error']}"


def _interval(row: dict[str, Any], key: str) -> str:
    value, lo, hi = row.get(key), row.get(f"{key}_lo"), row.get(f"{key}_hi")
    if value is None:
        return _table.number(None)
    return f"{value:.3f}" if lo is None or hi is None else f"{value:.3f} [{lo:.2f}, {hi:.2f}]"


def _cost(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def format_answers_table(result: dict[str, Any]) -> str:
    """The answer-level table (per category, then ``all``, per retriever), the paired lines and a footer."""
    spec, rows = result["spec"], result["rows"]
    k = spec["top_k"]
    categories = list(dict.fromkeys(row["category"] for row in rows if row["category"] != ALL)) + [ALL]
    retrievers = list(dict.fromkeys(row["retriever"] for row in rows))
    ordered = sorted(rows, key=lambda row: (categories.index(row["category"]), retrievers.index(row["retriever"])))
    parts = [
        _table.render(
            ["answers: category", "retriever", "questions", f"sR@{k}", "accuracy [95% CI]", "correct/judged", "judge fail",
             "answer fail", "tokens", "cost $"],
            [
                [row["category"], row["retriever"], row["questions"], _interval(row, "session_recall"), _interval(row, "accuracy"),
                 f"{row['correct']}/{row['judged']}", row["judge_failures"], row["answer_failures"],
                 _table.number(row["tokens_in"] + row["tokens_out"]), _cost(row["cost_usd"])]
                for row in ordered
            ],
            right=range(2, 10),
        )
    ]
    if result["comparisons"]:
        parts.append("\n".join(comparison_line(row) for row in result["comparisons"]))
    offline = OFFLINE_MODEL in (spec["answer_model"], spec["judge_model"])
    parts.append(
        f"answer model {spec['answer_model']}, judge model {spec['judge_model']}; the top {k} retrieved turns are the context"
        + (f"; first {spec['limit']} questions" if spec["limit"] else "")
        + ". accuracy: judged correct / judged, 95% bootstrap interval over the judged questions; judge fail: an unreadable "
        "verdict or a failed judge call, answer fail: a failed answer call (both left out of accuracy); sR: session recall "
        "of the same retrieval; cost from litellm's cost map (— : unpriced)."
        + (" memlab/offline echoes the retrieved turns and judges by containment of the gold answer: these numbers test "
           "the pipeline and track retrieval, not a model." if offline else "")
    )
    return "\n\n".join(parts)


def _frame(rows: Sequence[dict[str, Any]], *, questions: bool) -> Any:
    import pandas as pd

    columns = ANSWER_QUESTION_COLUMNS if questions else ANSWER_SUMMARY_COLUMNS
    frame = pd.DataFrame.from_records([{name: row.get(name) for name in columns} for row in rows], columns=list(columns))
    return frame.astype(columns)


def to_frame(result: dict[str, Any], *, questions: bool = False, comparisons: bool = False) -> Any:
    """A :func:`run_answers` result (``result["answers"]`` of ``bench quality``) as a typed DataFrame.

    The summary rows (:data:`ANSWER_SUMMARY_COLUMNS`), the per-question rows
    (``questions=True``, :data:`ANSWER_QUESTION_COLUMNS`) or the paired comparisons.
    """
    if questions and comparisons:
        raise ValidationError("to_frame takes questions=True or comparisons=True, not both")
    if comparisons:
        import pandas as pd

        records = [{name: row.get(name) for name in COMPARISON_COLUMNS} for row in result["comparisons"]]
        return pd.DataFrame.from_records(records, columns=list(COMPARISON_COLUMNS)).astype(COMPARISON_COLUMNS)
    return _frame(result["questions"] if questions else result["rows"], questions=questions)
