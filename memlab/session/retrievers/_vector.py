"""``vector``: a session's turns ranked by cosine similarity to the query, with the stack's embedder.

* **Text embedded** per turn: ``question``, ``answer``, ``context``, in that order
  (non-empty parts joined by a space), so that a long ``context`` (the graph context
  of a recall answer) cut by the model's window (MiniLM: 256 word pieces) cannot push
  the turn's own question and answer out of its vector.
* **Score**: the cosine similarity (the embedder's rows have norm 1, so the dot
  product). Turns below ``min_similarity`` are dropped (default
  :data:`VECTOR_MIN_SIMILARITY` = 0.3, ``StackConfig.session.min_similarity``): a
  vector is never "no match", so without a floor every session would answer every
  query and recall's session-first short-circuit would never reach the graph.
  Measured with the default MiniLM on :func:`memlab.bench.conversations.synthetic`
  (paraphrased questions against 150-turn sessions): the gold turn scores 0.19 /
  0.35 / 0.49 (10th / 50th / 90th percentile), every other turn 0.04 / 0.19 / 0.50
  (50th / 90th / 99th); 0.3 keeps hit@5 at 0.70 (0.89 at 0.2, 0.37 at 0.4) while
  letting through only ~4% of unrelated turns, so a session about something else
  returns nothing. With ``memlab/hashing`` (tests) texts sharing no word score
  below 0.15. Equal scores keep chronological order.
* **Turn vectors are computed once**: lazily, by the first search that needs them
  (writes stay free of embedding calls, as ``remember(text, session_id=...)``
  promises), and cached in the index by ``qa_id`` with the text they were made
  from. A search embeds, in one batch call, the query and only the turns it has
  not embedded yet; an edit re-embeds that one turn; a reset (an edit or delete,
  here or in another process) keeps the vectors of the turns that survive. One
  lock per index makes concurrent searches share the work instead of repeating it.
  While the turns the matrix was built from are unchanged (the same entry objects,
  compared as one list), a search looks only at the turns appended since: on a
  10,000-turn session, rebuilding every turn's key and text per search had cost
  ~16 ms of Python per query.
* **Cost** (the default MiniLM, int8 ONNX, 2 cores shared with other work, turns
  of 30 words): 6.8 ms per turn embedded alone, 5.4 ms per turn in batches of 16
  or 64 (:data:`MEASURED_MS_PER_TURN`, ~185 turns/s). The first search of a
  100-turn session took 540 ms (100 turns and the query in one call), every later
  search 2.8 ms (p50: the query embedding plus one matrix-vector product), plus
  5.4 ms per turn appended since.

numpy is imported on the first search, never at import time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from memlab.models import SessionQAEntry
from memlab.session.retrievers._base import SessionIndex, SessionRetriever, best_first
from memlab.text import session_tokens

if TYPE_CHECKING:
    from memlab.cache import QALog
    from memlab.embeddings import Embedder

__all__ = ["MEASURED_MS_PER_TURN", "VECTOR_MIN_SIMILARITY", "VectorIndex", "VectorSessionRetriever", "vector_text"]

#: cosine below which a turn is not a match (see the module docstring)
VECTOR_MIN_SIMILARITY = 0.3

#: measured cost of embedding one turn with the default MiniLM, in ms, by batch size (see the module docstring)
MEASURED_MS_PER_TURN: dict[int, float] = {1: 6.8, 16: 5.4, 64: 5.4}


def vector_text(entry: SessionQAEntry) -> str:
    """The text of a turn's vector: question, answer, context (non-empty parts, in that order)."""
    return " ".join(part for part in (entry.question, entry.answer, entry.context) if part)


def _key(entry: SessionQAEntry) -> str:
    return entry.qa_id if entry.qa_id is not None else "\x00" + vector_text(entry)


