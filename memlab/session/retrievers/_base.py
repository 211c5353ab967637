"""The ``SessionRetriever`` contract: how recall ranks one session's turns.

A session retriever is a small strategy (``SESSION_RETRIEVER`` /
``StackConfig.session.retriever``) with two parts:

* :class:`SessionIndex` — the per-(user, session) state: the session's live turns
  in chronological order and whatever the retriever derives from them (postings,
  turn vectors). It is kept current from the cache's change feed
  (:meth:`memlab.cache.CacheBackend.read_qa_log`): :meth:`SessionIndex.apply`
  appends the turns a :class:`~memlab.cache.QALog` adds, or rebuilds from the whole
  session when the log says ``reset`` (a turn was edited or deleted, possibly by
  another process). ``apply`` is synchronous and cheap; anything expensive (an
  embedding) is deferred to the search that first needs it.
* :class:`SessionRetriever` — the shared, stateless-between-sessions strategy:
  :meth:`~SessionRetriever.new_index` makes an empty index and
  :meth:`~SessionRetriever.search` ranks an index's turns for a query.

Contract (every implementation; ``tests/session/test_session_retrievers.py``):

* ``await search(index, query, top_k)`` returns at most ``top_k`` pairs
  ``(SessionQAEntry, score)``, best first; a higher score is better and every
  returned score is ``> 0`` (a retriever with a similarity floor drops turns
  below it), so a session that has nothing to do with the query returns ``[]``
  and recall's session-first short-circuit falls through to the graph.
* Equal scores keep chronological order (oldest first). Each turn is returned at
  most once. A query without tokens, an empty session or ``top_k < 1`` gives ``[]``.
* ``search`` reads a snapshot of the index taken before its first ``await``: a
  concurrent ``apply`` (another coroutine refreshing the same index) never mixes
  two states into one result.
* The score's meaning is the retriever's: the number of shared query tokens
  (``keyword``), the BM25 score (``bm25``), the cosine similarity (``vector``),
  the fused score (``hybrid``). :func:`matched_tokens` is the shared-token count
  of any turn, whatever ranked it (recall's ``matched_tokens``).
* Failures: the index never raises on ``apply``; ``search`` raises only what its
  embedder raises (:class:`~memlab.exceptions.EmbeddingError`).

:class:`~memlab.session.SessionManager` owns the indexes (one per (user, session),
LRU-bounded) and the cursor protocol; a retriever never reads the cache itself.
"""

from __future__ import annotations

import abc
import heapq
from collections.abc import Hashable, Iterable
from typing import Any, ClassVar, Generic, TypeVar

from memlab.cache import QALog
from memlab.models import SessionQAEntry
from memlab.text import session_tokens

__all__ = [
    "SessionIndex",
    "SessionRetriever",
    "best_first",
    "entry_text",
    "entry_tokens",
    "matched_tokens",
]

#: one ranked result: the turn and its score (higher is better)
Hit = tuple[SessionQAEntry, float]


def entry_text(entry: SessionQAEntry) -> str:
    """The text a turn is matched on: ``question + " " + context + " " + answer`` (SPEC §9.2)."""
    return f"{entry.question} {entry.context} {entry.answer}"


def entry_tokens(entry: SessionQAEntry) -> set[str]:
    """Tokens of a turn: question, context and answer together (:func:`memlab.session.tokenize`)."""
    return session_tokens(entry_text(entry))


def matched_tokens(query: str | set[str], entry: SessionQAEntry) -> int:
    """How many distinct query tokens the turn shares (``query`` as text, or as its token set)."""
    tokens = session_tokens(query) if isinstance(query, str) else query
    return len(tokens & entry_tokens(entry))


def best_first(scored: Iterable[tuple[int, float]], top_k: int) -> list[tuple[int, float]]:
    """The ``top_k`` ``(position, score)`` pairs with the highest score; equal scores lowest position first."""
    if top_k < 1:
        return []
    return heapq.nsmallest(top_k, scored, key=lambda item: (-item[1], item[0]))


class SessionIndex:
    """One session's live turns, oldest first, kept current from the cache's :class:`~memlab.cache.QALog`.

    ``cursor`` is the log position the index reflects (None: nothing read yet).
    Subclasses derive their structures in :meth:`_add` (one new turn at
    ``position``) and drop them in :meth:`_clear` (a reset); both run inside
    :meth:`apply`, synchronously.
    """

    def __init__(self) -> None:
        self.cursor: Hashable | None = None
        self.entries: list[SessionQAEntry] = []

    def apply(self, log: QALog) -> None:
        """Bring the index to ``log.cursor``: drop everything on a reset, then add the log's turns."""
        if log.reset:
            self.entries = []
            self._clear()
        for entry in log.entries:
            position = len(self.entries)
            self.entries.append(entry)
            self._add(position, entry)
        self.cursor = log.cursor

    def _clear(self) -> None:
        """Forget what was derived from the turns (the session is re-delivered whole next)."""

    def _add(self, position: int, entry: SessionQAEntry) -> None:
        """Derive what a new turn at ``position`` contributes."""


IndexT = TypeVar("IndexT", bound=SessionIndex)


class SessionRetriever(abc.ABC, Generic[IndexT]):
    """Ranks one session's turns for a query (see the module docstring for the contract).

    ``name`` is the config name (``SESSION_RETRIEVER``); ``needs_embedder`` tells
    :func:`memlab.config.build_session_retriever` to hand the stack's embedder to
    the constructor. One instance serves every session of a manager; it is safe to
    share across tasks.
    """

    name: ClassVar[str]
    needs_embedder: ClassVar[bool] = False

    @abc.abstractmethod
    def new_index(self) -> IndexT:
        """An empty index for one (user, session)."""

    @abc.abstractmethod
    async def search(self, index: IndexT, query: str, top_k: int) -> list[Hit]:
        """Up to ``top_k`` ``(turn, score)`` of ``index``, best first, ties oldest first; scores > 0."""

    @classmethod
    def from_config(cls, config: Any, *, embedder: Any = None) -> "SessionRetriever":
        """This retriever as a :class:`~memlab.config.StackConfig` describes it (``SESSION_RETRIEVER=<name>``).

        ``embedder`` is the stack's embedder (or a zero-argument callable returning
        it); a retriever that embeds passes it through :meth:`config_embedder`.
        """
        return cls()

    @staticmethod
    def config_embedder(config: Any, embedder: Any = None) -> Any:
        """``embedder``, or when None the one the config names (:func:`memlab.config.build_embedder`)."""
        if embedder is not None:
            return embedder
        from memlab.config import build_embedder

        return build_embedder(config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
