"""The ``tapes`` cache backend: any backend, with new turns mirrored to Tapes.

Tapes is an LLM telemetry service; its ingest endpoint takes one completed turn as
``{"provider", "agent_name", "request", "response"}`` where ``request`` and
``response`` are bodies in the provider's own wire format. After each successful
:meth:`~TapesCache.create_qa_entry` the turn is posted there as if the answer had
come from that provider: the question is the user message, the turn's retrieved
``context`` (when any) the system prompt, the answer the assistant message.

:class:`TapesCache` wraps an inner :class:`~memlab.cache.CacheBackend` (by
default an ``fs`` :class:`~memlab.cache.DiskCache`) and is a ``CacheBackend`` by
registration, not inheritance (it has no storage primitives of its own): every
public method is the inner backend's, called once, so validation, TTL, write-time
sweeps, ``read_qa_log`` cursors and errors are exactly the inner backend's;
``create_qa_entry`` then mirrors the turn it returned. A turn the inner backend
rejects is never mirrored.

The inner store is the truth. Mirroring is best effort and **append-only**:
updates, feedback, deletes, context entries, expiry and prunes are never
mirrored, so Tapes keeps every turn ever created, including ones deleted here.
A failed mirror (connection refused, timeout, HTTP status >= 400) is logged as a
warning and never fails or undoes the write.

Why a background task and not an awaited POST (measured on the 2-core machine,
httpx 0.28, an HTTP/1.1 ingest server in another process on loopback): an
awaited POST takes ~1.7 ms of wall time (~1.2 ms of it CPU on the event loop),
about 7x a whole local fs append (~0.23 ms), and a slow or hung service would hold
every turn for up to ``timeout``. So the POST runs as a task after the write has
committed, and ``create_qa_entry`` returns at once; in a conversation, where turns
are seconds apart, the mirror costs the turn nothing. Its CPU still runs on the
loop, so a tight loop of appends is bounded by httpx (a few hundred turns/s here,
vs thousands for ``fs``). Concurrency is bounded: at most
:attr:`TapesCache.max_in_flight` (4) mirrors are pending, on as many pooled
connections; the next ``create_qa_entry`` then waits for a slot (backpressure,
instead of unbounded memory or silently dropped records). 4 because httpx's CPU
per request grows with concurrency (~1.5 ms at 4 in flight, 2.5-3.3 ms at 16-64).
:meth:`TapesCache.flush` waits for the pending mirrors; ``close()`` flushes before
it closes the HTTP client and then the inner backend, so no mirror of a turn whose
``create_qa_entry`` returned is lost on an orderly shutdown (a turn still waiting
for a slot when ``close()`` starts is skipped with a warning; a process that dies
first loses only its pending mirrors, never stored turns). Arrival order at Tapes
is not guaranteed: each record is self-contained.
"""


from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from memlab._clock import Clock
from memlab.cache._base import CacheBackend, QALog, config_options
from memlab.exceptions import ConfigError
from memlab.models import SessionQAEntry
from memlab.ttl import TTLPolicy

if TYPE_CHECKING:  # imported when the cache opens
    import httpx

logger = logging.getLogger("memlab.cache")

#: The model name mirrored turns carry (memlab does not know which model answered).
MIRROR_MODEL = "memlab"
#: ``agent_name`` of every mirrored turn.
AGENT_NAME = "memlab"


def _messages(entry: SessionQAEntry) -> list[dict[str, Any]]:
    messages = [{"role": "system", "content": entry.context}] if entry.context else []
    messages.append({"role": "user", "content": entry.question})
    return messages


def _unix(entry: SessionQAEntry) -> int:
    try:
        return int(datetime.fromisoformat(entry.time).timestamp())
    except ValueError:
        return 0


