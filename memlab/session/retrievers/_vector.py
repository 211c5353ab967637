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
  not embedded yet (each distinct text once); an edit re-embeds that one turn; a
  reset (an edit or delete, here or in another process) keeps the vectors of the
  turns that survive. An index may hold several vectors per turn (``hybrid``'s user
  side: :class:`VectorIndex` ``texts``); the cosine is then the best of them. One
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

__all__ = ["MEASURED_MS_PER_TURN", "VECTOR_MIN_SIMILARITY", "VectorIndex", "VectorSessionRetriever", "user_text", "vector_text"]

#: cosine below which a turn is not a match (see the module docstring)
VECTOR_MIN_SIMILARITY = 0.3

#: measured cost of embedding one turn with the default MiniLM, in ms, by batch size (see the module docstring)
MEASURED_MS_PER_TURN: dict[int, float] = {1: 6.8, 16: 5.4, 64: 5.4}


def vector_text(entry: SessionQAEntry) -> str:
    """The text of a turn's vector: question, answer, context (non-empty parts, in that order)."""
    return " ".join(part for part in (entry.question, entry.answer, entry.context) if part)


def user_text(entry: SessionQAEntry) -> str:
    """The user side of a turn: its question; the whole turn's :func:`vector_text` when the question is empty."""
    return entry.question or vector_text(entry)


def _key(entry: SessionQAEntry) -> str:
    return entry.qa_id if entry.qa_id is not None else "\x00" + vector_text(entry)


def check_min_similarity(value: Any) -> float:
    """``min_similarity`` as a float in (0, 1]; ``ValueError`` otherwise (a returned score must be > 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
        raise ValueError(f"min_similarity must be a number in (0, 1], got {value!r}")
    return float(value)


class _View:
    """One vector per turn made from ``text(entry)``: the cache by key and the matrix of the last snapshot."""

    def __init__(self, text: Callable[[SessionQAEntry], str]) -> None:
        self.text = text
        #: key -> (the text embedded, its unit vector)
        self.cache: dict[str, tuple[str, Any]] = {}
        self.matrix: Any = None
        self.keys: list[str] = []
        #: the turns the matrix was built from (a snapshot list)
        self.entries: list[SessionQAEntry] = []

    def prune(self, live: set[str]) -> None:
        self.cache = {key: value for key, value in self.cache.items() if key in live}

    def plan(self, entries: list[SessionQAEntry]) -> tuple[list[SessionQAEntry] | None, dict[str, Any], dict[str, str]]:
        """``(tail, rows, missing)``: the turns appended since the matrix (None: rebuild), the cached rows, the texts to embed by key."""
        # the matrix's turns unchanged (the same objects; equal ones after a reset) and only turns appended since:
        # look at the appended ones alone, so a search of a long session costs no per-turn Python work
        known = len(self.entries)
        tail = entries[known:] if self.matrix is not None and entries[:known] == self.entries else None
        rows: dict[str, Any] = {}  # this snapshot's vectors, held here: a reset may prune the cache meanwhile
        missing: dict[str, str] = {}
        for entry in entries if tail is None else tail:
            key, text = _key(entry), self.text(entry)
            cached = self.cache.get(key)
            if cached is None or cached[0] != text:
                missing[key] = text
            else:
                rows[key] = cached[1]
        return tail, rows, missing

    def commit(self, entries: list[SessionQAEntry], tail: list[SessionQAEntry] | None, rows: dict[str, Any],
               missing: dict[str, str], embedded: dict[str, Any]) -> Any:
        """Store the new vectors (``embedded``: text -> vector) and return the snapshot's matrix."""
        import numpy as np

        for key, text in missing.items():
            self.cache[key] = (text, embedded[text])
            rows[key] = embedded[text]
        self.entries = list(entries)
        if tail is not None:
            if tail:
                appended = [_key(entry) for entry in tail]
                self.matrix = np.vstack([self.matrix, *(rows[key] for key in appended)])
                self.keys = self.keys + appended
            return self.matrix
        keys = [_key(entry) for entry in entries]
        known = len(self.keys)
        edited = not missing.keys().isdisjoint(self.keys)
        if self.matrix is None or edited or keys[:known] != self.keys:
            self.matrix = np.vstack([rows[key] for key in keys])
        elif len(keys) > known:  # appended turns: extend the matrix
            self.matrix = np.vstack([self.matrix, *(rows[key] for key in keys[known:])])
        self.keys = keys
        return self.matrix


