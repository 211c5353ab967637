"""MemoryStack: the composition root.

It takes the strategy objects it is given, builds the others (from :mod:`memlab.config`)
and every service (stores, users, datasets, session manager), and wires them into the flows of
:mod:`memlab.flows`; it owns open/close, and each public method checks the
lifecycle and delegates to its flow in one call.
"""

from __future__ import annotations

import functools
import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from memlab._injection import Injected, check_types, retriever_registry, stack_clock
from memlab._sqlrun import resolve_url
from memlab.clock import Clock
from memlab.config import (
    StackConfig,
    build_analysis_mode,
    build_cache_backend,
    build_embedder,
    build_llm_client,
    build_merge_policy,
    build_session_reranker,
    build_session_retriever,
)
from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import ConfigError, MemlabError, StackStateError
from memlab.flows.distill import DistillFlow
from memlab.flows.feedback import FeedbackWeights
from memlab.flows.forget import ForgetFlow
from memlab.flows.recall_options import RecallOptions
from memlab.flows.remember import RememberFlows
from memlab.lifecycle import Lifecycle, StackState
from memlab.models import ForgetResult, ImproveResult, RecallResponse, RememberResult
from memlab.provenance import SessionCleaner
from memlab.relational import RelationalStore
from memlab.retrievers import Retriever, Retrievers, SearchType
from memlab.session import SessionAPI, SessionManager
from memlab.usage import UsageAPI, UsageRecorder
from memlab.users import Users

if TYPE_CHECKING:
    from memlab.analysis import AnalysisMode
    from memlab.cache import CacheBackend
    from memlab.embeddings import Embedder
    from memlab.flows.recall import RecallFlows
    from memlab.graph import PermanentMemory, SnapshotStore
    from memlab.llm import LLMClient
    from memlab.merge import MergePolicy
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever
    from memlab.ttl import TTLPolicy

logger = logging.getLogger("memlab.stack")

#: how long :meth:`MemoryStack.close` waits for background self-improvement by default
CLOSE_TIMEOUT_SECONDS = 60.0


def _check_data_root(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"data root {str(root)!r} is not a writable directory: {exc.strerror or exc}") from None