def _openai(user_id: str, session_id: str, entry: SessionQAEntry) -> tuple[dict, dict]:
    request = {
        "model": MIRROR_MODEL,
        "messages": _messages(entry),
        "user": user_id,
        "metadata": {"session_id": session_id, "qa_id": entry.qa_id or ""},
    }
    response = {
        "id": f"chatcmpl-{entry.qa_id}",
        "object": "chat.completion",
        "created": _unix(entry),
        "model": MIRROR_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": entry.answer}, "finish_reason": "stop"}],
    }
    return request, response


def _anthropic(user_id: str, session_id: str, entry: SessionQAEntry) -> tuple[dict, dict]:
    request: dict[str, Any] = {
        "model": MIRROR_MODEL,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": entry.question}],
        "metadata": {"user_id": user_id},
    }
    if entry.context:
        request["system"] = entry.context
    response = {
        "id": f"msg_{entry.qa_id}",
        "type": "message",
        "role": "assistant",
        "model": MIRROR_MODEL,
        "content": [{"type": "text", "text": entry.answer}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
    }
    return request, response


def _ollama(user_id: str, session_id: str, entry: SessionQAEntry) -> tuple[dict, dict]:
    request = {"model": MIRROR_MODEL, "messages": _messages(entry), "stream": False}
    response = {
        "model": MIRROR_MODEL,
        "created_at": entry.time,
        "message": {"role": "assistant", "content": entry.answer},
        "done": True,
        "done_reason": "stop",
    }
    return request, response


#: provider name -> builder of its ``(request, response)`` bodies
PROVIDERS: dict[str, Callable[[str, str, SessionQAEntry], tuple[dict, dict]]] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "ollama": _ollama,
}


def ingest_record(provider: str, user_id: str, session_id: str, entry: SessionQAEntry) -> dict[str, Any]:
    """The JSON body posted to ``/v1/ingest`` for one turn (``provider`` must be in :data:`PROVIDERS`)."""
    request, response = PROVIDERS[provider](user_id, session_id, entry)
    return {"provider": provider, "agent_name": AGENT_NAME, "request": request, "response": response}



