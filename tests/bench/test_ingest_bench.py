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
