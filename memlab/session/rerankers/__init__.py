"""Session rerankers: a second pass over the top of any session retriever's ranking (``SESSION_RERANKER``; none by default).

* :class:`MMRSessionReranker` (``mmr``): maximal marginal relevance, near-duplicate
  turns pushed down;
* :class:`RecencySessionReranker` (``recency``): a prior for the newer turns.

The contract is :class:`SessionReranker` (``_base.py``; a cross-encoder a user brings is
a subclass, its docstring shows one); :mod:`memlab.config` maps the names to these
classes (``SESSION_RERANKERS``, ``build_session_reranker``) and
:class:`~memlab.session.SessionManager` applies the reranker to
``max(top_k, top_n)`` of the retriever's turns.
"""

from __future__ import annotations

from memlab.session.rerankers._base import DEFAULT_TOP_N, MAX_TOP_N, SessionReranker
from memlab.session.rerankers._mmr import MMR_DIVERSITY, MMRSessionReranker, jaccard
from memlab.session.rerankers._recency import RECENCY_WEIGHT, RecencySessionReranker

__all__ = [
    "DEFAULT_TOP_N",
    "MAX_TOP_N",
    "MMRSessionReranker",
    "MMR_DIVERSITY",
    "RECENCY_WEIGHT",
    "RecencySessionReranker",
    "SessionReranker",
    "jaccard",
]
