"""Evidence hit@k of the merge policy's lanes on the conversational benchmark, as a grid workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ValidationError
from memlab.experiments._checks import (
    REMEMBERING,
    benchmark_size,
    optional_limit,
    positive_int,
    verify_and_clear_session,
    search_type_name,
)
from memlab._stats import percentile
from memlab.experiments._modes import quiet_config
from memlab.experiments._workload import Workload, WorkloadResult

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = ["MergeLanes"]


def _document(question: str, answer: str, turn_ids: tuple[str, ...]) -> str:
    text = "\n".join(part for part in (question, answer) if part.strip())
    return text or " ".join(turn_ids)


def _rank(ids: list[str] | None, gold: set[str], graph: Any, k: int) -> int | None:
    """1-based rank of the first of ``ids[:k]`` supported by a gold document, None when none is."""
    for place, element in enumerate((ids or [])[:k], start=1):
        if gold & graph.supporters(element):
            return place
    return None


class MergeLanes(Workload):
    """How well the merged retrieval lane (and each lane alone) finds a question's evidence.

    For the seed's synthetic conversational benchmark (``size``: ``"tiny"`` 12 questions,
    ``"small"`` 60, ``"default"`` 600 or an int; ``limit``: the first ``limit`` questions
    only), each conversation's haystack turns (:func:`memlab.bench.quality_eval.haystack_turns`:
    a user turn and its reply) are remembered as documents, one per turn, into a
    dataset of their own by a stack of the cell's config without simulated latency
    (not timed). Then, on a stack of the cell's config with ``analysis.search_mode``
    set to ``mode`` (``"concurrent"`` by default; None keeps the cell's), each
    conversation's questions are asked in order as turns of one session:
    ``stack.search(question, search_type, session_id=..., datasets=[its dataset],
    top_k=k)``. From the second question on, concurrent mode's rewrite lane (the
    question with the prior turns) differs from the raw lane, and ``merge.policy``
    merges them. Each turn's recorded lanes are scored against the documents of the
    question's gold evidence turns (an element counts when ``graph.supporters`` names
    one of them); abstention questions are asked but not scored.

    =========================  =========  ===========================================================
    metric                     unit       what
    =========================  =========  ===========================================================
    ``evidence_hit_at_<k>``    ratio      share of scored questions whose merged lane (the answer's
                               context) holds an element supported by a gold document
    ``raw_hit_at_<k>``         ratio      the same for the raw lane alone
    ``rewrite_hit_at_<k>``     ratio      the same for the rewrite lane alone, over the questions
                                          that had one (None: none had)
    ``mrr``                    ratio      mean 1 / rank of the first supported element of the merged
                                          lane (0 when none)
    ``questions``              questions  scored questions (with evidence)
    ``rewrite_questions``      questions  scored questions that had a rewrite lane
    ``documents``              documents  haystack turns remembered
    ``search_p50_ms``          ms         median wall-clock of ``search()`` over every question asked
    ``search_p95_ms``          ms         p95 of the same
    =========================  =========  ===========================================================

    Per-turn rows (one per question asked): ``turn``, ``conversation_id``,
    ``question_id``, ``category``, ``abstention``, ``mode``, ``hit``, ``raw_hit``,
    ``rewrite_hit`` (booleans; <NA> when not scored, or for ``rewrite_hit`` without a
    rewrite lane), ``rank`` (Int64, <NA> when no supported element), ``wall_ms``.

    The cell's strategy objects go into the asking stack; its ``llm`` and ``embedder``
    into the remembering one too.
    """

    name = "merge_lanes"
    turn_columns = {
        "turn": "Int64", "conversation_id": "string", "question_id": "string", "category": "string", "abstention": "boolean",
        "mode": "string", "hit": "boolean", "raw_hit": "boolean", "rewrite_hit": "boolean", "rank": "Int64", "wall_ms": "Float64",
    }

    def __init__(
        self, size: int | str = "tiny", limit: int | None = None, k: int = 10, search_type: Any = "RAG_COMPLETION", mode: str | None = "concurrent"
    ) -> None:
        from memlab.config import ANALYSIS_MODES

        self.size = benchmark_size(size)
        self.limit = optional_limit(limit)
        self.k = positive_int("k", k)
        self.search_type = search_type_name(search_type)
        if mode is not None and mode not in ANALYSIS_MODES:
            raise ValidationError(f"mode must be None or one of {', '.join(ANALYSIS_MODES)}, got {mode!r}")
        self.mode = mode

    def fingerprint(self) -> dict[str, Any]:
        return {"size": self.size, "limit": self.limit, "k": self.k, "search_type": self.search_type, "mode": self.mode}

    async def run(self, config: "StackConfig", seed: int, objects: Mapping[str, Any] | None = None) -> WorkloadResult:
        import time

        from memlab.bench.conversations import synthetic
        from memlab.bench.quality_eval import haystack_turns
        from memlab.stack import MemoryStack

        if self.mode is not None:
            config = config.model_copy(update={"analysis": config.analysis.model_copy(update={"search_mode": self.mode})})
        benchmark = synthetic(seed, self.size)
        left = self.limit if self.limit is not None else len(benchmark)
        chosen = []
        for conversation in benchmark.conversations:
            if left <= 0:
                break
            questions = conversation.questions[:left]
            left -= len(questions)
            chosen.append((conversation, questions, haystack_turns(conversation)))

        remembered = {}
        given = dict(objects or {})
        remembering = {key: value for key, value in given.items() if key in REMEMBERING}
        async with MemoryStack.from_config(quiet_config(config), **remembering) as builder:
            for conversation, _, haystack in chosen:
                texts = [_document(turn.question, turn.answer, turn.turn_ids) for turn in haystack]
                remembered[conversation.conversation_id] = await builder.remember(
                    texts, dataset=f"merge-{conversation.conversation_id}", progress=False
                )

        k = self.k
        turns: list[dict[str, Any]] = []
        async with MemoryStack.from_config(config, **given) as stack:
            for conversation, questions, haystack in chosen:
                result = remembered[conversation.conversation_id]
                graph = await stack.memory.graph(result.dataset_id)
                dataset, session = f"merge-{conversation.conversation_id}", f"merge:{conversation.conversation_id}"
                for question in questions:
                    evidence = set(question.evidence_turn_ids)
                    gold = {result.data_ids[i] for i, turn in enumerate(haystack) if evidence.intersection(turn.turn_ids)}
                    began = time.perf_counter()
                    results: list[Any] = await stack.search(question.question, self.search_type, session_id=session, datasets=[dataset], top_k=k)
                    wall_ms = (time.perf_counter() - began) * 1000
                    record = results[0].raw["turn"]
                    lanes = record.get("lanes") or {}
                    scored = bool(gold)
                    rank = _rank(lanes.get("merged"), gold, graph, k) if scored else None
                    rewrite = lanes.get("rewrite")
                    turns.append({
                        "turn": len(turns), "conversation_id": conversation.conversation_id, "question_id": question.question_id,
                        "category": question.category, "abstention": question.abstention, "mode": record.get("mode"),
                        "hit": rank is not None if scored else None,
                        "raw_hit": _rank(lanes.get("raw"), gold, graph, k) is not None if scored else None,
                        "rewrite_hit": _rank(rewrite, gold, graph, k) is not None if scored and rewrite is not None else None,
                        "rank": rank, "wall_ms": wall_ms,
                    })
                await verify_and_clear_session(stack, session, len(questions))

        scored_turns = [turn for turn in turns if turn["hit"] is not None]
        rewritten = [turn for turn in scored_turns if turn["rewrite_hit"] is not None]

        def share(rows: list[dict[str, Any]], column: str) -> float | None:
            return sum(1 for row in rows if row[column]) / len(rows) if rows else None

        walls = [turn["wall_ms"] for turn in turns]
        metrics: dict[str, float | int | None] = {
            f"evidence_hit_at_{k}": share(scored_turns, "hit"),
            f"raw_hit_at_{k}": share(scored_turns, "raw_hit"),
            f"rewrite_hit_at_{k}": share(rewritten, "rewrite_hit"),
            "mrr": sum(1 / turn["rank"] if turn["rank"] else 0.0 for turn in scored_turns) / len(scored_turns) if scored_turns else None,
            "questions": len(scored_turns),
            "rewrite_questions": len(rewritten),
            "documents": sum(len(haystack) for _, _, haystack in chosen),
            "search_p50_ms": percentile(walls, 50),
            "search_p95_ms": percentile(walls, 95),
        }
        units = {name: "ratio" for name in metrics}
        units.update(questions="questions", rewrite_questions="questions", documents="documents", search_p50_ms="ms", search_p95_ms="ms")
        return WorkloadResult(metrics, units, turns)
