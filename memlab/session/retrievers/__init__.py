"""Session retrievers: how recall's session lane ranks a session's turns (``SESSION_RETRIEVER``).

* :class:`KeywordSessionRetriever` (``keyword``, the default): cognee's rule, the
  number of distinct query tokens a turn shares (SPEC §9.2);
* :class:`BM25SessionRetriever` (``bm25``): Okapi BM25 over the turn text;
* :class:`VectorSessionRetriever` (``vector``): cosine similarity with the stack's
  embedder, above a similarity floor;
* :class:`HybridSessionRetriever` (``hybrid``): BM25 and vector fused (a weighted blend
  or reciprocal rank fusion; one or two vectors per turn).

The contract is :class:`SessionRetriever` (``_base.py``); :mod:`memlab.config` maps the
names to these classes (``SESSION_RETRIEVERS``, ``build_session_retriever``). Importing
this package loads neither numpy nor an embedder.
"""

from __future__ import annotations

from memlab.session.retrievers._base import (
    SessionIndex,
    SessionRetriever,
    best_first,
    entry_text,
    entry_tokens,
    matched_tokens,
)
from memlab.session.retrievers._bm25 import BM25_B, BM25_K1, BM25Index, BM25SessionRetriever, bm25_tokens
from memlab.session.retrievers._hybrid import (
    HYBRID_ALPHA,
    HYBRID_CANDIDATES,
    HYBRID_V1,
    HYBRID_VECTORS,
    RRF_K,
    HybridIndex,
    HybridSessionRetriever,
    competition_ranks,
)
from memlab.session.retrievers._keyword import KeywordIndex, KeywordSessionRetriever
from memlab.session.retrievers._vector import (
    MEASURED_MS_PER_TURN,
    VECTOR_MIN_SIMILARITY,
    VectorIndex,
    VectorSessionRetriever,
    user_text,
    vector_text,
)

__all__ = [
    "BM25Index",
    "BM25SessionRetriever",
    "BM25_B",
    "BM25_K1",
    "HYBRID_ALPHA",
    "HYBRID_CANDIDATES",
    "HYBRID_V1",
    "HYBRID_VECTORS",
    "HybridIndex",
    "HybridSessionRetriever",
    "KeywordIndex",
    "KeywordSessionRetriever",
    "MEASURED_MS_PER_TURN",
    "RRF_K",
    "SessionIndex",
    "SessionRetriever",
    "VECTOR_MIN_SIMILARITY",
    "VectorIndex",
    "VectorSessionRetriever",
    "best_first",
    "bm25_tokens",
    "competition_ranks",
    "entry_text",
    "entry_tokens",
    "matched_tokens",
    "user_text",
    "vector_text",
]
