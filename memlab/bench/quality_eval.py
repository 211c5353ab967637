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
written with ``SessionManager.add_qa``. One memlab turn per **exchange**: a user turn
and the assistant turn right after it become one ``add_qa(question=user text,
answer=assistant text)``, the unit memlab's session lane stores and returns (and
LongMemEval's retrieval "round"). A user turn not followed by an assistant turn is a
memlab turn with answer ``""``; an assistant turn not preceded by a user turn is one
with question ``""``. Session dates are not written (the cache stamps the write time),
so temporal questions are retrieved on their content alone. Every memlab ``qa_id``
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

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlab._stats import percentile
from memlab.bench.conversations import Benchmark, Conversation, Question
from memlab.bench.errors import BenchmarkError
from memlab.exceptions import ValidationError
from memlab.frames import QUALITY_KS, quality_frame
from memlab.frames import quality_ks as check_ks
from memlab.frames import quality_metric_names as metric_names
from memlab.frames import quality_question_columns as question_columns
from memlab.frames import quality_summary_columns as summary_columns

if TYPE_CHECKING:
    from memlab.session import SessionManager
    from memlab.session.retrievers import SessionRetriever

__all__ = [
    "ALL",
    "BENCH_USER",
    "DEFAULT_KS",
    "Evaluation",
    "HaystackTurn",
    "check_ks",
    "evaluate",
    "evaluate_retriever",
    "haystack_turns",
    "metric_names",
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


def haystack_turns(conversation: Conversation) -> list[HaystackTurn]:
    """The conversation's turns as memlab turns, chronological: user + following assistant turn paired (module docstring)."""
    found: list[HaystackTurn] = []
    for session in conversation.sessions:
        turns = session.turns
        i = 0
        while i < len(turns):
            turn = turns[i]
            if turn.role == "user":
                reply = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].role == "assistant" else None
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

    def summary_rows(self) -> list[dict[str, Any]]:
        """:func:`summary_rows` of this run."""
        return summary_rows(self)


def scratch_manager(retriever: "SessionRetriever[Any]") -> "SessionManager":
    """A :class:`~memlab.session.SessionManager` over a fresh in-memory cache ranking with ``retriever``.

    What ``stack.frames.quality`` runs on: the stack's retriever (and so its embedder),
    none of its stores.
    """
    from memlab.cache import MemoryCache
    from memlab.session import SessionManager

    return SessionManager(MemoryCache(), retriever=retriever)


async def evaluate_retriever(
    retriever: "SessionRetriever[Any]", benchmark: Benchmark, *, ks: Sequence[int] = DEFAULT_KS, limit: int | None = None
) -> Evaluation:
    """``stack.frames.quality``'s evaluation: :func:`evaluate` with ``retriever`` on a :func:`scratch_manager`.

    ``embedder`` is set to the retriever's embedder where it embeds (``vector``, or
    ``hybrid`` with its vector lane); None for ``keyword`` / ``bm25``.
    """
    run = await evaluate(scratch_manager(retriever), benchmark, ks=ks, limit=limit)
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
) -> Evaluation:
    """Write each conversation's haystack through ``manager`` and ask its questions (see the module docstring).

    ``limit``: at most that many questions (the benchmark's first), and only the
    conversations they belong to. The manager's cache must be empty for ``user_id``'s
    ``quality:*`` sessions (a fresh stack or :func:`scratch_manager`).
    """
    ks = check_ks(ks)
    say = progress or (lambda line: None)
    run = Evaluation(retriever=manager.retriever.name, dataset=benchmark.name, ks=ks, categories=benchmark.categories())
    selected = _selected(benchmark, limit)
    started = time.perf_counter()
    await _write(manager, user_id, "quality:cold-start", "memlab warm-up turn", "ok")
    await manager.search(user_id, "memlab warm-up turn", session_id="quality:cold-start", top_k=1)
    run.cold_start_s = time.perf_counter() - started
    for number, (conversation, questions) in enumerate(selected, start=1):
        session = f"quality:{conversation.conversation_id}"
        haystack: dict[str, HaystackTurn] = {}
        for turn in haystack_turns(conversation):
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


def summary_rows(run: Evaluation) -> list[dict[str, Any]]:
    """One row per category present (benchmark order), then the overall row (``category == "all"``).

    Columns :func:`summary_columns`: the averaged metrics of the category's answerable
    questions, ``no_result_rate`` of its abstention questions, the p50 / p95 of its
    searches, and the retriever-level costs (the same on every row of the retriever).
    """
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
                **{name: _mean([row[name] for row in answerable]) for name in metric_names(run.ks)},
                "abstention_questions": len(abstaining),
                "no_result_rate": _mean([float(row["no_result"]) for row in abstaining]),
                "p50_ms": percentile(latencies, 50),
                "p95_ms": percentile(latencies, 95),
                **costs,
            }
        )
    return rows
