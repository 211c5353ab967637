"""``bm25``: Okapi BM25 over a session's turns, from an incremental index.

* **Text**: ``question + " " + context + " " + answer`` of each turn (as ``keyword``).
* **Tokens**: :func:`memlab.text.lexical_tokens` (lower-cased ``\\w+`` runs, repeats
  kept: term frequency counts), keeping only tokens of length >= 2, the session
  tokenizer's rule. So BM25 matches on exactly the token set ``keyword`` counts
  (every BM25 hit has ``matched_tokens >= 1``), and one-letter tokens (``a``,
  ``I``, the ``s`` of ``Alice's``) do not make every session match.
* **Score**, over the query's distinct tokens, with the statistics of the session
  at query time (turn count ``N``, each term's turn count ``df``, average turn
  length): ``sum idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen))``
  with ``k1 = BM25_K1 = 1.2``, ``b = BM25_B = 0.75`` (the usual Okapi values, as
  ``CHUNKS_LEXICAL`` uses) and the non-negative ``idf(t) = ln(1 + (N - df + 0.5) /
  (df + 0.5))``. A turn sharing no query token scores 0 and is not returned; equal
  scores keep chronological order.

An append updates the postings in place (term -> ``(position, tf)``) and the
length total; the collection statistics are read when a query runs, so an
incremental index scores exactly like one built from scratch.
"""

from __future__ import annotations

import math
from collections import Counter

from memlab.models import SessionQAEntry
from memlab.session.retrievers._base import SessionIndex, SessionRetriever, best_first, entry_text
from memlab.text import lexical_tokens

__all__ = ["BM25_B", "BM25_K1", "BM25Index", "BM25SessionRetriever", "bm25_tokens"]

#: term-frequency saturation
BM25_K1 = 1.2
#: length normalisation (0: none, 1: full)
BM25_B = 0.75


def bm25_tokens(text: str) -> list[str]:
    """The BM25 terms of ``text``: :func:`~memlab.text.lexical_tokens` of length >= 2, in order, repeats kept."""
    return [token for token in lexical_tokens(text) if len(token) >= 2]


class BM25Index(SessionIndex):
    """Postings ``term -> [(position, tf)]`` and turn lengths of one session."""

    def __init__(self) -> None:
        super().__init__()
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._lengths: list[int] = []
        self._total = 0

    def _clear(self) -> None:
        self._postings = {}
        self._lengths = []
        self._total = 0

    def _add(self, position: int, entry: SessionQAEntry) -> None:
        counts = Counter(bm25_tokens(entry_text(entry)))
        length = sum(counts.values())
        self._lengths.append(length)
        self._total += length
        for term, tf in counts.items():
            self._postings.setdefault(term, []).append((position, tf))

    def scores(self, query: str, k1: float = BM25_K1, b: float = BM25_B) -> dict[int, float]:
        """``position -> BM25`` of every turn sharing a query term (all > 0)."""
        total = len(self._lengths)
        average = self._total / total if total and self._total else 1.0
        scores: dict[int, float] = {}
        for term in dict.fromkeys(bm25_tokens(query)):
            postings = self._postings.get(term)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
            for position, tf in postings:
                norm = k1 * (1 - b + b * self._lengths[position] / average)
                scores[position] = scores.get(position, 0.0) + idf * tf * (k1 + 1) / (tf + norm)
        return scores


class BM25SessionRetriever(SessionRetriever[BM25Index]):
    """``bm25``: turns ranked by Okapi BM25 of the query's words; score = the BM25 score (``k1``, ``b`` as given)."""

    name = "bm25"

    def __init__(self, *, k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.k1 = k1
        self.b = b

    def new_index(self) -> BM25Index:
        return BM25Index()

    async def search(self, index: BM25Index, query: str, top_k: int) -> list[tuple[SessionQAEntry, float]]:
        entries = index.entries
        return [(entries[position], score) for position, score in best_first(index.scores(query, self.k1, self.b).items(), top_k)]

    def __repr__(self) -> str:
        return f"BM25SessionRetriever(k1={self.k1}, b={self.b})"
