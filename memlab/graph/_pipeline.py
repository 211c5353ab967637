"""Cognify: documents → chunks → LLM extraction → graph elements and their vectors.

The pipeline is split so nothing is written until every fallible step is done:

1. :func:`extract` chunks each document and runs one structured LLM call per
   chunk (:class:`~memlab.graph._extraction.ChunkExtraction`: summary, entities,
   relationships), ``concurrency`` calls at a time, with a progress bar on
   long runs;
2. :func:`build_delta` turns the extractions into nodes, edges and the texts to
   embed (pure);
3. :func:`embed_delta` embeds those texts, one batch per collection (the
   ``tagged_*`` collections reuse the chunk vectors);
4. :func:`apply_delta` writes the delta into a graph and vector store (in
   memory; the caller persists the snapshot).

Element ids are deterministic, so the same document yields the same elements:

* document ``stable_id("document", data_id)``; chunk / summary
  ``stable_id("chunk" | "summary", data_id, str(index))``;
* entity ``stable_id("entity", dataset_id, normalize_entity_name(name))``: one
  node per name per dataset, shared by every document that mentions it;
* edges ``has_chunk`` (document → chunk), ``summarizes`` (summary → chunk),
  ``mentions`` (chunk → entity), and one edge per extracted relationship
  (entity → entity, ``relation`` as extracted); edge ids come from
  (source, relation, target).

Every element records the ``data_id`` that produced it (the provenance map).
Vector collections: ``chunks``, ``summaries``, ``entities`` (entity names) and
``triplets`` (``"source relation target"`` per relationship edge, keyed by edge id);
chunks of documents tagged ``skills`` / ``coding_rules`` also go to
``tagged_skills`` / ``tagged_coding_rules``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memlab.exceptions import LLMError
from memlab.graph._chunking import Chunk, chunk_text
from memlab.graph._documents import Document
from memlab.graph._extraction import ChunkExtraction, extraction_messages, normalize_entity_name, register_offline_extraction
from memlab.graph._graph import KnowledgeGraph, edge_id, stable_id

#: chunks from which a progress bar is shown
PROGRESS_MIN_CHUNKS = 64
#: the vector collections every cognify run fills
COLLECTIONS = ("chunks", "summaries", "entities", "triplets")
#: document tags whose chunks also go to their own collection ``tagged_<tag>`` (skills, coding rules)
COLLECTION_TAGS = ("skills", "coding_rules")


@dataclass(frozen=True)
class Extracted:
    """One document's chunks and the extraction of each."""

    data_id: str
    document: Document
    chunks: tuple[Chunk, ...]
    extractions: tuple[ChunkExtraction, ...]
    tags: tuple[str, ...] = ()