@CacheBackend.register
class TapesCache:
    """A :class:`~memlab.cache.CacheBackend` that mirrors each new turn of ``inner`` to Tapes. See the module docstring.

    ``inner`` is the backend that stores everything: a ``CacheBackend``, which
    this cache then owns (opens and closes), or a directory, meaning a
    :class:`~memlab.cache.DiskCache` there built with ``backend_kwargs`` (``ttl``,
    ``clock``, ``purge_interval_seconds``, ``lock_timeout``); with a ready backend
    ``backend_kwargs`` must be empty. ``ingest_url`` is the service root
    (``/v1/ingest`` is appended). ``provider`` picks the wire format: ``openai``
    (default), ``anthropic`` or ``ollama``; any other name is mirrored in the
    ``openai`` format with a logged warning. ``timeout`` bounds each POST in
    seconds. Needs ``httpx``.
    """

    name: ClassVar[str] = "tapes"
    #: the default inner backend's (``fs``) policy, chosen when the config says ``auto``
    default_ttl_policy: ClassVar[str] = "sliding"
    #: most mirror POSTs pending at once; beyond that create_qa_entry waits for a slot (read at open)
    max_in_flight: int = 4

    def __init__(
        self,
        inner: CacheBackend | str | Path,
        *,
        ingest_url: str,
        provider: str = "openai",
        timeout: float = 5.0,
        **backend_kwargs: Any,
    ) -> None:
        if isinstance(inner, CacheBackend):
            if backend_kwargs:
                raise TypeError(f"options {sorted(backend_kwargs)} belong to the inner backend's constructor, not TapesCache's")
            self.inner = inner
        else:
            from memlab.cache._disk import DiskCache

            self.inner = DiskCache(inner, **backend_kwargs)
        chosen = (provider or "").strip().lower()
        if chosen not in PROVIDERS:
            logger.warning("unknown tapes provider %r: mirroring in the openai format (known: %s)", provider, ", ".join(PROVIDERS))
            chosen = "openai"
        self.provider = chosen
        self.ingest_url = ingest_url.rstrip("/")
        self.endpoint = f"{self.ingest_url}/v1/ingest"
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None  # while open
        self._slots: asyncio.Semaphore | None = None
        self._pending: set[asyncio.Task] = set()

    @classmethod
    def from_config(cls, config: Any, *, clock: Clock | None = None, ttl: TTLPolicy | None = None) -> "TapesCache":
        """``tapes`` from the config: an ``fs`` cache in ``config.fs_cache_dir`` mirrored to ``TAPES_INGEST_URL``."""
        cache = config.cache
        if not cache.tapes_ingest_url:
            raise ConfigError("the tapes cache backend needs TAPES_INGEST_URL (the Tapes ingest service)")
        return cls(config.fs_cache_dir, ingest_url=cache.tapes_ingest_url, provider=cache.tapes_provider, **config_options(config, clock, ttl))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, ingest_url={self.ingest_url!r}, provider={self.provider!r})"

    @property
    def ttl(self) -> TTLPolicy:
        """The inner backend's TTL policy."""
        return self.inner.ttl

    @property
    def clock(self) -> Clock:
        """The inner backend's clock."""
        return self.inner.clock

    @property
    def purge_interval_seconds(self) -> float:
        """The inner backend's sweep throttle (its writes sweep, not this wrapper)."""
        return self.inner.purge_interval_seconds

    @property
    def path(self) -> Path | None:
        """The inner backend's ``path`` (None when it has none), for the tools that report where a cache lives."""
        return getattr(self.inner, "path", None)

    # -- lifecycle ---------------------------------------------------------------

    async def open(self) -> None:
        """Open the inner backend, then the HTTP client. Idempotent."""
        try:
            import httpx
        except ImportError as exc:  # pragma: no cover - httpx is a dependency
            raise ImportError("the tapes cache backend needs httpx: pip install httpx") from exc
        await self.inner.open()
        if self._client is None:
            slots = self.max_in_flight
            self._client = httpx.AsyncClient(
                timeout=self.timeout, limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots)
            )
            self._slots = asyncio.Semaphore(slots)

    async def close(self) -> None:
        """Wait for the pending mirrors, close the HTTP client, then the inner backend. Idempotent; may be reopened."""
        client, self._client, self._slots = self._client, None, None
        try:
            if client is not None:
                try:
                    await self.flush()
                finally:
                    await client.aclose()
        finally:
            await self.inner.close()

    async def __aenter__(self) -> "TapesCache":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self) -> None:
        """Wait until every pending mirror POST has finished (succeeded or failed)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    # -- QA turns: the inner backend's, plus the mirror of a created turn -----------

    async def create_qa_entry(self, user_id: str, session_id: str, **fields: Any) -> SessionQAEntry:
        """The inner backend's :meth:`~CacheBackend.create_qa_entry`; the stored turn is then mirrored in the background.

        Waits for a mirror slot when :attr:`max_in_flight` mirrors are pending. A
        turn stored while this cache is not open (or is closing) is not mirrored: a
        warning says so.
        """
        entry = await self.inner.create_qa_entry(user_id, session_id, **fields)
        client, slots = self._client, self._slots
        if client is not None and slots is not None:
            record = ingest_record(self.provider, user_id, session_id, entry)
            await slots.acquire()
            if self._client is client:
                task = asyncio.get_running_loop().create_task(self._post(client, slots, record, entry.qa_id))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
                return entry
            slots.release()
        logger.warning("tapes mirror of turn %s skipped: the tapes cache is not open", entry.qa_id)
        return entry

    async def get_latest_qa_entries(self, user_id: str, session_id: str, last_n: int | None = None) -> list[SessionQAEntry]:
        """The inner backend's :meth:`~CacheBackend.get_latest_qa_entries`."""
        return await self.inner.get_latest_qa_entries(user_id, session_id, last_n)

    async def get_all_qa_entries(self, user_id: str, session_id: str) -> list[SessionQAEntry]:
        """The inner backend's :meth:`~CacheBackend.get_all_qa_entries`."""
        return await self.inner.get_all_qa_entries(user_id, session_id)

    async def read_qa_log(self, user_id: str, session_id: str, cursor: Hashable | None = None) -> QALog:
        """The inner backend's :meth:`~CacheBackend.read_qa_log` (its cursors)."""
        return await self.inner.read_qa_log(user_id, session_id, cursor)

    async def update_qa_entry(self, user_id: str, session_id: str, qa_id: str, **fields: Any) -> bool:
        """The inner backend's :meth:`~CacheBackend.update_qa_entry` (not mirrored)."""
        return await self.inner.update_qa_entry(user_id, session_id, qa_id, **fields)

    async def delete_feedback(self, user_id: str, session_id: str, qa_id: str) -> bool:
        """The inner backend's :meth:`~CacheBackend.delete_feedback` (not mirrored)."""
        return await self.inner.delete_feedback(user_id, session_id, qa_id)

    async def delete_qa_entry(self, user_id: str, session_id: str, qa_id: str) -> bool:
        """The inner backend's :meth:`~CacheBackend.delete_qa_entry` (not mirrored)."""
        return await self.inner.delete_qa_entry(user_id, session_id, qa_id)

    async def delete_session(self, user_id: str, session_id: str) -> bool:
        """The inner backend's :meth:`~CacheBackend.delete_session` (not mirrored)."""
        return await self.inner.delete_session(user_id, session_id)

    # -- session context and maintenance: the inner backend's, never mirrored ----------

    async def create_session_context_entry(self, user_id: str, session_id: str, entry: dict[str, Any]) -> str:
        """The inner backend's :meth:`~CacheBackend.create_session_context_entry`."""
        return await self.inner.create_session_context_entry(user_id, session_id, entry)

    async def get_session_context_entries(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """The inner backend's :meth:`~CacheBackend.get_session_context_entries`."""
        return await self.inner.get_session_context_entries(user_id, session_id)

    async def update_session_context_entry(self, user_id: str, session_id: str, entry_id: str, changes: dict[str, Any]) -> bool:
        """The inner backend's :meth:`~CacheBackend.update_session_context_entry`."""
        return await self.inner.update_session_context_entry(user_id, session_id, entry_id, changes)

    async def delete_session_context_entry(self, user_id: str, session_id: str, entry_id: str) -> bool:
        """The inner backend's :meth:`~CacheBackend.delete_session_context_entry`."""
        return await self.inner.delete_session_context_entry(user_id, session_id, entry_id)

    async def sweep(self) -> int:
        """The inner backend's :meth:`~CacheBackend.sweep`."""
        return await self.inner.sweep()

    def turn_lock(self, user_id: str, session_id: str, *, timeout: float):
        """The wrapped backend's turn lock (the mirror stores nothing of its own)."""
        return self.inner.turn_lock(user_id, session_id, timeout=timeout)

    async def prune(self) -> None:
        """The inner backend's :meth:`~CacheBackend.prune` (Tapes keeps its records)."""
        await self.inner.prune()

    # -- mirroring -------------------------------------------------------------------

    async def _post(self, client: httpx.AsyncClient, slots: asyncio.Semaphore, record: dict[str, Any], qa_id: str | None) -> None:
        try:
            response = await client.post(self.endpoint, json=record)
            if response.status_code >= 400:
                logger.warning(
                    "tapes mirror of turn %s rejected by %s: HTTP %s", qa_id, self.endpoint, response.status_code
                )
        except Exception as exc:  # noqa: BLE001 - a mirror failure never fails the write
            logger.warning("tapes mirror of turn %s to %s failed: %s: %s", qa_id, self.endpoint, type(exc).__name__, exc)
        finally:
            slots.release()
