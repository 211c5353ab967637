"""The ``SessionReranker`` contract: a second look at the top of a session retriever's ranking.

A session reranker (``SESSION_RERANKER`` / ``StackConfig.session.reranker``; none by
default) runs after the session retriever, on any retriever: the
:class:`~memlab.session.SessionManager` asks the retriever for
``candidates(top_k) = max(top_k, top_n)`` turns, hands them to :meth:`SessionReranker.rerank`
and returns what that returns. It is where a model too slow to score every turn of a
session (a cross-encoder) earns its cost: it sees only the retriever's ``top_n``.

Contract (every implementation; the shipped suite is
:class:`memlab.testing.SessionRerankerSuite`):

* ``await rerank(query, hits, top_k)`` takes the retriever's ``(turn, score)`` pairs, best
  first, and returns at most ``top_k`` pairs **of those turns** (the same
  :class:`~memlab.models.SessionQAEntry` objects; none added, each at most once, any may
  be dropped), best first, with the reranker's own scores: every score ``> 0`` and
  non-increasing, equal scores in the order the retriever gave. ``hits`` empty or
  ``top_k < 1`` gives ``[]``.
* It does not mutate ``hits`` or the turns, keeps no state between calls that changes a
  result (one instance serves every session of a manager, concurrently), and raises only
  what its model raises (a remote cross-encoder's error propagates, as a retriever's
  embedder error does).
* The score's meaning is the reranker's (documented by each). :func:`memlab.session.matched_tokens`
  still gives any turn's shared-token count, whatever ranked it.

Template method: the public :meth:`SessionReranker.rerank` handles the empty cases and the
``top_k`` cut; an implementation writes :meth:`SessionReranker._rerank`, which orders all
of the (non-empty) candidates it is given.

Bringing a cross-encoder (no weights ship with memlab)::

    class CrossEncoderReranker(SessionReranker):
        name = "cross-encoder"

        def __init__(self, model, *, top_n=DEFAULT_TOP_N):
            super().__init__(top_n=top_n)
            self.model = model  # e.g. sentence_transformers.CrossEncoder("cross-encoder/ms-marco-MiniLM-L-6-v2")

        async def _rerank(self, query, hits):
            texts = [(query, f"{entry.question} {entry.answer}") for entry, _ in hits]
            logits = await asyncio.to_thread(self.model.predict, texts)  # off the event loop
            scored = [(entry, 1 / (1 + math.exp(-float(x)))) for (entry, _), x in zip(hits, logits)]  # > 0
            return sorted(scored, key=lambda pair: -pair[1])  # stable: ties keep the retriever's order

    stack = MemoryStack(config, session_reranker=CrossEncoderReranker(model))

Check it with ``memlab.testing.check(CrossEncoderReranker(model))`` or a
``SessionRerankerSuite`` subclass; register a name with the ``memlab.session_rerankers``
entry-point group (:mod:`memlab.plugins`), whose class builds itself with
``from_config(config)``.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

from memlab.exceptions import ValidationError
from memlab.models import SessionQAEntry

__all__ = ["DEFAULT_TOP_N", "MAX_TOP_N", "Hit", "SessionReranker"]

#: the retriever's turns a reranker looks at by default (``session.rerank_top_n``, ``SESSION_RERANK_TOP_N``)
DEFAULT_TOP_N = 20
#: the most it may look at
MAX_TOP_N = 10_000

#: one ranked result: the turn and its score (higher is better)
Hit = tuple[SessionQAEntry, float]


class SessionReranker(abc.ABC):
    """Reorders the top ``top_n`` turns of any session retriever's ranking (module docstring: the contract).

    ``name`` is the config name (``SESSION_RERANKER``). Subclasses implement
    :meth:`_rerank`; the base handles the empty cases and the ``top_k`` cut.
    """

    name: ClassVar[str]

    def __init__(self, *, top_n: int = DEFAULT_TOP_N) -> None:
        if isinstance(top_n, bool) or not isinstance(top_n, int) or not 1 <= top_n <= MAX_TOP_N:
            raise ValidationError(f"{type(self).__name__}: top_n must be an integer from 1 to {MAX_TOP_N:,}, got {top_n!r}")
        self.top_n = top_n

    def candidates(self, top_k: int) -> int:
        """How many of the retriever's turns to rerank for a search of ``top_k``: ``max(top_k, top_n)``."""
        return max(top_k, self.top_n)

    async def rerank(self, query: str, hits: Sequence[Hit], top_k: int) -> list[Hit]:
        """At most ``top_k`` of ``hits``, reordered and rescored, best first (module docstring)."""
        if top_k < 1 or not hits:
            return []
        return list(await self._rerank(query, list(hits)))[:top_k]

    @abc.abstractmethod
    async def _rerank(self, query: str, hits: list[Hit]) -> list[Hit]:
        """All of ``hits`` (non-empty, the retriever's order) that survive, best first, with this reranker's scores (> 0)."""

    @classmethod
    def from_config(cls, config: Any) -> "SessionReranker":
        """This reranker as a :class:`~memlab.config.StackConfig` describes it: ``top_n = session.rerank_top_n``."""
        return cls(top_n=config.session.rerank_top_n)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(top_n={self.top_n})"
