"""``memlab bench ingest``: permanent-memory ingest speed and vector search latency.

Ingest: a generated corpus (:func:`memlab.bench.corpus.synthetic_documents`,
``documents`` × ~``words`` words) goes through ``MemoryStack.remember`` in one
call per embedder, on a fresh data root, with the offline LLM (no simulated
latency). Reported: the cold start (a first one-document ``remember`` on another
fresh stack: imports, model load), then the steady state: documents/s and
chunks/s of wall-clock time, and the phase split the run itself measured (LLM
extraction, embedding, graph + snapshot write).

Vector search: ``vectors`` chunk vectors (generated ~60-word chunks embedded
by the fast ``HashingEmbedder`` at each dim) in memlab's ``VectorIndex`` (what
``recall`` searches) beside the raw ceiling, a plain faiss ``IndexFlatIP``
exact search over the same vectors, one query at a time on one thread
(fact-sentence questions); p50/p95 over ``queries`` queries, and memlab's recall@k against
the exact answer.

Embedder vs raw ceiling (when ``memlab/minilm`` is among the embedders), on
two sets of ``embed_texts`` texts of the same corpus: whole documents
(``words``-word chunks, what the old 512-token default made of them) and the
chunks ``remember`` makes for MiniLM now. Each set is embedded by memlab's
``MiniLMEmbedder`` as shipped (default threads and batch size, one ``embed``
call) beside the raw ceiling: a bare
``onnxruntime.InferenceSession`` on the same model file, with the same thread
count, fed the same tokenized inputs (the packaged ``tokenizer.json``,
truncation at 256 word pieces, padding to each batch's longest text, texts in
length order), tokenized before the clock starts, at each of
``ceiling_batch_sizes``: nothing of memlab in its loop. Each runner gets one
untimed warm-up batch, then ``embed_repeats`` timed passes over all the texts,
the runners taking turns (rotated each repeat) so load hits them alike;
chunks/s is the median pass. The cold start is reported apart: the model load
of a fresh (unshared) ``MiniLMEmbedder`` (sha256 check, tokenizer, session)
and the bare session's construction.

Targets (issue 4, the 2-core machine, fast embedder): ingest >= 50 documents/s;
vector top-15 p50 <= 5 ms at 100,000 vectors. Retrieval-quality item 8: memlab's
MiniLM embedding >= 0.9x the raw ceiling's best batch size.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench import _table

INGEST_TARGET_DOCS_PER_S = 50.0
VECTOR_TARGET_P50_MS = 5.0
#: the embedder the ingest target applies to
FAST_EMBEDDER = "memlab/hashing"
#: the embedder measured beside its raw onnxruntime ceiling
CEILING_EMBEDDER = "memlab/minilm"
#: memlab's MiniLM chunks/s over the raw ceiling's best, at least
CEILING_RATIO_TARGET = 0.9


@dataclass(frozen=True)
class IngestBenchSpec:
    """What ``memlab bench ingest`` runs."""

    documents: int = 1000
    words: int = 300
    embedders: Sequence[str] = (FAST_EMBEDDER, "memlab/minilm")
    vectors: int = 100_000
    dims: Sequence[int] = (256, 384)
    top_k: int = 15
    queries: int = 200
    seed: int = 0
    #: chunk texts of the embedder-vs-ceiling comparison (0 skips it)
    embed_texts: int = 128
    ceiling_batch_sizes: Sequence[int] = (8, 16, 32, 64)
    embed_repeats: int = 3


async def ingest_run(embedder: str, documents: list[str], *, root: Path) -> dict[str, Any]:
    """One ``remember(documents)`` on a fresh stack under ``root``; returns a result row.

    First a one-document ``remember`` on another fresh stack: its wall-clock time is
    the cold start (imports, model load, first snapshot), reported as ``cold_start_s``
    and kept out of the timed steady-state run.
    """
    async with _table.stack(root / "cold", embedder) as cold:
        started = time.perf_counter()
        await cold.remember(["A first document, to pay the one-off imports and model load."], progress=False)
        cold_start_s = time.perf_counter() - started
    async with _table.stack(root / "steady", embedder) as stack:
        started = time.perf_counter()
        result = await stack.remember(documents, progress=False)
        seconds = time.perf_counter() - started
    docs_per_s = len(documents) / seconds
    return {
        "kind": "ingest",
        "embedder": embedder,
        "documents": len(documents),
        "chunks": result.chunk_count,
        "nodes": result.node_count,
        "edges": result.edge_count,
        "llm_calls": result.usage.get("llm_calls", 0),
        "seconds": seconds,
        "docs_per_s": docs_per_s,
        "cold_start_s": cold_start_s,
        "chunks_per_s": result.chunk_count / seconds,
        **{f"{phase}_s": value for phase, value in result.timings_s.items()},
        **_table.judge(docs_per_s, INGEST_TARGET_DOCS_PER_S if embedder == FAST_EMBEDDER else None),
    }


def _latencies(search, queries) -> tuple[float, float]:
    """p50 and p95 ms of ``search(query)`` over ``queries`` (after one warm-up call)."""
    timings: list[float] = []
    for query in _table.timed(queries, timings):
        search(query)
    p50, p95 = _table.percentile(timings, 50, scale=1000), _table.percentile(timings, 95, scale=1000)
    if p50 is None or p95 is None:
        raise ValueError("no query was timed")
    return p50, p95


def chunk_vectors(n: int, dim: int, *, queries: int, seed: int) -> tuple[Any, Any]:
    """``n`` chunk vectors and ``queries`` question vectors, from the generated corpus via ``HashingEmbedder(dim)``.

    Chunks are ~60-word documents with three facts each; questions are single fact
    sentences from another seed, so they share names with some chunks.
    """
    from memlab.bench.corpus import synthetic_documents
    from memlab.embeddings import HashingEmbedder

    embedder = HashingEmbedder(dim)
    chunks = asyncio.run(embedder.embed(synthetic_documents(n, words=60, facts=3, seed=seed)))
    questions = asyncio.run(embedder.embed(synthetic_documents(queries, words=1, facts=1, seed=seed + 1)))
    return chunks, questions


def vector_rows(n: int, dim: int, *, top_k: int, queries: int, seed: int) -> list[dict[str, Any]]:
    """memlab's ``VectorIndex`` and the raw faiss flat ceiling over the same ``n`` chunk vectors."""
    import faiss

    from memlab.graph import VectorIndex

    vectors, probes = chunk_vectors(n, dim, queries=queries, seed=seed)
    ids = [f"c{i}" for i in range(n)]
    started = time.perf_counter()
    index = VectorIndex(dim, space=f"hashing-{dim}")
    for offset in range(0, n, 10_000):  # in batches, as ingestion adds them
        index.add(ids[offset : offset + 10_000], vectors[offset : offset + 10_000])
    build_s = time.perf_counter() - started
    p50, p95 = _latencies(lambda query: index.search(query, top_k), probes)

    started = time.perf_counter()
    raw = faiss.IndexFlatIP(dim)
    raw.add(vectors)
    raw_build_s = time.perf_counter() - started
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one thread is faiss's fastest single query here (two contend on 2 cores)
    try:
        raw_p50, raw_p95 = _latencies(lambda query: raw.search(query.reshape(1, -1), top_k), probes)
    finally:
        faiss.omp_set_num_threads(threads)

    _, exact = raw.search(probes, top_k)
    found = index.search_many(probes, top_k)
    recall = sum(len({ids[i] for i in truth if i >= 0} & {key for key, _ in got}) for truth, got in zip(exact, found)) / (top_k * len(probes))
    common = {"kind": "vector", "vectors": n, "dim": dim, "top_k": top_k}
    return [
        {**common, "index": "memlab", "mode": index.mode,
         "p50_ms": p50, "p95_ms": p95, "build_s": build_s, "recall_at_k": recall,
         **_table.judge(p50, VECTOR_TARGET_P50_MS, at_most=True)},
        {**common, "index": "raw-faiss-flat", "mode": "exact", "p50_ms": raw_p50, "p95_ms": raw_p95, "build_s": raw_build_s,
         "recall_at_k": 1.0, "target": None, "passed": None},
    ]


