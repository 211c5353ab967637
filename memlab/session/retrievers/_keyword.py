"""``keyword`` (the default): cognee's session keyword matching (SPEC §9.2), over an incremental inverted index.

A turn's score is the number of distinct query tokens (:func:`memlab.session.tokenize`:
lower-cased ``\\w+`` runs of length >= 2) it contains in ``question + context +
answer``; turns scoring 0 are dropped; equal scores keep chronological order. The
index touches only the posting lists of the query's tokens, and returns exactly
what scanning every turn would.
"""

from __future__ import annotations

from collections import Counter

from memlab.models import SessionQAEntry
from memlab.session.retrievers._base import SessionIndex, SessionRetriever, best_first, entry_tokens
from memlab.text import session_tokens

__all__ = ["KeywordIndex", "KeywordSessionRetriever"]


class KeywordIndex(SessionIndex):
    """Inverted index over one session's turns, kept current from the cache's :class:`~memlab.cache.QALog`.

    ``search`` ranks turns by the number of query tokens they contain (> 0 only),
    ties oldest first, exactly like scanning every turn would, but touches only
    the posting lists of the query's tokens.
    """

    def __init__(self) -> None:
        super().__init__()
        self._postings: dict[str, list[int]] = {}

    def _clear(self) -> None:
        self._postings = {}

    def _add(self, position: int, entry: SessionQAEntry) -> None:
        for token in entry_tokens(entry):
            self._postings.setdefault(token, []).append(position)

    def search(self, query: str, top_k: int) -> list[tuple[SessionQAEntry, int]]:
        """Up to ``top_k`` ``(entry, matched token count)``, best first, ties oldest first."""
        scores: Counter[int] = Counter()
        for token in session_tokens(query):
            scores.update(self._postings.get(token, ()))
        return [(self.entries[position], int(score)) for position, score in best_first(scores.items(), top_k)]


class KeywordSessionRetriever(SessionRetriever[KeywordIndex]):
    """``keyword``: turns ranked by how many distinct query tokens they share (cognee parity); score = that count."""

    name = "keyword"

    def new_index(self) -> KeywordIndex:
        return KeywordIndex()

    async def search(self, index: KeywordIndex, query: str, top_k: int) -> list[tuple[SessionQAEntry, float]]:
        return list(index.search(query, top_k))
