"""Session rerankers: a second pass over the top of any session retriever's ranking (``SESSION_RERANKER``; none by default).

* :class:`MMRSessionReranker` (``mmr``): maximal marginal relevance, near-duplicate
  turns pushed down (measured in its module docstring).

A recency prior was measured too and is not shipped: ``0.8 * relevance + 0.2 * recency``
over hybrid's top 20 lost 0.031 [0.005, 0.058] session recall@5 on the synthetic benchmark
(seed 0, paired bootstrap, p = 0.017) and gained in no category, knowledge updates
included (their evidence is the old statement and the new one). Subclass
:class:`SessionReranker` to try one on your data.

The contract is :class:`SessionReranker` (``_base.py``; a cross-encoder a user brings is
a subclass, its docstring shows one); :mod:`memlab.config` maps the names to these
classes (``SESSION_RERANKERS``, ``build_session_reranker``) and
:class:`~memlab.session.SessionManager` applies the reranker to
``max(top_k, top_n)`` of the retriever's turns.
"""

from __future__ import annotations

from memlab.session.rerankers._base import DEFAULT_TOP_N, MAX_TOP_N, SessionReranker
from memlab.session.rerankers._mmr import MMR_DIVERSITY, MMRSessionReranker, jaccard

__all__ = [
    "DEFAULT_TOP_N",
    "MAX_TOP_N",
    "MMRSessionReranker",
    "MMR_DIVERSITY",
    "SessionReranker",
    "jaccard",
]
