"""The ``memlab bench modes`` conversation as a grid workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memlab._stats import percentile
from memlab.bench.errors import BenchmarkError
from memlab.experiments._checks import REMEMBERING, positive_int, search_type_name, verify_and_clear_session
from memlab.experiments._workload import Workload, WorkloadResult

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = ["ModesConversation", "percentile", "quiet_config"]


def quiet_config(config: "StackConfig") -> "StackConfig":
    """``config`` with no simulated LLM latency: what the untimed setup (remembering the corpus) runs on."""
    return config.model_copy(update={"llm": config.llm.model_copy(update={"offline_latency_ms": 0.0})})


class ModesConversation(Workload):
    """The seeded conversation of ``memlab bench modes`` on the cell's stack.

    The corpus (``documents`` :func:`~memlab.bench.corpus.synthetic_qa` documents of the
    seed) is remembered first by a stack of the cell's config without simulated latency
    (not timed); then the seed's ``turns``-message conversation
    (:func:`memlab.bench.modes.conversation`: questions, follow-ups, guidance, thanks,
    corrections) runs turn by turn through ``stack.search(message, search_type,
    session_id=..., top_k=top_k)`` (``entry="recall"``: ``stack.recall(..., scope="graph")``,
    the same session turn) on a stack of the cell's config, so the mode is
    ``analysis.search_mode`` and the latency per LLM call ``llm.offline_latency_ms``
    (:func:`memlab.bench.modes.converse`, with its untimed warm-up call). The cell's
    strategy objects go into the conversation's stack; its ``llm`` and ``embedder``
    into the remembering one too (an injected LLM keeps its own latency there).

    ==================  ===========  =============================================================
    metric              unit         what
    ==================  ===========  =============================================================
    ``turns``           turns        messages sent
    ``answered``        turns        turns answered (not gated by a sequential analysis)
    ``gated``           turns        turns the analysis answered without retrieval
    ``fallbacks``       turns        turns that ran another mode than the one asked for
    ``analysis_errors`` turns        turns whose analysis failed open
    ``latency_p50_ms``  ms           median wall-clock of the answered turns (around ``search()``)
    ``latency_p95_ms``  ms           p95 of the same
    ``wall_s``          s            the conversation: the sum of every turn's wall-clock
    ``llm_calls``       calls        ``answer_calls + analysis_calls``
    ``answer_calls``    calls        answer LLM calls of all turns
    ``analysis_calls``  calls        analysis LLM calls of all turns
    ``tokens_in``       tokens       prompt tokens of all turns (both calls)
    ``tokens_out``      tokens       completion tokens of all turns
    ``tokens_per_turn`` tokens/turn  ``(tokens_in + tokens_out) / turns``
    ``guidance_written`` entries     guidance entries (context rows of kind ``context``) the session holds after the run
    ``hit_rate``        ratio        over question and follow-up turns: the share whose merged retrieval lane
                                     holds an element supported by the gold document of the question being
                                     asked (a follow-up refers to the latest question; a gated turn misses)
    ==================  ===========  =============================================================

    Timing metrics (unit ``ms`` / ``s``) vary between runs; the rest are identical
    for the same seed and config. Per-turn rows: ``turn``, ``kind``, ``wall_ms``,
    ``mode``, ``answered``, ``answer_calls``, ``analysis_calls``, ``tokens_in``,
    ``tokens_out``, ``hit`` (<NA> for turns that are not questions or follow-ups).
    """

    name = "modes"
    turn_columns = {
        "turn": "Int64", "kind": "string", "wall_ms": "Float64", "mode": "string", "answered": "boolean", "answer_calls": "Int64",
        "analysis_calls": "Int64", "tokens_in": "Int64", "tokens_out": "Int64", "hit": "boolean",
    }

    def __init__(
        self, turns: int = 40, documents: int = 30, search_type: Any = "GRAPH_COMPLETION", top_k: int = 15, entry: str = "search"
    ) -> None:
        from memlab.bench.modes import check_entry

        self.turns = positive_int("turns", turns)
        self.documents = positive_int("documents", documents)
        self.search_type = search_type_name(search_type)
        self.top_k = positive_int("top_k", top_k)
        self.entry = check_entry(entry)

    def fingerprint(self) -> dict[str, Any]:
        found = {"turns": self.turns, "documents": self.documents, "search_type": self.search_type, "top_k": self.top_k}
        return found if self.entry == "search" else {**found, "entry": self.entry}  # search runs keep their cached cells

    async def run(self, config: "StackConfig", seed: int, objects: Mapping[str, Any] | None = None) -> WorkloadResult:
        from memlab.bench.corpus import synthetic_qa
        from memlab.bench.modes import (
            SESSION_ID,
            ModesBenchSpec,
            conversation,
            converse,
        )
        from memlab.stack import MemoryStack

        spec = ModesBenchSpec(
            turns=self.turns, latency_ms=config.llm.offline_latency_ms, modes=(config.analysis.search_mode,), documents=self.documents,
            embedder=config.embedding.model, search_type=self.search_type, top_k=self.top_k, baseline=False, seed=seed, entry=self.entry,
        )
        documents, turns = conversation(spec)
        corpus = synthetic_qa(self.documents, seed=seed)
        if corpus.documents != documents:
            raise BenchmarkError("memlab.bench.modes.conversation() no longer uses synthetic_qa(documents, seed=seed): gold documents unknown")
        gold = {item.question: item.document for item in corpus.questions}
        given = dict(objects or {})
        remembering = {key: value for key, value in given.items() if key in REMEMBERING}
        async with MemoryStack.from_config(quiet_config(config), **remembering) as builder:
            remembered = await builder.remember(list(documents), progress=False)
        async with MemoryStack.from_config(config, **given) as stack:
            rows = await converse(
                stack, turns, session_id=SESSION_ID, search_type=self.search_type, top_k=self.top_k, warm_up=True, lanes=True, entry=self.entry
            )
            graph = await stack.memory.graph(remembered.dataset_id)
            context = await stack.frames.context(SESSION_ID)
            await verify_and_clear_session(stack, SESSION_ID, len(rows))
        guidance = int((context["kind"].astype("string").fillna("context") == "context").sum())  # a row without kind is guidance

        per_turn: list[dict[str, Any]] = []
        asking: int | None = None  # the document index of the question being asked
        for row in rows:
            if row["kind"] == "question":
                asking = gold[row["message"]]
            elif row["kind"] != "follow_up":
                asking = None
            hit = None
            if asking is not None:
                wanted = remembered.data_ids[asking]
                merged = (row.get("lanes") or {}).get("merged") or []
                hit = any(wanted in graph.supporters(element) for element in merged)
            per_turn.append({
                "turn": row["turn"], "kind": row["kind"], "wall_ms": row["wall_ms"], "mode": row["mode"], "answered": row["answered"],
                "answer_calls": row["answer_calls"], "analysis_calls": row["analysis_calls"], "tokens_in": row["tokens_in"],
                "tokens_out": row["tokens_out"], "hit": hit,
            })

        n = len(rows)
        answered = [row["wall_ms"] for row in rows if row["answered"]]
        answer_calls = sum(row["answer_calls"] for row in rows)
        analysis_calls = sum(row["analysis_calls"] for row in rows)
        tokens_in, tokens_out = sum(row["tokens_in"] for row in rows), sum(row["tokens_out"] for row in rows)
        hits = [turn["hit"] for turn in per_turn if turn["hit"] is not None]
        metrics: dict[str, float | int | None] = {
            "turns": n,
            "answered": len(answered),
            "gated": n - len(answered),
            "fallbacks": sum(1 for row in rows if row["mode"] != row["requested_mode"]),
            "analysis_errors": sum(1 for row in rows if row["analysis_error"]),
            "latency_p50_ms": percentile(answered, 50),
            "latency_p95_ms": percentile(answered, 95),
            "wall_s": sum(row["wall_ms"] for row in rows) / 1000,
            "llm_calls": answer_calls + analysis_calls,
            "answer_calls": answer_calls,
            "analysis_calls": analysis_calls,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_per_turn": (tokens_in + tokens_out) / n if n else None,
            "guidance_written": guidance,
            "hit_rate": sum(hits) / len(hits) if hits else None,
        }
        return WorkloadResult(metrics, dict(UNITS), per_turn)


UNITS = {
    "turns": "turns", "answered": "turns", "gated": "turns", "fallbacks": "turns", "analysis_errors": "turns",
    "latency_p50_ms": "ms", "latency_p95_ms": "ms", "wall_s": "s", "llm_calls": "calls", "answer_calls": "calls",
    "analysis_calls": "calls", "tokens_in": "tokens", "tokens_out": "tokens", "tokens_per_turn": "tokens/turn",
    "guidance_written": "entries", "hit_rate": "ratio",
}
