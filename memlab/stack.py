"""MemoryStack: owns one instance of every strategy and runs the flows."""

from __future__ import annotations

import asyncio
import functools
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab._clock import Clock, SystemClock
from memlab.config import (
    StackConfig,
    build_analysis_mode,
    build_cache_backend,
    build_embedder,
    build_llm_client,
    build_merge_policy,
)
from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import ConfigError, MemlabError, StackStateError, ValidationError
from memlab.lifecycle import Lifecycle, StackState
from memlab.models import Dataset, ForgetResult, ImproveResult, RecallResponse, RememberResult
from memlab.provenance import ForgetEvent
from memlab.relational import RelationalStore
from memlab.session._api import SessionAPI
from memlab.session._manager import SessionManager
from memlab.users import Users
from memlab.validation import check_text

if TYPE_CHECKING:
    from memlab._recall import RecallFlows
    from memlab.graph._documents import Document
    from memlab.graph._memory import PermanentMemory

logger = logging.getLogger("memlab.stack")

#: how long :meth:`MemoryStack.close` waits for background self-improvement by default
CLOSE_TIMEOUT_SECONDS = 60.0


def _text_of(data: Any) -> str:
    if isinstance(data, str):
        return check_text("data", data)
    if isinstance(data, Sequence) and not isinstance(data, (bytes, bytearray)) and all(isinstance(item, str) for item in data):
        return check_text("data", "\n\n".join(data))
    raise ValidationError(f"remember() with session_id takes a str or a list of str, got {type(data).__name__}")


def _turn_text(question: str, answer: str) -> str:
    return f"Question: {question}\nAnswer: {answer}" if question.strip() else answer