@dataclass
class GraphDelta:
    """What one cognify run adds: nodes and edges with their supporting data id, and texts to embed."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    texts: dict[str, dict[str, str]] = field(default_factory=lambda: {name: {} for name in COLLECTIONS})

    @property
    def chunk_count(self) -> int:
        return len(self.texts["chunks"])

    def tagged(self, tag: str) -> dict[str, str]:
        return self.texts.setdefault(f"tagged_{tag}", {})


async def extract(
    documents: Sequence[tuple[str, Document]],
    llm: Any,
    *,
    chunk_size: int,
    overlap: int,
    concurrency: int,
    tags: Sequence[str] = (),
    progress: bool | None = None,
) -> tuple[list[Extracted], dict[str, int]]:
    """Chunk and extract every document. Returns the extractions and LLM usage.

    ``progress`` None shows a tqdm bar from :data:`PROGRESS_MIN_CHUNKS` chunks.
    The first failing LLM call cancels the rest and its error propagates.
    """
    register_offline_extraction(llm)
    chunked = [(data_id, document, chunk_text(document.text, chunk_size=chunk_size, overlap=overlap)) for data_id, document in documents]
    jobs = [chunk for _, _, chunks in chunked for chunk in chunks]
    usage = {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0}
    results: dict[int, ChunkExtraction] = {}  # job index -> its extraction
    slots = asyncio.Semaphore(concurrency)
    bar = _progress_bar(len(jobs), progress)

    async def one(index: int, chunk: Chunk) -> None:
        async with slots:
            result = await llm.complete(extraction_messages(chunk.text), response_model=ChunkExtraction)
        if result.structured is None:  # complete() with a response_model returns the validated instance
            raise LLMError(f"the LLM returned no ChunkExtraction for chunk {chunk.index}", model=getattr(llm, "model", None))
        results[index] = result.structured
        usage["llm_calls"] += 1
        usage["tokens_in"] += result.tokens_in
        usage["tokens_out"] += result.tokens_out
        if bar is not None:
            bar.update(1)

    try:
        async with asyncio.TaskGroup() as group:
            for index, chunk in enumerate(jobs):
                group.create_task(one(index, chunk))
    except BaseExceptionGroup as group_error:  # the first real error, not the group
        raise group_error.exceptions[0] from None
    finally:
        if bar is not None:
            bar.close()
    out, position = [], 0
    for data_id, document, chunks in chunked:
        extractions = tuple(results[index] for index in range(position, position + len(chunks)))
        position += len(chunks)
        out.append(Extracted(data_id, document, tuple(chunks), extractions, tuple(tags)))
    return out, usage


def _progress_bar(total: int, progress: bool | None):
    if progress is False or (progress is None and total < PROGRESS_MIN_CHUNKS):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="cognify", unit="chunk", leave=False)


def build_delta(dataset_id: str, extracted: Sequence[Extracted]) -> GraphDelta:
    """The nodes, edges and texts the extractions add to dataset ``dataset_id`` (pure)."""
    delta = GraphDelta()
    for item in extracted:
        data_id = item.data_id
        doc_id = stable_id("document", data_id)
        delta.nodes.append(
            {
                "node_id": doc_id,
                "type": "document",
                "name": item.document.name,
                "data_id": data_id,
                "source": item.document.source,
                "tags": list(item.tags),
            }
        )
        for chunk, extraction in zip(item.chunks, item.extractions):
            chunk_id = stable_id("chunk", data_id, str(chunk.index))
            summary_id = stable_id("summary", data_id, str(chunk.index))
            delta.nodes.append(
                {
                    "node_id": chunk_id,
                    "type": "chunk",
                    "name": f"{item.document.name}#{chunk.index}",
                    "text": chunk.text,
                    "data_id": data_id,
                    "chunk_index": chunk.index,
                    "document_id": doc_id,
                }
            )
            delta.edges.append({"source_id": doc_id, "relation": "has_chunk", "target_id": chunk_id, "data_id": data_id})
            delta.texts["chunks"][chunk_id] = chunk.text
            for tag in item.tags:
                if tag in COLLECTION_TAGS:
                    delta.tagged(tag)[chunk_id] = chunk.text
            if extraction.summary.strip():
                delta.nodes.append(
                    {"node_id": summary_id, "type": "summary", "name": f"summary of {item.document.name}#{chunk.index}",
                     "text": extraction.summary, "data_id": data_id, "chunk_id": chunk_id}
                )
                delta.edges.append({"source_id": summary_id, "relation": "summarizes", "target_id": chunk_id, "data_id": data_id})
                delta.texts["summaries"][summary_id] = extraction.summary
            names: dict[str, str] = {}
            for entity in extraction.entities:
                key = normalize_entity_name(entity.name)
                entity_id = stable_id("entity", dataset_id, key)
                names[key] = entity_id
                delta.nodes.append(
                    {"node_id": entity_id, "type": "entity", "name": entity.name, "text": entity.name,
                     "data_id": data_id, "entity_type": entity.type}
                )
                delta.edges.append({"source_id": chunk_id, "relation": "mentions", "target_id": entity_id, "data_id": data_id})
                delta.texts["entities"][entity_id] = entity.name
            for relation in extraction.relationships:
                source = names[normalize_entity_name(relation.source)]
                target = names[normalize_entity_name(relation.target)]
                text = f"{relation.source} {relation.relation.replace('_', ' ')} {relation.target}"
                delta.edges.append(
                    {"source_id": source, "relation": relation.relation, "target_id": target, "data_id": data_id,
                     "text": text, "chunk_id": chunk_id}
                )
                delta.texts["triplets"][edge_id(source, relation.relation, target)] = text
    return delta


async def embed_delta(delta: GraphDelta, embedder: Any) -> dict[str, tuple[list[str], Any]]:
    """``collection -> (ids, vectors)`` for every text of the delta; a ``tagged_*`` collection gets the rows of ``chunks``."""
    out: dict[str, tuple[list[str], Any]] = {}
    for name, texts in delta.texts.items():
        if texts:
            ids = list(texts)
            tagged = name.startswith("tagged_")
            out[name] = (ids, _rows(*out["chunks"], ids) if tagged else await embedder.embed([texts[key] for key in ids]))
    return out


def _rows(ids: list[str], vectors: Any, wanted: list[str]) -> Any:
    """The rows of ``vectors`` (one per id of ``ids``) for the ids ``wanted``."""
    row = {key: index for index, key in enumerate(ids)}
    return vectors[[row[key] for key in wanted]]


def apply_delta(graph: KnowledgeGraph, vectors: Any, delta: GraphDelta, embedded: dict[str, tuple[list[str], Any]]) -> tuple[set[str], set[str]]:
    """Write the delta into ``graph`` and ``vectors``; returns the node and edge ids it touched."""
    node_ids, edge_ids = set(), set()
    for node in delta.nodes:
        attrs = dict(node)
        node_id = attrs.pop("node_id")
        graph.add_node(node_id, type=attrs.pop("type"), name=attrs.pop("name"), text=attrs.pop("text", ""),
                       data_id=attrs.pop("data_id"), **{k: v for k, v in attrs.items() if v is not None})
        node_ids.add(node_id)
    for edge in delta.edges:
        attrs = dict(edge)
        new_id = graph.add_edge(attrs.pop("source_id"), attrs.pop("relation"), attrs.pop("target_id"),
                                data_id=attrs.pop("data_id"), text=attrs.pop("text", ""), **attrs)
        edge_ids.add(new_id)
    for name, (ids, matrix) in embedded.items():
        vectors.collection(name).add(ids, matrix)
    return node_ids, edge_ids