class MemoryStack:
    """A configured memory system. Build with :meth:`from_config` / :meth:`from_env`.

    Use as ``async with stack:`` (or ``await stack.open()`` / ``await stack.close()``).

    Objects in, names optional: every strategy keyword takes an instance, which the
    stack uses as it is; whatever is not passed is built from ``config`` by
    :mod:`memlab.config`. The keywords (the same on :meth:`from_config` and
    :meth:`from_env`) and the base class each must be an instance of:

    * ``cache``: a :class:`memlab.cache.CacheBackend`, the session cache (``stack.cache``);
    * ``ttl``: a :class:`memlab.ttl.TTLPolicy`, for the cache the stack builds;
    * ``session_retriever``: a :class:`memlab.session.retrievers.SessionRetriever`, recall's session lane;
    * ``session_reranker``: a :class:`memlab.session.rerankers.SessionReranker`, reorders the top of that
      lane's ranking (a cross-encoder you bring; the config's ``session.reranker``, ``none`` by default, otherwise);
    * ``analysis``: a :class:`memlab.analysis.AnalysisMode`, how every ``search()`` turn runs;
    * ``merge``: a :class:`memlab.merge.MergePolicy`, how a dual-query turn merges its lanes;
    * ``llm``: a :class:`memlab.llm.LLMClient`, answers, analysis, extraction and distillation;
    * ``embedder``: a :class:`memlab.embeddings.Embedder`;
    * ``retrievers``: a :class:`memlab.retrievers.Retrievers` (or a mapping, below), per search type;
    * ``clock``: a :class:`memlab.clock.Clock` (``now()``, ``monotonic()``), read by every time-dependent part.

    A value of the wrong type (or a class where an instance is due) raises
    :class:`~memlab.exceptions.ConfigError` naming the keyword, the family and the
    base class, before anything is built or opened (no file is created).

    Collaborators. A strategy that needs another gets the stack's one when the stack
    builds it; a passed object already holds its own and is never rewired:

    * ``ttl=`` alone: the cache the stack builds stamps with it (instead of the policy
      ``config.ttl`` describes).
    * ``cache=`` alone: the cache keeps its own TTL policy and clock, and the stack
      adopts that clock (``stack.clock is cache.clock``), so one time source serves all.
    * ``cache=`` with ``ttl=``: ``ConfigError`` (ambiguous), unless ``ttl`` is the
      cache's own policy (``ttl is cache.ttl``).
    * ``cache=`` with ``clock=``: the clock must be the cache's own (the same object;
      any two :class:`~memlab.clock.SystemClock` agree), else ``ConfigError``.
    * A built cache, and every other built part, reads ``clock`` (default: the real clock).
    * ``embedder=`` serves permanent memory, the chunk sizes derived from its window,
      and the ``vector`` / ``hybrid`` session retriever the stack builds. A passed
      ``session_retriever`` is used as is: one that embeds was given its embedder when
      it was made (pass the same object as ``embedder=`` to share it).
    * ``retrievers=``: a :class:`~memlab.retrievers.Retrievers` is used as is; a mapping
      ``{SearchType (or its name): Retriever instance}`` replaces those search types'
      retrievers and keeps the defaults for the rest. Retrievers read the embedder and
      LLM from the stack at each call (``scope.memory.embedder``, ``scope.llm``).
    * "No cache" is said by the config (``cache.enabled=False``); ``cache=`` or
      ``ttl=`` with caching off is a ``ConfigError``.
    """

    def __init__(
        self,
        config: StackConfig,
        *,
        cache: "CacheBackend | None" = None,
        ttl: "TTLPolicy | None" = None,
        session_retriever: "SessionRetriever[Any] | None" = None,
        session_reranker: "SessionReranker | None" = None,
        analysis: "AnalysisMode | None" = None,
        merge: "MergePolicy | None" = None,
        llm: "LLMClient | None" = None,
        embedder: "Embedder | None" = None,
        retrievers: "Retrievers | Mapping[SearchType | str, Retriever] | None" = None,
        clock: Clock | None = None,
    ) -> None:
        check_types(
            {"cache": cache, "ttl": ttl, "session_retriever": session_retriever, "session_reranker": session_reranker, "analysis": analysis,
             "merge": merge, "llm": llm, "embedder": embedder, "clock": clock}
        )
        registry = retriever_registry(retrievers)
        self.config = config
        self.clock: Clock = stack_clock(config, cache, ttl, clock)
        self.lifecycle = Lifecycle()
        #: the session cache (a CacheBackend, None when caching is off); typed Any: callers read backend-specific attributes
        self.cache: Any = cache if cache is not None else build_cache_backend(config, self.clock, ttl=ttl)
        self._relational = RelationalStore(Path(config.data_root) / "memlab.db", self.clock, url=config.db_url)
        self.embedder = embedder if embedder is not None else build_embedder(config)  # loads nothing until its first use
        self._chunking = config.graph.chunking(self.embedder.max_tokens)  # (size, overlap): fits the embedder's window
        self.session_manager = SessionManager(
            self.cache,
            default_session_id=config.session.default_session_id,
            lifecycle=self.lifecycle,
            clock=self.clock,
            activity=self._relational.sessions.touch,
            retriever=session_retriever if session_retriever is not None else build_session_retriever(config, self.embedder),
            reranker=session_reranker if session_reranker is not None else build_session_reranker(config),
        )
        self.users = Users(self._relational)
        self.datasets = Datasets(self._relational, self.users, lambda: self._forgetting)  # deletes go through the forget flow
        self.llm = llm if llm is not None else build_llm_client(config)
        self.analysis = analysis if analysis is not None else build_analysis_mode(config)
        self.merge = merge if merge is not None else build_merge_policy(config)
        self.retrievers = registry
        self._cleaner = SessionCleaner(
            self.cache, self._relational, default_session_id=config.session.default_session_id, turn_lock=self.session_manager.turn_lock
        )
        self._forgetting = ForgetFlow(
            users=self.users, datasets=self.datasets, store=self._relational, memory=self._memory, cleaner=self._cleaner
        )
        # tracking depends on caching (the seed)
        self._usage_recorder = UsageRecorder(self._relational, enabled=config.session.track_usage and config.cache.enabled)
        #: sessions' usage and cost, with the seed's visibility rules (:mod:`memlab.usage`)
        self.usage = UsageAPI(
            self._relational,
            self.users,
            self.clock,
            abandon_after_seconds=config.session.abandon_after_seconds,
            recorder=self._usage_recorder,
            expire_after_seconds=self.cache.ttl.seconds if self.cache is not None else None,
        )
        self._distilling = DistillFlow(
            users=self.users,
            datasets=self.datasets,
            sessions=self.session_manager,
            memory=self._memory,
            llm=self.llm,
            config=config.session,
            usage=self._usage_recorder,
        )
        self.session = SessionAPI(
            self.users,
            self.datasets,
            self.session_manager,
            self.lifecycle,
            distiller=self._distilling.distill,
            ender=self._relational.sessions.end,
        )
        # as upstream: ratings move feedback weights only when the configured influence is above 0
        feedback = FeedbackWeights(self.session_manager, self._relational.feedback, alpha=config.session.feedback_alpha)
        self._remembering = RememberFlows(
            users=self.users,
            datasets=self.datasets,
            sessions=self.session_manager,
            store=self._relational,
            memory=self._memory,
            distiller=self._distilling.distill,
            feedback=feedback if config.recall.feedback_influence > 0 else None,
        )

    @property
    def state(self) -> StackState:
        """``unopened``, ``open`` or ``closed``."""
        return self.lifecycle.state

    @functools.cached_property
    def memory(self) -> "PermanentMemory":
        """The graph + vector memory of every dataset, built on first use."""
        from memlab.graph import PermanentMemory

        graph = self.config.graph
        return PermanentMemory(
            Path(self.config.data_root) / "graph",
            self._relational,
            llm=self.llm,
            embedder=self.embedder,
            chunk_size=self._chunking[0],
            chunk_overlap=self._chunking[1],
            extraction_concurrency=graph.extraction_concurrency,
            snapshots=self._snapshots(),
        )

    def _snapshots(self) -> "SnapshotStore":
        """Local files under the data root; with ``MEMLAB_DB_URL`` on PostgreSQL, that database (shared by every machine)."""
        from memlab.graph import FileSnapshots, PostgresSnapshots

        url = self.config.db_url
        if url is not None and resolve_url(url)[0] == "postgresql":
            return PostgresSnapshots(url)
        return FileSnapshots(Path(self.config.data_root) / "graph")

    def _memory(self) -> "PermanentMemory":
        return self.memory

    @functools.cached_property
    def _flows(self) -> "RecallFlows":
        """recall() and search() with their turn runner and warm-up probe, built on first use."""
        from memlab.flows.recall import RecallFlows
        from memlab.flows.turn import TurnRunner
        from memlab.flows.warmup import WarmupProbe

        recall = self.config.recall
        return RecallFlows(
            users=self.users,
            datasets=self.datasets,
            sessions=self.session_manager,
            memory=self._memory,
            llm=self.llm,
            retrievers=self.retrievers,
            turns=TurnRunner(self.session_manager, self.analysis, self.merge, self.llm, usage=self._usage_recorder),
            warmup=WarmupProbe(self._relational, self.clock, threshold=recall.warmup_threshold, cache_ttl=recall.warmup_cache_ttl_seconds),
            config=recall,
            feedback_weights=self._relational.feedback.weights,
        )

    @classmethod
    def from_config(cls, config: StackConfig | None = None, **objects: Unpack[Injected]) -> "MemoryStack":
        """Assemble a stack (not yet open) from ``config`` (defaults when None) and the objects passed (see :class:`MemoryStack`)."""
        return cls(config or StackConfig(), **objects)

    @classmethod
    def from_env(cls, **objects: Unpack[Injected]) -> "MemoryStack":
        """Assemble a stack from environment variables (:meth:`StackConfig.from_env`) and the objects passed (see :class:`MemoryStack`)."""
        return cls(StackConfig.from_env(), **objects)

    def __repr__(self) -> str:
        return f"MemoryStack(cache={self.cache!r}, data_root={str(self.config.data_root)!r}, state={self.state.value})"

    # -- lifecycle -------------------------------------------------------------------

    async def open(self) -> "MemoryStack":
        """Create the data root and open the stores.

        An unwritable data root raises ``ConfigError``. A cache that cannot be reached
        is logged and retried on each session call (session calls fail open meanwhile).
        """
        if self.state is StackState.OPEN:
            return self
        if self.state is StackState.CLOSED:
            raise StackStateError("this MemoryStack was closed; build a new one")
        _check_data_root(Path(self.config.data_root))
        await self._relational.open()
        if self.cache is not None:
            try:
                await self.cache.open()
            except MemlabError as exc:
                logger.warning("session cache unavailable at start, will retry on use: %s", exc)
        self.lifecycle.state = StackState.OPEN
        return self

    async def close(self, *, timeout: float | None = CLOSE_TIMEOUT_SECONDS) -> None:
        """Finish scheduled self-improvement (at most ``timeout`` seconds), then close every store. Idempotent.

        Background self-improvement still running after ``timeout`` (None: no bound) is
        cancelled and a warning names each session it had not bridged; their turns
        stay in the session cache, and ``improve(dataset=..., session_ids=[...])``
        bridges them later.
        """
        if self.state is StackState.CLOSED:
            return
        await self._remembering.finish(timeout)
        self.lifecycle.state = StackState.CLOSED
        if self.cache is not None:
            await self.cache.close()
        if "memory" in self.__dict__:  # built: its snapshot store may hold connections
            await self.memory.snapshots.close()
        await self._relational.close()

    @property
    def pending_background(self) -> int:
        """Background self-improvement runs (from ``remember(..., session_id=...)``) not finished yet."""
        return self._remembering.pending

    async def wait_for_background(self, timeout: float | None = None) -> int:
        """Wait for background self-improvement, at most ``timeout`` seconds (None: until done); how many still run."""
        return await self._remembering.wait(timeout)

    async def __aenter__(self) -> "MemoryStack":
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _require_open(self) -> None:
        self.lifecycle.require_open()

    # -- flows -----------------------------------------------------------------------

    async def remember(
        self,
        data: Any,
        *,
        dataset: Any = MAIN_DATASET,
        session_id: str | None = None,
        user: Any = None,
        self_improvement: bool = True,
        tags: Sequence[str] = (),
        progress: bool | None = None,
    ) -> RememberResult:
        """Store ``data`` in permanent memory, or with ``session_id`` as one session turn.

        Without ``session_id``: ``data`` (a str, a list of str, file paths as
        ``pathlib.Path`` or ``file://`` strings: .txt .md .json .csv) becomes
        documents of ``dataset`` (a name of the user's, created when missing, or
        a dataset id the user may write), which are chunked, extracted and
        embedded into the dataset's graph (status ``completed``). Content already
        in the dataset is not processed again. Bad input raises ``ValidationError``
        before anything is stored; a failed run leaves the previous graph intact.
        ``tags`` label the documents: ``"skills"`` makes them skills (``SearchType.SKILLS``,
        the skill gate), ``"coding_rules"`` coding rules (``SearchType.CODING_RULES``).
        ``progress`` shows a progress bar (None: on long runs only).

        With ``session_id``: the text becomes one turn (empty question and
        context) of that session; blank text writes nothing (``skipped_blank``);
        caching off gives ``cache_unavailable``. The write itself makes no LLM
        or embedding call. ``self_improvement`` (default True) then bridges the
        session into ``dataset``'s graph in the background (see :meth:`improve`),
        without delaying this call: each new turn becomes a document that is
        chunked, extracted (one offline-LLM call per chunk) and embedded, and the
        first such run in a process imports the LLM stack and loads the embedder
        (seconds); the session's accepted guidance not yet distilled is then distilled
        into the same dataset (``distill_session``'s gate and watermark). :meth:`close`
        waits for it, at most ``timeout`` seconds.
        """
        self._require_open()
        return await self._remembering.remember(
            data, dataset=dataset, session_id=session_id, user=user, self_improvement=self_improvement, tags=tags, progress=progress
        )

    async def improve(self, *, dataset: Any = MAIN_DATASET, session_ids: Sequence[str], user: Any = None) -> ImproveResult:
        """Bridge cached session turns and agent trace steps into ``dataset``'s graph.

        Each answered turn becomes one document (``Question: ...`` / ``Answer: ...``),
        each agent trace step one document (``Agent step: <function> (<status>)`` ...,
        see :func:`memlab.flows.remember.trace_text`), tagged ``session:<id>``, added and
        cognified like :meth:`remember`; documents bridged before are not processed
        again. Status ``completed``, or ``nothing_to_improve`` when the sessions hold no
        answered turn and no trace step. Each session's
        gated guidance is then distilled into ``dataset`` (``result.distilled``: one
        :class:`~memlab.models.DistillResult` per session, see
        ``stack.session.distill_session``); a failed distillation is recorded there
        (status ``failed``) and never undoes the bridging.
        """
        self._require_open()
        return await self._remembering.improve(dataset=dataset, session_ids=session_ids, user=user)

    async def forget(
        self,
        *,
        dataset: Any = None,
        data_id: Any = None,
        memory_only: bool = False,
        everything: bool = False,
        user: Any = None,
        dry_run: bool = False,
    ) -> ForgetResult:
        """Delete permanent memory and the cached session entries built on it; returns what was removed.

        * ``forget(dataset=d)``: the dataset, its documents and its graph;
        * ``forget(data_id=x, dataset=d)``: one document (``dataset`` defaults to
          ``main_dataset``) and the graph elements only it supported;
        * ``forget(dataset=d, memory_only=True)``: the graph and vectors only; the
          documents stay (a later ``remember`` of new data rebuilds on top);
        * ``forget(everything=True)``: every dataset the user owns, and every session of the user.

        Sessions (SPEC §7, :mod:`memlab.provenance`): a dataset-level delete deletes
        every session attributed to the dataset; a one-document delete removes exactly
        the turns that used a removed node or edge, the feedback on them, the guidance
        distilled from that feedback and the later turns that used it, in the
        dataset's sessions and those without a dataset. ``result.cleanup`` is the
        receipt (``.sessions``, ``.failures``, ``.to_frame()``); a cache error never
        fails the delete, it is listed in ``.failures``. ``dry_run=True`` changes
        nothing and returns the same result. The user needs ``write`` on the dataset;
        bad arguments raise ``ValidationError`` before anything is read.
        """
        self._require_open()
        return await self._forgetting.forget(
            dataset=dataset, data_id=data_id, memory_only=memory_only, everything=everything, user=user, dry_run=dry_run
        )

    async def recall(
        self,
        query_text: str,
        query_type: Any = None,
        *,
        datasets: list[str] | None = None,
        dataset_ids: list[Any] | None = None,
        top_k: int = 15,
        auto_route: bool = True,
        scope: str | list[str] | None = None,
        session_id: str | None = None,
        user: Any = None,
        only_context: bool = False,
        response_model: Any = None,
        distinct: str | None = None,
        system_prompt: str | None = None,
        context_profile: str = "qa",
        node_name: list[str] | None = None,
        node_name_filter_operator: str = "OR",
        include_references: bool = False,
        feedback_influence: float | None = None,
    ) -> list[RecallResponse]:
        """Search memory: the session, the graph, or both (SPEC §9; see :mod:`memlab.flows.recall`).

        ``scope`` None/"auto": with ``session_id`` (and no datasets or query type) the
        session is searched first and the graph only when it finds nothing; without
        ``session_id`` the graph. ``query_type`` None routes the query by rule
        (:func:`memlab.retrievers.route_query`) unless ``auto_route=False`` (hybrid).
        Graph results are ``GraphRecallResponse`` items (``kind="answer"`` for a
        completion, with ``structured`` filled from ``response_model``); a graph
        that was never built (or whose build failed) answers with one
        ``SystemRecallResponse`` marker when it is the only source. ``datasets`` /
        ``dataset_ids`` the user cannot read raise ``PermissionDeniedError``. An
        empty query returns ``[]``. ``distinct="data_id"``: one result per source
        document from ``CHUNKS``, ``SUMMARIES`` and ``CHUNKS_LEXICAL`` (ignored by other types).
        ``system_prompt`` replaces the answer call's instructions; ``context_profile``
        (``"qa"`` or ``"agent"``) picks the guidance the ``session_context`` source renders.
        ``node_name`` / ``node_name_filter_operator``, ``include_references`` and
        ``feedback_influence`` are upstream options memlab does not implement: a
        value other than the default raises ``ValidationError`` saying why.
        """
        self._require_open()
        return await self._flows.recall(
            query_text,
            query_type,
            datasets=datasets,
            dataset_ids=dataset_ids,
            top_k=top_k,
            auto_route=auto_route,
            scope=scope,
            session_id=session_id,
            user=user,
            only_context=only_context,
            response_model=response_model,
            distinct=distinct,
            options=RecallOptions.checked(
                system_prompt=system_prompt,
                context_profile=context_profile,
                node_name=node_name,
                node_name_filter_operator=node_name_filter_operator,
                include_references=include_references,
                feedback_influence=feedback_influence,
            ),
        )

    async def search(
        self,
        query_text: str,
        query_type: Any = "GRAPH_COMPLETION",
        *,
        session_id: str | None = None,
        datasets: list[str] | None = None,
        dataset_ids: list[Any] | None = None,
        top_k: int = 15,
        user: Any = None,
        only_context: bool = False,
        distinct: str | None = None,
    ) -> list[RecallResponse]:
        """One search type over the graph, session-aware for completion types.

        A completion type reads the session's last 10 turns into the prompt,
        answers, and stores the turn with ``used_graph_element_ids`` (the node and
        edge ids the answer's context held). An omitted ``session_id`` is the
        dataset-scoped default session (of the first dataset named by ``datasets``
        then ``dataset_ids``, else of ``main_dataset``). ``datasets`` are names,
        ``dataset_ids`` ids (UUIDs or their strings: how an agent user names a dataset
        its parent shared); each needs ``read``. Retrieval-only types (and
        ``only_context=True``) return the ranked items and neither read nor write the session.
        """
        self._require_open()
        return await self._flows.search(
            query_text, query_type, session_id=session_id, datasets=datasets, dataset_ids=dataset_ids, top_k=top_k, user=user,
            only_context=only_context, distinct=distinct,
        )

    async def prune(self, *, cache: bool = True) -> None:
        """Remove every session entry of the cache (``cache=True``)."""
        self._require_open()
        if cache and self.cache is not None:
            await self.cache.prune()

    @property
    def frames(self):
        """pandas exports of this stack (pandas is imported on first use)."""
        from memlab.frames import Frames

        return Frames(self.session, self.session_manager, self.datasets, self._memory, self.recall, self.usage)

