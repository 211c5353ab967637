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

A query is scored with numpy over the query terms' postings (each term's postings
as arrays, extended by the turns appended since the last query), with the same float
operations in the same order as the formula above, term by term: the scores are
identical to a Python loop over the postings, and so are the ties. Measured on one
10,000-turn session (``memlab bench quality --scale``): a common word such as
``my`` is in about half the turns, and the Python loop took ~3.3 ms per query.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from memlab.models import SessionQAEntry
from memlab.session.retrievers._base import SessionIndex, SessionRetriever, entry_text
from memlab.text import lexical_tokens

__all__ = ["BM25_B", "BM25_K1", "BM25Index", "BM25SessionRetriever", "bm25_tokens"]

#: term-frequency saturation
BM25_K1 = 1.2
#: length normalisation (0: none, 1: full)
BM25_B = 0.75


def bm25_tokens(text: str) -> list[str]:
    """The BM25 terms of ``text``: :func:`~memlab.text.lexical_tokens` of length >= 2, in order, repeats kept."""
    return [token for token in lexical_tokens(text) if len(token) >= 2]


def _extend(array: Any, items: list[Any]) -> Any:
    """``array`` (a numpy copy of a prefix of ``items``, or None) extended by the items past it.

    ``items`` only grow between resets (which drop the copy), so a query after an
    append converts only the appended items, not the whole list again.
    """
    import numpy as np

    done = 0 if array is None else len(array)
    if done == len(items):
        return array
    added = np.asarray(items[done:], dtype=np.int64)
    return added if array is None else np.concatenate([array, added])


class BM25Index(SessionIndex):
    """Postings ``term -> [(position, tf)]`` and turn lengths of one session."""

    def __init__(self) -> None:
        super().__init__()
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._lengths: list[int] = []
        self._total = 0
        #: numpy copies of the postings (term -> int64 rows ``(position, tf)``) and lengths, extended on the next query after an append
        self._arrays: dict[str, Any] = {}
        self._length_array: Any = None

    def _clear(self) -> None:
        self._postings = {}
        self._lengths = []
        self._total = 0
        self._arrays = {}
        self._length_array = None

    def _add(self, position: int, entry: SessionQAEntry) -> None:
        counts = Counter(bm25_tokens(entry_text(entry)))
        length = sum(counts.values())
        self._lengths.append(length)
        self._total += length
        for term, tf in counts.items():
            self._postings.setdefault(term, []).append((position, tf))

    def _scored(self, query: str, k1: float, b: float) -> tuple[Any, Any]:
        """``(positions, scores)`` numpy arrays of every turn sharing a query term, positions ascending."""
        import numpy as np

        total = len(self._lengths)
        average = self._total / total if total and self._total else 1.0
        self._length_array = _extend(self._length_array, self._lengths)
        scores = np.zeros(total, dtype=np.float64)
        touched = np.zeros(total, dtype=bool)
        for term in dict.fromkeys(bm25_tokens(query)):
            postings = self._postings.get(term)
            if not postings:
                continue
            pairs = self._arrays[term] = _extend(self._arrays.get(term), postings)
            positions, tf = pairs[:, 0], pairs[:, 1]
            df = len(postings)
            idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
            # the formula of the module docstring, evaluated in the same order as in Python floats
            norm = k1 * (1 - b + b * self._length_array[positions] / average)
            scores[positions] += idf * tf * (k1 + 1) / (tf + norm)
            touched[positions] = True
        found = np.flatnonzero(touched)
        return found, scores[found]

    def arrays(self, query: str, k1: float = BM25_K1, b: float = BM25_B) -> tuple[Any, Any]:
        """``(positions, scores)``: numpy arrays of every turn sharing a query term (positions ascending, scores > 0)."""
        return self._scored(query, k1, b)

    def scores(self, query: str, k1: float = BM25_K1, b: float = BM25_B) -> dict[int, float]:
        """``position -> BM25`` of every turn sharing a query term (all > 0)."""
        positions, scores = self._scored(query, k1, b)
        return dict(zip(positions.tolist(), scores.tolist()))

    def top(self, query: str, top_k: int, k1: float = BM25_K1, b: float = BM25_B) -> list[tuple[int, float]]:
        """The ``top_k`` ``(position, score)`` of :meth:`scores`, best first, equal scores lowest position first (as :func:`best_first`)."""
        import numpy as np

        if top_k < 1:
            return []
        positions, scores = self._scored(query, k1, b)
        if len(positions) > top_k:  # keep the candidates at or above the top_k-th score (ties at the cut included)
            cut = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
            keep = scores >= cut
            positions, scores = positions[keep], scores[keep]
        order = np.lexsort((positions, -scores))[:top_k]
        return list(zip(positions[order].tolist(), scores[order].tolist()))


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
        return [(entries[position], score) for position, score in index.top(query, top_k, self.k1, self.b)]

    def __repr__(self) -> str:
        return f"BM25SessionRetriever(k1={self.k1}, b={self.b})"
