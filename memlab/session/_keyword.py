"""Session keyword recall, served from an incremental inverted index."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Hashable

from memlab.cache import QALog
from memlab.models import SessionQAEntry
from memlab.text import session_tokens



def entry_tokens(entry: SessionQAEntry) -> set[str]:
    """Tokens of a turn: question, context and answer together."""
    return session_tokens(f"{entry.question} {entry.context} {entry.answer}")


class KeywordIndex:
    """Inverted index over one session's turns, kept current from the cache's :class:`QALog`.

    ``search`` ranks turns by the number of query tokens they contain (> 0 only),
    ties oldest first, exactly like scanning every turn would, but touches only
    the posting lists of the query's tokens.
    """

    def __init__(self) -> None:
        self.cursor: Hashable | None = None
        self.entries: list[SessionQAEntry] = []
        self._postings: dict[str, list[int]] = {}

    def apply(self, log: QALog) -> None:
        if log.reset:
            self.entries = []
            self._postings = {}
        for entry in log.entries:
            position = len(self.entries)
            self.entries.append(entry)
            for token in entry_tokens(entry):
                self._postings.setdefault(token, []).append(position)
        self.cursor = log.cursor

    def search(self, query: str, top_k: int) -> list[tuple[SessionQAEntry, int]]:
        """Up to ``top_k`` ``(entry, matched token count)``, best first, ties oldest first."""
        scores: Counter[int] = Counter()
        for token in session_tokens(query):
            scores.update(self._postings.get(token, ()))
        best = heapq.nsmallest(top_k, scores.items(), key=lambda item: (-item[1], item[0]))
        return [(self.entries[position], score) for position, score in best]
