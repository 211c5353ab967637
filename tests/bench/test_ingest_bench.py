"""``memlab bench ingest`` at toy sizes: rows, table, CLI, and the generated corpora."""

from __future__ import annotations

import json

from memlab.bench.corpus import synthetic_documents, synthetic_qa
from memlab.bench.ingest import IngestBenchSpec, format_ingest_table, run_bench_ingest
from memlab.cli import main


def test_corpora_are_seeded_and_sized() -> None:
    docs = synthetic_documents(5, words=120, seed=3)
    assert docs == synthetic_documents(5, words=120, seed=3) != synthetic_documents(5, words=120, seed=4)
    assert all(len(doc.split()) >= 120 for doc in docs)
    corpus = synthetic_qa(20, seed=1)
    assert len(corpus.documents) == len(corpus.questions) == 20
    for item in corpus.questions:
        assert item.answer in corpus.documents[item.document]
    names = [doc.split(" was founded")[0] for doc in corpus.documents]
    assert len(set(names)) == 20  # one uniquely named organisation per document


async def test_bench_ingest_rows_and_table() -> None:
    spec = IngestBenchSpec(documents=12, words=80, embedders=("memlab/hashing",), vectors=3000, dims=(64,), queries=10)
    rows = await run_bench_ingest(spec)
    ingest = [row for row in rows if row["kind"] == "ingest"]
    vector = [row for row in rows if row["kind"] == "vector"]
    assert [row["embedder"] for row in ingest] == ["memlab/hashing"]
    assert ingest[0]["documents"] == 12 and ingest[0]["chunks"] >= 12 and ingest[0]["llm_calls"] == ingest[0]["chunks"]
    assert {"startup_s", "extract_s", "embed_s", "write_s", "cold_start_s"} <= set(ingest[0]) and ingest[0]["passed"] in (True, False)
    assert ingest[0]["startup_s"] < 0.5  # the cold start was paid before the timed run
    assert [row["index"] for row in vector] == ["memlab", "raw-faiss-flat"]
    assert vector[0]["recall_at_k"] >= 0.95 and vector[0]["vectors"] == 3000
    table = format_ingest_table(rows)
    assert "docs/s" in table and "cold start s" in table and "raw-faiss-flat" in table and ("PASS" in table or "MISS" in table)


def test_cli_bench_ingest(tmp_path, capsys) -> None:
    out = tmp_path / "ingest.json"
    code = main(
        ["bench", "ingest", "--documents", "4", "--embedders", "memlab/hashing", "--vectors", "500", "--dims", "32",
         "--queries", "5", "--quiet", "--json", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "memlab/hashing" in printed and "fp16" in printed
    assert {row["kind"] for row in json.loads(out.read_text())} == {"ingest", "vector"}
    assert main(["bench", "ingest", "--dims", "x", "--quiet"]) == 2


async def test_bench_ingest_minilm_beside_its_raw_ceiling() -> None:
    spec = IngestBenchSpec(
        documents=4, words=60, embedders=("memlab/minilm",), vectors=300, dims=(16,), queries=3,
        embed_texts=4, ceiling_batch_sizes=(2, 4), embed_repeats=1,
    )
    rows = await run_bench_ingest(spec)
    embed = [row for row in rows if row["kind"] == "embed"]
    labels = list(dict.fromkeys(row["label"] for row in embed))
    assert len(labels) == 2 and labels[0] == "60-word chunks (whole documents)"
    for label in labels:
        group = [row for row in embed if row["label"] == label]
        assert [(row["runner"], row["batch_size"]) for row in group] == [("memlab", 8), ("raw-onnxruntime", 2), ("raw-onnxruntime", 4)]
        assert sum(bool(row["best"]) for row in group) == 1 and max(row["of_ceiling"] for row in group[1:]) == 1.0
        memlab = group[0]
        assert memlab["chunks_per_s"] > 0 and memlab["load_s"] > 0 and memlab["passed"] in (True, False) and memlab["target"] == 0.9
        assert memlab["texts"] == 4 and memlab["truncated"] == 0 and memlab["tokens"] == memlab["word_pieces"]
    table = format_ingest_table(rows)
    assert "raw-onnxruntime (ceiling)" in table and "of ceiling" in table and "cold load s" in table


def test_cli_bench_ingest_skips_the_ceiling_without_minilm_and_checks_batch_sizes(capsys) -> None:
    assert main(["bench", "ingest", "--documents", "2", "--embedders", "memlab/hashing", "--vectors", "100", "--dims", "8",
                 "--queries", "2", "--quiet", "--embed-texts", "4", "--batch-sizes", "2"]) == 0
    assert "raw-onnxruntime" not in capsys.readouterr().out
    assert main(["bench", "ingest", "--batch-sizes", "x", "--quiet"]) == 2
    assert main(["bench", "ingest", "--batch-sizes", "0", "--quiet"]) == 2