def chunk_texts(documents: Sequence[str], n: int, *, max_tokens: int | None) -> list[str]:
    """The first ``n`` chunk texts of ``documents``, chunked as ``remember`` chunks them for an embedder with ``max_tokens``."""
    from memlab.config import GraphConfig
    from memlab.graph import chunk_text

    size, overlap = GraphConfig().chunking(max_tokens)
    out: list[str] = []
    for document in documents:
        if len(out) >= n:
            break
        out.extend(chunk.text for chunk in chunk_text(document, chunk_size=size, overlap=overlap))
    return out[:n]


async def ceiling_rows(texts: Sequence[str], *, label: str, batch_sizes: Sequence[int], repeats: int) -> list[dict[str, Any]]:
    """memlab's ``MiniLMEmbedder`` beside a bare ``onnxruntime.InferenceSession`` on the same model and inputs.

    One row for memlab (``of_ceiling``: its median chunks/s over the best raw
    batch size's, judged against :data:`CEILING_RATIO_TARGET`) and one per raw
    batch size (``best`` marks the ceiling). ``load_s`` is the cold start of
    each (memlab: a fresh, unshared load; raw: the session construction);
    ``imports_s`` the first import of onnxruntime and tokenizers, None when the
    process had already imported them.
    """
    if not texts:
        raise ValueError("no texts to embed")
    imported = "onnxruntime" in sys.modules and "tokenizers" in sys.modules
    started = time.perf_counter()
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    imports_s = None if imported else time.perf_counter() - started
    from memlab.embeddings import MINILM_MAX_TOKENS, MiniLMEmbedder

    embedder = MiniLMEmbedder(shared=False)  # as shipped: default threads and batch size; its own session, so its load is timed
    started = time.perf_counter()
    await embedder.prepare()
    memlab_load_s = time.perf_counter() - started

    started = time.perf_counter()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = embedder.threads
    session = onnxruntime.InferenceSession(str(embedder.model_file), sess_options=options, providers=["CPUExecutionProvider"])
    raw_load_s = time.perf_counter() - started
    tokenizer = Tokenizer.from_file(str(embedder.tokenizer_file))
    tokenizer.no_truncation()  # the file's own settings truncate and pad at 128: first the full lengths
    tokenizer.no_padding()
    full = [len(encoding.ids) for encoding in tokenizer.encode_batch(list(texts))]
    tokenizer.enable_truncation(MINILM_MAX_TOKENS)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    inputs = {item.name for item in session.get_inputs()}
    ordered = sorted(texts, key=len)

    def feed(batch: list[str]) -> dict[str, Any]:
        encodings = tokenizer.encode_batch(batch)
        ids = np.asarray([encoding.ids for encoding in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.asarray([encoding.attention_mask for encoding in encodings], dtype=np.int64)}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return feeds

    feeds = {size: [feed(ordered[start : start + size]) for start in range(0, len(ordered), size)] for size in batch_sizes}

    def raw_pass(size: int) -> Callable[[], Any]:
        async def run() -> None:
            for batch in feeds[size]:
                session.run(["last_hidden_state"], batch)

        return run

    async def memlab_pass() -> None:
        await embedder.embed(texts)

    runners: dict[str, Callable[[], Any]] = {"memlab": memlab_pass, **{f"raw-{size}": raw_pass(size) for size in batch_sizes}}
    await embedder.embed(list(texts[: embedder.batch_size]))  # warm-up batches
    for size in batch_sizes:
        session.run(["last_hidden_state"], feeds[size][0])
    passes: dict[str, list[float]] = {name: [] for name in runners}
    names = list(runners)
    for repeat in range(repeats):
        for name in names[repeat % len(names) :] + names[: repeat % len(names)]:
            started = time.perf_counter()
            await runners[name]()
            passes[name].append(len(texts) / (time.perf_counter() - started))
    median = {name: statistics.median(values) for name, values in passes.items()}
    best = max(batch_sizes, key=lambda size: median[f"raw-{size}"])
    ceiling = median[f"raw-{best}"]
    tokens = [min(count, MINILM_MAX_TOKENS) for count in full]
    common = {
        "kind": "embed",
        "embedder": CEILING_EMBEDDER,
        "label": label,
        "texts": len(texts),
        "words": statistics.fmean(len(text.split()) for text in texts),
        "word_pieces": statistics.fmean(full),
        "tokens": statistics.fmean(tokens),
        "truncated": sum(count > MINILM_MAX_TOKENS for count in full),
        "max_tokens": MINILM_MAX_TOKENS,
        "threads": embedder.threads,
        "repeats": repeats,
        "imports_s": imports_s,
    }

    def spread(name: str) -> dict[str, float]:
        return {"chunks_per_s": median[name], "min_chunks_per_s": min(passes[name]), "max_chunks_per_s": max(passes[name])}

    rows = [
        {**common, "runner": "memlab", "batch_size": embedder.batch_size, "load_s": memlab_load_s, **spread("memlab"),
         "of_ceiling": median["memlab"] / ceiling, "best": None, **_table.judge(median["memlab"] / ceiling, CEILING_RATIO_TARGET)},
    ]
    rows.extend(
        {**common, "runner": "raw-onnxruntime", "batch_size": size, "load_s": raw_load_s, **spread(f"raw-{size}"),
         "of_ceiling": median[f"raw-{size}"] / ceiling, "best": size == best, "target": None, "passed": None}
        for size in batch_sizes
    )
    return rows


async def run_bench_ingest(spec: IngestBenchSpec, progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Every row of the benchmark (ingest per embedder, MiniLM beside its raw ceiling, then vector search per dim)."""
    from memlab.bench.corpus import synthetic_documents

    say = progress or (lambda line: None)
    documents = synthetic_documents(spec.documents, words=spec.words, seed=spec.seed)
    rows = []
    for embedder in spec.embedders:
        say(f"ingest {spec.documents} documents with {embedder}")
        with tempfile.TemporaryDirectory(prefix="memlab-bench-ingest-") as root:
            rows.append(await ingest_run(embedder, documents, root=Path(root)))
    if CEILING_EMBEDDER in spec.embedders and spec.embed_texts > 0:
        from memlab.config import GraphConfig
        from memlab.embeddings import MINILM_MAX_TOKENS

        size, overlap = GraphConfig().chunking(MINILM_MAX_TOKENS)
        for label, texts in (
            (f"{spec.words}-word chunks (whole documents)", documents[: spec.embed_texts]),
            (f"default chunks ({size}/{overlap} estimated tokens)", chunk_texts(documents, spec.embed_texts, max_tokens=MINILM_MAX_TOKENS)),
        ):
            say(f"{CEILING_EMBEDDER} beside a bare onnxruntime session: {len(texts)} {label}")
            rows.extend(await ceiling_rows(texts, label=label, batch_sizes=spec.ceiling_batch_sizes, repeats=spec.embed_repeats))
    for dim in spec.dims:
        say(f"vector search over {spec.vectors:,} vectors of dim {dim}")
        rows.extend(await asyncio.to_thread(vector_rows, spec.vectors, dim, top_k=spec.top_k, queries=spec.queries, seed=spec.seed))
    return rows


def format_ingest_table(rows: Sequence[dict[str, Any]]) -> str:
    """The ingest and vector tables as text."""
    n = _table.number
    ingest = [row for row in rows if row["kind"] == "ingest"]
    vector = [row for row in rows if row["kind"] == "vector"]
    embed = [row for row in rows if row["kind"] == "embed"]
    parts = []
    if ingest:
        parts.append(
            _table.render(
                ["embedder", "cold start s", "docs", "chunks", "seconds", "docs/s", "chunks/s", "extract s", "embed s", "write s", "target", "result"],
                [
                    [
                        row["embedder"], n(row.get("cold_start_s"), 2), n(row["documents"]), n(row["chunks"]), n(row["seconds"], 2), n(row["docs_per_s"], 1),
                        n(row["chunks_per_s"], 1), n(row.get("extract_s"), 2), n(row.get("embed_s"), 2), n(row.get("write_s"), 2),
                        f">= {row['target']:.0f} docs/s" if row["target"] else "", _table.verdict(row),
                    ]
                    for row in ingest
                ],
                right=range(1, 10),
            )
        )
    for label in dict.fromkeys(row["label"] for row in embed):
        group = [row for row in embed if row["label"] == label]
        first = group[0]
        imports = f"; first import of onnxruntime + tokenizers {first['imports_s']:.2f} s" if first["imports_s"] is not None else ""
        parts.append(
            f"{first['embedder']} beside a bare onnxruntime session, {first['texts']} {label} of the ingest corpus "
            f"(mean {first['words']:.0f} words, {first['word_pieces']:.0f} word pieces; {first['truncated']} of {first['texts']} "
            f"over {first['max_tokens']}, truncated), {first['threads']} intra-op threads, "
            f"median of {first['repeats']} passes after a warm-up batch{imports}\n"
            + _table.render(
                ["runner", "batch", "threads", "cold load s", "chunks/s", "min..max", "of ceiling", "target", "result"],
                [
                    [
                        row["runner"] + (" (ceiling)" if row["best"] else ""), row["batch_size"], row["threads"], n(row["load_s"], 2),
                        n(row["chunks_per_s"], 1), f"{row['min_chunks_per_s']:.1f}..{row['max_chunks_per_s']:.1f}",
                        f"{row['of_ceiling']:.2f}x", f">= {row['target']:.1f}x ceiling" if row["target"] else "", _table.verdict(row),
                    ]
                    for row in group
                ],
                right=range(1, 7),
            )
        )
    if vector:
        parts.append(
            _table.render(
                ["index", "mode", "vectors", "dim", "top_k", "p50 ms", "p95 ms", "build s", "recall@k", "target", "result"],
                [
                    [
                        row["index"], row["mode"], n(row["vectors"]), row["dim"], row["top_k"], n(row["p50_ms"], 2), n(row["p95_ms"], 2),
                        n(row["build_s"], 2), n(row["recall_at_k"], 3) if row["recall_at_k"] is not None else "—",
                        f"p50 <= {row['target']:.0f} ms" if row["target"] else "", _table.verdict(row),
                    ]
                    for row in vector
                ],
                right=range(2, 9),
            )
        )
    notes = (
        "ingest: one remember() call per embedder on a fresh data root, offline LLM (memlab/offline, 0 ms latency); "
        "phases as the run measured them.\n"
        "embed: cold load = model load (memlab: sha256 check, tokenizer, session; raw: session only), apart from the timed passes; "
        "ceiling = the raw batch size with the most chunks/s.\n"
        "vector: one query at a time; raw-faiss-flat = plain faiss IndexFlatIP exact search over the same vectors; "
        "recall@k = memlab's top-k overlap with the exact top-k."
    )
    return "\n\n".join(parts + [notes])