class VectorIndex(SessionIndex):
    """One session's turns and their vectors (cached by ``qa_id``, made on first need).

    ``texts``: the text functions of the vectors each turn gets (default one,
    :func:`vector_text`; ``hybrid`` adds :func:`user_text`). One search embeds the
    query and every missing text of every view in one call, each distinct text once.
    """

    def __init__(self, texts: tuple[Callable[[SessionQAEntry], str], ...] = (vector_text,)) -> None:
        super().__init__()
        if not texts:
            raise ValueError("a VectorIndex needs at least one text function")
        self._views = [_View(text) for text in texts]
        self._lock = asyncio.Lock()
        #: turns embedded over the index's life, per view summed (a turn is embedded once unless its text changes)
        self.embedded_turns = 0

    def apply(self, log: "QALog") -> None:
        super().apply(log)
        if log.reset:  # keep the vectors of the turns that are still live
            live = {_key(entry) for entry in self.entries}
            for view in self._views:
                view.prune(live)

    async def vectors(self, entries: list[SessionQAEntry], query: str, embedder: "Embedder") -> tuple[Any, Any]:
        """``(query vector, matrix of the entries' vectors)`` of the first view (see :meth:`all_vectors`)."""
        query_vector, matrices = await self.all_vectors(entries, query, embedder)
        return query_vector, matrices[0]

    async def all_vectors(self, entries: list[SessionQAEntry], query: str, embedder: "Embedder") -> tuple[Any, list[Any]]:
        """``(query vector, one matrix per view)``; embeds the query and the texts not embedded yet, in one call."""
        async with self._lock:
            plans = [view.plan(entries) for view in self._views]
            texts = list(dict.fromkeys(text for _, _, missing in plans for text in missing.values()))
            found = await embedder.embed([query, *texts])
            embedded = dict(zip(texts, found[1:]))
            self.embedded_turns += sum(len(missing) for _, _, missing in plans)
            matrices = [view.commit(entries, tail, rows, missing, embedded) for view, (tail, rows, missing) in zip(self._views, plans)]
            return found[0], matrices


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
        """The snapshot of ``index``'s turns and the cosine of each with ``query`` (no floor applied).

        With several vectors per turn (an index of several ``texts``), a turn's cosine is the best of them.
        """
        entries, cosines = await self.cosines(index, query)
        return entries, [] if cosines is None else cosines.tolist()

    async def cosines(self, index: VectorIndex, query: str) -> tuple[list[SessionQAEntry], Any]:
        """:meth:`similarities` as a float64 numpy array (None for an empty session or a query without tokens)."""
        entries = list(index.entries)  # the snapshot, taken before any await
        if not entries or not session_tokens(query):
            return entries, None
        import numpy as np

        query_vector, matrices = await index.all_vectors(entries, query, self.embedder)
        cosines = matrices[0] @ query_vector
        for matrix in matrices[1:]:
            cosines = np.maximum(cosines, matrix @ query_vector)
        return entries, cosines.astype(np.float64)

    async def search(self, index: VectorIndex, query: str, top_k: int) -> list[tuple[SessionQAEntry, float]]:
        if top_k < 1:
            return []
        entries, cosines = await self.similarities(index, query)
        scored = [(position, cosine) for position, cosine in enumerate(cosines) if cosine >= self.min_similarity]
        return [(entries[position], score) for position, score in best_first(scored, top_k)]

    def __repr__(self) -> str:
        return f"VectorSessionRetriever(min_similarity={self.min_similarity})"