def check_min_similarity(value: Any) -> float:
    """``min_similarity`` as a float in (0, 1]; ``ValueError`` otherwise (a returned score must be > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
        raise ValueError(f"min_similarity must be a number in (0, 1], got {value!r}")
    return float(value)


class VectorIndex(SessionIndex):
    """One session's turns and their vectors (cached by ``qa_id``, made on first need)."""

    def __init__(self) -> None:
        super().__init__()
        #: key -> (the text embedded, its unit vector)
        self._vectors: dict[str, tuple[str, Any]] = {}
        self._lock = asyncio.Lock()
        self._matrix: Any = None
        self._matrix_keys: list[str] = []
        #: the turns the matrix was built from (a snapshot list)
        self._matrix_entries: list[SessionQAEntry] = []
        #: turns embedded over the index's life (a turn is embedded once unless its text changes)
        self.embedded_turns = 0

    def apply(self, log: "QALog") -> None:
        super().apply(log)
        if log.reset:  # keep the vectors of the turns that are still live
            live = {_key(entry) for entry in self.entries}
            self._vectors = {key: value for key, value in self._vectors.items() if key in live}

    async def vectors(self, entries: list[SessionQAEntry], query: str, embedder: "Embedder") -> tuple[Any, Any]:
        """``(query vector, matrix of the entries' vectors)``; embeds the query and the turns not embedded yet, in one call."""
        import numpy as np

        async with self._lock:
            # the matrix's turns unchanged (the same objects; equal ones after a reset) and only turns appended since:
            # look at the appended ones alone, so a search of a long session costs no per-turn Python work
            known = len(self._matrix_entries)
            tail = entries[known:] if self._matrix is not None and entries[:known] == self._matrix_entries else None
            rows: dict[str, Any] = {}  # this snapshot's vectors, held here: a reset may prune the cache meanwhile
            missing: dict[str, str] = {}
            for entry in entries if tail is None else tail:
                key, text = _key(entry), vector_text(entry)
                cached = self._vectors.get(key)
                if cached is None or cached[0] != text:
                    missing[key] = text
                else:
                    rows[key] = cached[1]
            found = await embedder.embed([query, *missing.values()])
            for (key, text), vector in zip(missing.items(), found[1:]):
                self._vectors[key] = (text, vector)
                rows[key] = vector
            self.embedded_turns += len(missing)
            self._matrix_entries = list(entries)
            if tail is not None:
                if tail:
                    appended = [_key(entry) for entry in tail]
                    self._matrix = np.vstack([self._matrix, *(rows[key] for key in appended)])
                    self._matrix_keys = self._matrix_keys + appended
                return found[0], self._matrix
            keys = [_key(entry) for entry in entries]
            known = len(self._matrix_keys)
            edited = not missing.keys().isdisjoint(self._matrix_keys)
            if self._matrix is None or edited or keys[:known] != self._matrix_keys:
                self._matrix = np.vstack([rows[key] for key in keys])
            elif len(keys) > known:  # appended turns: extend the matrix
                self._matrix = np.vstack([self._matrix, *(rows[key] for key in keys[known:])])
            self._matrix_keys = keys
            return found[0], self._matrix


class VectorSessionRetriever(SessionRetriever[VectorIndex]):
    """``vector``: turns ranked by cosine similarity to the query (>= ``min_similarity``); score = the cosine.

    ``embedder`` is an :class:`~memlab.embeddings.Embedder`, or a zero-argument
    callable returning one, resolved on the first search (the stack hands over the
    embedder it builds after the session manager).
    """

    name = "vector"
    needs_embedder = True

    @classmethod
    def from_config(cls, config: Any, *, embedder: Any = None) -> "VectorSessionRetriever":
        """``vector`` from the config: the stack's embedder (else the config's) and ``session.min_similarity``."""
        return cls(cls.config_embedder(config, embedder), min_similarity=config.session.min_similarity)

    def __init__(self, embedder: "Embedder | Callable[[], Embedder]", *, min_similarity: float = VECTOR_MIN_SIMILARITY) -> None:
        self._embedder_source = embedder
        self.min_similarity = check_min_similarity(min_similarity)

    @property
    def embedder(self) -> "Embedder":
        """The embedder (a provider given to the constructor is called once, on first use)."""
        source = self._embedder_source
        if hasattr(source, "embed"):
            return cast("Embedder", source)
        resolved = cast("Callable[[], Embedder]", source)()
        self._embedder_source = resolved
        return resolved

    def new_index(self) -> VectorIndex:
        return VectorIndex()

    async def similarities(self, index: VectorIndex, query: str) -> tuple[list[SessionQAEntry], list[float]]:
        """The snapshot of ``index``'s turns and the cosine of each with ``query`` (no floor applied)."""
        entries = list(index.entries)  # the snapshot, taken before any await
        if not entries or not session_tokens(query):
            return entries, []
        query_vector, matrix = await index.vectors(entries, query, self.embedder)
        return entries, (matrix @ query_vector).tolist()

    async def search(self, index: VectorIndex, query: str, top_k: int) -> list[tuple[SessionQAEntry, float]]:
        if top_k < 1:
            return []
        entries, cosines = await self.similarities(index, query)
        scored = [(position, cosine) for position, cosine in enumerate(cosines) if cosine >= self.min_similarity]
        return [(entries[position], score) for position, score in best_first(scored, top_k)]

    def __repr__(self) -> str:
        return f"VectorSessionRetriever(min_similarity={self.min_similarity})"
