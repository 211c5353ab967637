"""CHUNKS_LEXICAL: keyword search over chunk texts with BM25.

* **Tokens** (:func:`lexical_tokens`): the maximal runs of Unicode word
  characters (``\\w+``: letters, digits, ``_``) of the lowercased text; no
  stemming, no stop words (IDF discounts common words). ``"Wi-Fi's"`` gives
  ``wi``, ``fi``, ``s``.
* **BM25** per dataset (its own document count and average chunk length), over
  the query's distinct tokens: ``sum idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b
  + b * len / avglen))`` with ``k1 = 1.2``, ``b = 0.75`` and the non-negative
  ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``. A chunk matching no query
  token is not returned.
* **Exact phrase**: a query that is one double-quoted phrase as a whole
  (``"..."``, the routing table's ``quoted_phrase`` rule) keeps only chunks
  containing the phrase, case-insensitively, with runs of whitespace counted as
  one space; they rank by the BM25 of the phrase's tokens.
* **Score** (a distance, lower is better): ``1 / (1 + bm25)``, in ``(0, 1]``.
  Ties keep the graph's chunk order (document order), datasets in scope order.
* **One chunk per document** (``scope.distinct="data_id"``): walking down the
  ranking, a chunk whose document an earlier chunk already showed is skipped,
  until ``top_k`` documents are found or the matching chunks run out.

The inverted index is built once per dataset snapshot and reused until a
remember / forget replaces it (:meth:`memlab.graph.PermanentMemory.derived`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from itertools import islice
from dataclasses import dataclass
from typing import Any

from memlab.text import lexical_tokens
from memlab.retrievers._base import RetrievalScope, Retriever, SearchResultItem, element_item, one_per_source
from memlab.retrievers._chunks import check_request
from memlab.retrievers._routing import _QUOTED
from memlab.retrievers._types import SearchType

__all__ = ["BM25_B", "BM25_K1", "LexicalChunksRetriever", "lexical_tokens"]

BM25_K1 = 1.2
BM25_B = 0.75



def _folded(text: str) -> str:
    return " ".join(text.lower().split())


@dataclass(frozen=True)
class _Index:
    """One snapshot's chunks: ids and folded texts by position, postings ``term -> (ascending positions, BM25 tf weights)``."""

    ids: list[str]
    folded: list[str]
    postings: dict[str, tuple[Any, Any]]
    idf: dict[str, float]


def _build(graph: Any) -> _Index:
    import numpy as np

    ids, folded, counts = [], [], []
    for node_id, data in graph.nx.nodes(data=True):
        if data["type"] == "chunk":
            ids.append(node_id)
            folded.append(_folded(data["text"]))
            counts.append(Counter(lexical_tokens(data["text"])))
    lengths = [sum(count.values()) for count in counts]
    average = (sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0
    rows: dict[str, tuple[list[int], list[float]]] = {}
    for position, (count, length) in enumerate(zip(counts, lengths)):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        for term, tf in count.items():
            positions, weights = rows.setdefault(term, ([], []))
            positions.append(position)
            weights.append(tf * (BM25_K1 + 1) / (tf + norm))
    total = len(ids)
    postings = {term: (np.asarray(positions, dtype=np.int64), np.asarray(weights)) for term, (positions, weights) in rows.items()}
    idf = {term: math.log(1 + (total - len(positions) + 0.5) / (len(positions) + 0.5)) for term, (positions, _) in rows.items()}
    return _Index(ids, folded, postings, idf)


def _holds(positions: Any, position: int) -> bool:
    """Whether the sorted ``positions`` array holds ``position``."""
    at = positions.searchsorted(position)
    return bool(at < len(positions) and positions[at] == position)


def _ranked(index: _Index, terms: list[str], phrase: str | None) -> Iterator[tuple[int, float, list[str]]]:
    """``(position, bm25, matched terms)`` of the matching chunks, best first (lazily: stop when you have enough)."""
    import numpy as np

    present = [term for term in terms if term in index.postings]
    if not present:
        return
    scores = np.zeros(len(index.ids))
    for term in present:
        positions, weights = index.postings[term]
        scores[positions] += index.idf[term] * weights
    matched = np.flatnonzero(scores > 0)
    order = matched[np.lexsort((matched, -scores[matched]))]
    for position in order.tolist():
        text = index.folded[position]
        if phrase is not None and phrase not in text:
            continue
        yield position, float(scores[position]), [term for term in present if _holds(index.postings[term][0], position)]


class LexicalChunksRetriever(Retriever):
    """``CHUNKS_LEXICAL``: chunks ranked by BM25 of the query's words; a whole quoted query must match as a phrase."""

    search_type = SearchType.CHUNKS_LEXICAL
    hybrid_retry_when_empty = True
    distinct_sources = True

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        if not check_request(query, scope):
            return []
        text = query.strip()
        phrase = _folded(text[1:-1]) if _QUOTED.fullmatch(text) else None
        terms = list(dict.fromkeys(lexical_tokens(text)))
        items: list[SearchResultItem] = []
        for dataset_id in scope.dataset_ids:
            graph, index = await scope.memory.derived(dataset_id, "lexical", _build)
            candidates = (
                item
                for position, bm25, matched in _ranked(index, terms, phrase)
                if (item := element_item(graph, dataset_id, index.ids[position], 1 / (1 + bm25), bm25=bm25, matched_terms=matched))
                is not None
            )
            found = one_per_source(candidates, scope.top_k) if scope.distinct is not None else list(islice(candidates, scope.top_k))
            items.extend(found)
        items.sort(key=lambda item: item.score)
        return one_per_source(items, scope.top_k) if scope.distinct is not None else items[: scope.top_k]