def _session_tags(sessions: Sequence[str]) -> list[str]:
    return [f"session:{session}" for session in sessions]


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
    Strategy instances are built from the config by :mod:`memlab.config` only.
    """

    def __init__(self, config: StackConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.lifecycle = Lifecycle()
        self.cache = build_cache_backend(config, self.clock)
        self.session_manager = SessionManager(
            self.cache, default_session_id=config.session.default_session_id, lifecycle=self.lifecycle
        )
        self._relational = RelationalStore(Path(config.data_root) / "memlab.db", self.clock)
        self.users = Users(self._relational)
        self.datasets = Datasets(self._relational, self.users, lambda: self.memory)
        self.session = SessionAPI(self)
        self.llm = build_llm_client(config)
        self.analysis = build_analysis_mode(config)
        self.merge = build_merge_policy(config)
        self.embedder = build_embedder(config)
        self._improving: dict[tuple, asyncio.Task] = {}
        self._improve_again: set[tuple] = set()

    @property
    def state(self) -> StackState:
        """``unopened``, ``open`` or ``closed``."""
        return self.lifecycle.state

    @functools.cached_property
    def memory(self) -> "PermanentMemory":
        """The graph + vector memory of every dataset, built on first use."""
        from memlab.graph._memory import PermanentMemory

        graph = self.config.graph
        return PermanentMemory(
            Path(self.config.data_root) / "graph",
            self._relational,
            llm=self.llm,
            embedder=self.embedder,
            chunk_size=graph.chunk_size,
            chunk_overlap=graph.chunk_overlap,
            extraction_concurrency=graph.extraction_concurrency,
            on_forget=self._after_forget,
        )

    @functools.cached_property
    def _flows(self) -> "RecallFlows":
        from memlab._recall import RecallFlows

        return RecallFlows(self)

    @classmethod
    def from_config(cls, config: StackConfig | None = None, *, clock: Clock | None = None) -> "MemoryStack":
        """Assemble a stack (not yet open) from ``config`` (defaults when None)."""
        return cls(config or StackConfig(), clock=clock)

    @classmethod
    def from_env(cls, *, clock: Clock | None = None) -> "MemoryStack":
        """Assemble a stack from environment variables (:meth:`StackConfig.from_env`)."""
        return cls(StackConfig.from_env(), clock=clock)

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
        if self._improving:
            await self._finish_improvements(timeout)
        self.lifecycle.state = StackState.CLOSED
        if self.cache is not None:
            await self.cache.close()
        await self._relational.close()

    async def _finish_improvements(self, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = None if timeout is None else started + timeout
        logger.info("close(): waiting for self-improvement of %d session(s) (at most %s s)", len(self._improving), timeout)
        while self._improving:  # a run may schedule another round of its session: wait for those too
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            _, pending = await asyncio.wait(list(self._improving.values()), timeout=remaining)
            if pending:
                unfinished = dict(self._improving)
                for task in unfinished.values():
                    task.cancel()
                await asyncio.gather(*unfinished.values(), return_exceptions=True)
                for dataset, session, user_id in unfinished:
                    logger.warning(
                        "close(): self-improvement of session %r into dataset %r (user %s) did not finish within %s s and "
                        "was cancelled; its turns are still in the session cache: run improve(dataset=..., session_ids=[%r]) "
                        "to bridge them",
                        session, dataset, user_id, timeout, session,
                    )
                return
        logger.info("close(): self-improvement finished in %.2f s", loop.time() - started)

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
        (seconds). :meth:`close` waits for it, at most ``timeout`` seconds.
        """
        self._require_open()
        if session_id is None:
            from memlab.graph._documents import load_documents

            if isinstance(tags, str) or not all(isinstance(tag, str) and tag.strip() for tag in tags):
                raise ValidationError(f"tags must be a list of non-blank strings, got {tags!r}")
            documents = await asyncio.to_thread(load_documents, data)
            target = await self.datasets.resolve(dataset, user, "write", create=True)
            return await self.memory.remember(target, documents, tags=[tag.strip() for tag in tags], progress=progress)
        text = _text_of(data)
        session = self.session_manager.resolve_session_id(session_id)
        resolved = await self.users.resolve(user)
        if not text.strip():
            return RememberResult(status="skipped_blank", session_id=session)
        qa_id = await self.session_manager.add_qa(resolved.id, question="", answer=text, session_id=session)
        if qa_id is None:
            return RememberResult(status="cache_unavailable", session_id=session)
        if self_improvement:
            self._schedule_improvement(dataset, session, resolved)
        return RememberResult(status="session_stored", session_id=session, data_ids=[qa_id])

    async def improve(self, *, dataset: Any = MAIN_DATASET, session_ids: Sequence[str], user: Any = None) -> ImproveResult:
        """Bridge cached session turns into ``dataset``'s graph.

        Each answered turn becomes one document (``Question: ...`` / ``Answer: ...``)
        tagged ``session:<id>``, added and cognified like :meth:`remember`; turns
        bridged before are not processed again. Status ``completed``, or
        ``nothing_to_improve`` when the sessions hold no answered turn.
        """
        self._require_open()
        if isinstance(session_ids, str) or not isinstance(session_ids, Sequence) or not session_ids:
            raise ValidationError(f"session_ids must be a non-empty list of session ids, got {session_ids!r}")
        target, sessions, turns, documents = await self._session_documents(dataset, session_ids, user)
        if not turns:
            return ImproveResult(status="nothing_to_improve", dataset_id=target.id, session_ids=sessions)
        result = await self.memory.remember(target, documents, tags=_session_tags(sessions))
        return ImproveResult(
            status="completed",
            dataset_id=target.id,
            session_ids=sessions,
            turns=turns,
            data_ids=result.data_ids,
            new_data_ids=result.new_data_ids,
        )

    async def _session_documents(self, dataset: Any, session_ids: Sequence[str], user: Any) -> tuple[Dataset, list[str], int, list[Document]]:
        """The dataset to write (created when missing), the resolved session ids, the answered-turn count, those turns as documents."""
        from memlab.graph._documents import load_documents

        resolved = await self.users.resolve(user)
        target = await self.datasets.resolve(dataset, resolved, "write", create=True)
        sessions = [self.session_manager.resolve_session_id(session_id) for session_id in session_ids]
        texts: list[str] = []
        for session in sessions:
            entries = await self.session_manager.get_session(resolved.id, session_id=session)
            texts.extend(_turn_text(entry.question, entry.answer) for entry in entries if entry.answer.strip())
        documents = await asyncio.to_thread(load_documents, texts) if texts else []
        return target, sessions, len(texts), documents

    async def _improve_in_background(self, dataset: Any, session: str, user: Any) -> None:
        """:meth:`improve` of one session, except that a dataset already holding every turn is left untouched (no pipeline runs)."""
        started = asyncio.get_running_loop().time()
        target, sessions, turns, documents = await self._session_documents(dataset, [session], user)
        hashes = {document.content_hash for document in documents}
        new = len(hashes) - len(await self._relational.known_hashes(target.id, hashes))
        if new:
            await self.memory.remember(target, documents, tags=_session_tags(sessions))
        logger.info(
            "self-improvement of session %r into dataset %s: %d turn(s), %d new document(s) chunked, extracted and embedded in %.2f s",
            session, target.id, turns, new, asyncio.get_running_loop().time() - started,
        )

    def _schedule_improvement(self, dataset: Any, session: str, user: Any) -> None:
        """Improve one session in the background (:meth:`_improve_in_background`); coalesces repeated requests."""
        key = (str(dataset), session, str(user.id))
        if key in self._improving:
            self._improve_again.add(key)
            return

        async def run() -> None:
            try:
                while True:
                    self._improve_again.discard(key)
                    try:
                        await self._improve_in_background(dataset, session, user)
                    except Exception as exc:  # background work: log, never raise into the caller
                        logger.warning("self-improvement of session %r into %r failed: %s: %s", session, dataset, type(exc).__name__, exc)
                    if key not in self._improve_again:
                        return
            finally:
                self._improving.pop(key, None)

        self._improving[key] = asyncio.get_running_loop().create_task(run())

    async def forget(
        self,
        *,
        dataset: Any = None,
        data_id: Any = None,
        memory_only: bool = False,
        everything: bool = False,
        user: Any = None,
    ) -> ForgetResult:
        """Delete permanent memory; returns what was removed.

        * ``forget(dataset=d)``: the dataset, its documents and its graph;
        * ``forget(data_id=x, dataset=d)``: one document (``dataset`` defaults to
          ``main_dataset``) and the graph elements only it supported;
        * ``forget(dataset=d, memory_only=True)``: the graph and vectors only; the
          documents stay (a later ``remember`` of new data rebuilds on top);
        * ``forget(everything=True)``: every dataset the user owns.

        The user needs ``write`` on the dataset. Session caches hear of every
        deletion through one call site (:meth:`_after_forget`).
        """
        self._require_open()
        resolved = await self.users.resolve(user)
        if everything:
            if dataset is not None or data_id is not None or memory_only:
                raise ValidationError("forget(everything=True) takes no dataset, data_id or memory_only")
            total = ForgetResult()
            for owned in await self._relational.datasets_of_owner(resolved.id):
                part = await self.memory.forget_dataset(owned, keep_dataset=False, keep_data=False)
                total = ForgetResult(**{name: sorted(getattr(total, name) + getattr(part, name)) for name in ForgetResult.model_fields})
            return total
        if data_id is not None:
            if memory_only:
                raise ValidationError("forget(data_id=...) removes one document; memory_only applies to a whole dataset")
            return await self.datasets.delete_data(MAIN_DATASET if dataset is None else dataset, data_id, resolved)
        if dataset is None:
            raise ValidationError("forget() needs dataset=..., data_id=... or everything=True")
        target = await self.datasets.resolve(dataset, resolved, "write")
        return await self.memory.forget_dataset(target, keep_dataset=memory_only, keep_data=memory_only)

    async def _after_forget(self, event: ForgetEvent) -> None:
        """The single call site for session-cache invalidation after a deletion (see :mod:`memlab.provenance`)."""
        logger.debug(
            "forgot %d documents, %d nodes, %d edges of dataset %s",
            len(event.data_ids), len(event.node_ids), len(event.edge_ids), event.dataset_id,
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
    ) -> list[RecallResponse]:
        """Search memory: the session, the graph, or both (SPEC §9; see :mod:`memlab._recall`).

        ``scope`` None/"auto": with ``session_id`` (and no datasets or query type) the
        session is searched first and the graph only when it finds nothing; without
        ``session_id`` the graph. ``query_type`` None routes the query by rule
        (:func:`memlab.retrievers.route_query`) unless ``auto_route=False`` (hybrid).
        Graph results are ``GraphRecallResponse`` items (``kind="answer"`` for a
        completion, with ``structured`` filled from ``response_model``); a graph
        that was never built (or whose build failed) answers with one
        ``SystemRecallResponse`` marker when it is the only source. ``datasets`` /
        ``dataset_ids`` the user cannot read raise ``PermissionDeniedError``. An
        empty query returns ``[]``.
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
        )

    async def search(
        self,
        query_text: str,
        query_type: Any = "GRAPH_COMPLETION",
        *,
        session_id: str | None = None,
        datasets: list[str] | None = None,
        top_k: int = 15,
        user: Any = None,
        only_context: bool = False,
    ) -> list[RecallResponse]:
        """One search type over the graph, session-aware for completion types.

        A completion type reads the session's last 10 turns into the prompt,
        answers, and stores the turn with ``used_graph_element_ids`` (the node and
        edge ids the answer's context held). An omitted ``session_id`` is the
        dataset-scoped default session (of the first of ``datasets``, else of
        ``main_dataset``). Retrieval-only types (and ``only_context=True``) return
        the ranked items and neither read nor write the session.
        """
        self._require_open()
        return await self._flows.search(
            query_text, query_type, session_id=session_id, datasets=datasets, top_k=top_k, user=user, only_context=only_context
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

        return Frames(self)

