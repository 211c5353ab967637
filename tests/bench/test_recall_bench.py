"""``memlab bench recall`` at toy sizes: quality and latency rows, the table, the CLI."""

from __future__ import annotations

from memlab.bench.recall import RecallBenchSpec, format_recall_table, run_bench_recall
from memlab.cli import main


async def test_bench_recall_rows_and_table() -> None:
    spec = RecallBenchSpec(
        documents=12, types=("CHUNKS", "HYBRID_COMPLETION"), embedder="memlab/hashing", latency_documents=30,
        latency_types=("CHUNKS", "TEMPORAL"), queries=5,
    )
    rows = await run_bench_recall(spec)
    quality = {row["search_type"]: row for row in rows if row["kind"] == "quality"}
    latency = [row for row in rows if row["kind"] == "latency"]
    assert set(quality) == {"CHUNKS", "HYBRID_COMPLETION"}
    chunks = quality["CHUNKS"]
    assert 0 <= chunks["hit_at_1"] <= chunks["hit_at_5"] <= 1 and chunks["hit_at_1"] <= chunks["mrr"] <= 1
    assert chunks["hit_at_5"] >= 0.8  # a unique organisation name per document: even hashing finds it
    assert chunks["answer_accuracy"] is None and 0 <= quality["HYBRID_COMPLETION"]["answer_accuracy"] <= 1
    assert [row["search_type"] for row in latency] == ["CHUNKS", "TEMPORAL"] and latency[0]["chunks"] == 30
    table = format_recall_table(rows, spec)
    assert "hit@5" in table and "p50 ms" in table and "memlab/hashing" in table


def test_cli_bench_recall(capsys) -> None:
    code = main(
        ["bench", "recall", "--documents", "5", "--types", "chunks", "--embedder", "memlab/hashing", "--latency-documents", "0", "--quiet"]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "CHUNKS" in out and "p50 ms" not in out.split("embedder")[0].split("\n\n")[-1]
