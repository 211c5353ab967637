"""``memlab bench recall``: retrieval quality and latency per search type.

Quality: the seeded :func:`memlab.bench.corpus.synthetic_qa` corpus (one
uniquely named organisation per document, one question per document, the
document as gold evidence) is remembered into a fresh stack; every question
is recalled with each search type (``only_context=True``: the ranked context
the type retrieves). A result hits when one of its supporting documents is
the gold one. Reported: hit@1, hit@5, MRR (over ``top_k``), and for completion
types the share of answers containing the gold answer (one answer call each).

Latency: ``stack.recall(question, query_type=..., datasets=[...])`` end to end
(permissions, warm-up probe, query embedding, search) over a memory of
``latency_documents`` one-chunk documents, p50/p95 of ``queries`` calls per
type (the quality questions; "What happened in <year>?" for ``TEMPORAL``),
offline LLM without simulated latency.

Targets (issue 5, offline default embedder): hit@5 >= 0.8 for ``CHUNKS``;
p50 <= 20 ms for retrieval-only types over 10,000 chunks.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench import _table

HIT5_TARGET = 0.8
LATENCY_TARGET_MS = 20.0
RETRIEVAL_TYPES = ("CHUNKS", "CHUNKS_LEXICAL", "SUMMARIES", "TEMPORAL")
COMPLETION_TYPES = ("RAG_COMPLETION", "GRAPH_COMPLETION", "TRIPLET_COMPLETION", "HYBRID_COMPLETION")


@dataclass(frozen=True)
class RecallBenchSpec:
    """What ``memlab bench recall`` runs."""

    documents: int = 200
    types: Sequence[str] = RETRIEVAL_TYPES[:3] + COMPLETION_TYPES
    embedder: str = "memlab/minilm"
    top_k: int = 15
    latency_documents: int = 10_000
    latency_types: Sequence[str] = RETRIEVAL_TYPES
    queries: int = 100
    seed: int = 0


def _rank(results: Sequence[Any], gold: str) -> int | None:
    for rank, result in enumerate(results, start=1):
        if gold in result.raw.get("data_ids", ()):
            return rank
    return None


async def quality_rows(spec: RecallBenchSpec, root: Path, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """hit@1 / hit@5 / MRR (and answer accuracy for completion types) per search type."""
    from memlab.bench.corpus import synthetic_qa

    corpus = synthetic_qa(spec.documents, seed=spec.seed)
    rows = []
    async with _table.stack(root, spec.embedder) as stack:
        say(f"remember {spec.documents} documents ({spec.embedder})")
        stored = await stack.remember(corpus.documents, progress=False)
        for name in spec.types:
            say(f"quality of {name}")
            ranks, timings, correct = [], [], 0
            for item in corpus.questions:
                gold = stored.data_ids[item.document]
                started = time.perf_counter()
                results = await stack.recall(item.question, query_type=name, only_context=True, top_k=spec.top_k)
                timings.append(time.perf_counter() - started)
                ranks.append(_rank(results, gold))
                if name in COMPLETION_TYPES:
                    [answer] = await stack.recall(item.question, query_type=name, top_k=spec.top_k)
                    correct += item.answer.lower() in answer.text.lower()
            n = len(ranks)
            hit5 = sum(1 for rank in ranks if rank is not None and rank <= 5) / n
            rows.append(
                {
                    "kind": "quality",
                    "search_type": name,
                    "questions": n,
                    "hit_at_1": sum(1 for rank in ranks if rank == 1) / n,
                    "hit_at_5": hit5,
                    "mrr": sum(1 / rank for rank in ranks if rank is not None) / n,
                    "answer_accuracy": correct / n if name in COMPLETION_TYPES else None,
                    "context_p50_ms": _table.percentile(timings, 50, scale=1000),
                    **_table.judge(hit5, HIT5_TARGET if name == "CHUNKS" else None),
                }
            )
    return rows


async def latency_rows(spec: RecallBenchSpec, root: Path, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """recall() p50/p95 per retrieval type over ``latency_documents`` chunks."""
    from memlab.bench.corpus import synthetic_documents, synthetic_qa

    documents = synthetic_documents(spec.latency_documents, words=60, facts=3, seed=spec.seed)
    questions = [item.question for item in synthetic_qa(spec.queries, seed=spec.seed + 1).questions]
    rows = []
    async with _table.stack(root, spec.embedder) as stack:
        say(f"remember {spec.latency_documents} documents for latency ({spec.embedder})")
        started = time.perf_counter()
        stored = await stack.remember(documents, progress=False)
        build_s = time.perf_counter() - started
        for name in spec.latency_types:
            say(f"latency of {name}")
            asked = [f"What happened in {1950 + index % 75}?" for index in range(len(questions))] if name == "TEMPORAL" else questions
            timings: list[float] = []
            for question in _table.timed(asked, timings):
                await stack.recall(question, query_type=name, datasets=["main_dataset"], top_k=spec.top_k)
            p50 = _table.percentile(timings, 50, scale=1000)
            rows.append(
                {
                    "kind": "latency",
                    "search_type": name,
                    "chunks": stored.chunk_count,
                    "queries": len(asked),
                    "p50_ms": p50,
                    "p95_ms": _table.percentile(timings, 95, scale=1000),
                    "build_s": build_s,
                    **_table.judge(p50, LATENCY_TARGET_MS, at_most=True),
                }
            )
    return rows


async def run_bench_recall(spec: RecallBenchSpec, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Quality rows, then latency rows (each on its own fresh data root)."""
    say = progress or (lambda line: None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memlab-bench-recall-") as root:
        rows.extend(await quality_rows(spec, Path(root) / "quality", say))
        if spec.latency_documents and spec.latency_types:
            rows.extend(await latency_rows(spec, Path(root) / "latency", say))
    return rows


def format_recall_table(rows: Sequence[dict[str, Any]], spec: RecallBenchSpec) -> str:
    """The quality and latency tables as text."""
    n = _table.number
    quality = [row for row in rows if row["kind"] == "quality"]
    latency = [row for row in rows if row["kind"] == "latency"]
    parts = []
    if quality:
        parts.append(
            _table.render(
                ["search type", "questions", "hit@1", "hit@5", "MRR", "answer acc", "context p50 ms", "target", "result"],
                [
                    [
                        row["search_type"], row["questions"], n(row["hit_at_1"], 3), n(row["hit_at_5"], 3), n(row["mrr"], 3),
                        n(row["answer_accuracy"], 3), n(row["context_p50_ms"], 1),
                        f"hit@5 >= {row['target']}" if row["target"] else "", _table.verdict(row),
                    ]
                    for row in quality
                ],
                right=range(1, 7),
            )
        )
    if latency:
        parts.append(
            _table.render(
                ["search type", "chunks", "queries", "p50 ms", "p95 ms", "target", "result"],
                [
                    [row["search_type"], n(row["chunks"]), row["queries"], n(row["p50_ms"], 2), n(row["p95_ms"], 2),
                     f"p50 <= {row['target']:.0f} ms", _table.verdict(row)]
                    for row in latency
                ],
                right=range(1, 5),
            )
        )
    parts.append(
        f"embedder {spec.embedder}; offline LLM (memlab/offline, 0 ms latency); top_k {spec.top_k}. "
        "quality: synthetic_qa, one question per document, gold = its document; a context hit = an item supported by it; "
        "answer acc = the answer contains the gold answer. latency: recall() end to end with one dataset named."
    )
    return "\n\n".join(parts)
