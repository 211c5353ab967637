"""The ``tapes`` backend against a real HTTP ingest server on 127.0.0.1.

The server records every request; a gate lets a test hold responses to observe
what the backend does while a mirror POST is in flight. The cache contract itself
is the conformance suite's (``tapes`` and ``tapes-memory`` in tests/cache/test_conformance.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memlab.cache._base import CacheBackend
from memlab.cache._disk import DiskCache
from memlab.cache._memory import MemoryCache
from memlab.cache._tapes import TapesCache
from memlab.exceptions import CacheConnectionError, SessionQAEntryValidationError
from memlab.testing import FakeClock
from memlab.ttl import SlidingTTL


class IngestServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []
        self.status = 202
        self.gate = threading.Event()
        self.gate.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address) -> None:  # a client that gave up (timeout) is expected
        pass


class _Handler(BaseHTTPRequestHandler):
    server: IngestServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append(
            {"path": self.path, "content_type": self.headers.get("Content-Type"), "body": json.loads(body)}
        )
        self.server.gate.wait(10)
        self.send_response(self.server.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    srv = IngestServer()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.gate.set()
    srv.shutdown()
    srv.server_close()
    thread.join()


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tapes(tmp_path, url: str, **kwargs) -> TapesCache:
    return TapesCache(tmp_path / "sessions_db", ingest_url=url, clock=FakeClock(), purge_interval_seconds=0, **kwargs)


async def turn(backend, **fields):
    fields.setdefault("question", "What is a tape?")
    fields.setdefault("answer", "A recorded turn.")
    return await backend.create_qa_entry("u1", "s1", **fields)


def mirror_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "memlab.cache" and "tapes" in r.getMessage()]


# -- a wrapper around any backend ------------------------------------------------------------


def test_tapes_cache_is_a_cache_backend_with_the_whole_interface(tmp_path):
    backend = tapes(tmp_path, "http://127.0.0.1:9")
    assert isinstance(backend, CacheBackend)
    public = {name for name in dir(CacheBackend) if not name.startswith("_")} | {"__aenter__", "__aexit__"}
    public |= {"ttl", "clock", "purge_interval_seconds"}  # instance attributes of a CacheBackend
    assert {name for name in public if not hasattr(backend, name)} == set()
    assert (backend.name, backend.default_ttl_policy) == ("tapes", DiskCache.default_ttl_policy)


def test_a_directory_means_a_disk_cache_there_with_the_same_options(tmp_path):
    clock, ttl = FakeClock(), SlidingTTL(60)
    backend = TapesCache(tmp_path / "db", ingest_url="http://127.0.0.1:9", ttl=ttl, clock=clock, purge_interval_seconds=7)
    assert isinstance(backend.inner, DiskCache) and backend.path == backend.inner.path == tmp_path / "db"
    assert (backend.ttl, backend.clock, backend.purge_interval_seconds) == (ttl, clock, 7)
    assert (backend.inner.ttl, backend.inner.clock, backend.inner.purge_interval_seconds) == (ttl, clock, 7)
    with pytest.raises(TypeError, match="inner backend"):
        TapesCache(MemoryCache(), ingest_url="http://127.0.0.1:9", clock=clock)


@pytest.mark.parametrize("inner", ["fs", "memory"])
async def test_the_mirror_wraps_any_backend(tmp_path, server, inner):
    clock = FakeClock()
    store = DiskCache(tmp_path / "db", clock=clock) if inner == "fs" else MemoryCache(clock=clock)
    async with TapesCache(store, ingest_url=server.url) as backend:
        assert backend.inner is store and backend.clock is clock and backend.ttl is store.ttl
        assert repr(store) in repr(backend)
        assert backend.path == getattr(store, "path", None)
        entry = await turn(backend, qa_id="t1")
        await backend.flush()
        assert await store.get_all_qa_entries("u1", "s1") == [entry]  # stored in the inner backend, once
        assert (await backend.read_qa_log("u1", "s1")).entries == [entry]
    [sent] = server.requests
    assert sent["body"]["request"]["metadata"] == {"session_id": "s1", "qa_id": "t1"}


async def test_close_flushes_then_closes_the_inner_backend_and_it_reopens(tmp_path, server):
    backend = tapes(tmp_path, server.url)
    async with backend:
        await turn(backend, question="q0")
    assert len(server.requests) == 1
    with pytest.raises(CacheConnectionError):
        await backend.inner.get_all_qa_entries("u1", "s1")  # the inner backend was closed too
    with pytest.raises(CacheConnectionError):
        await turn(backend, question="refused")  # the closed inner backend rejects it: nothing to mirror
    async with backend:
        await turn(backend, question="q1")
        assert [e.question for e in await backend.get_all_qa_entries("u1", "s1")] == ["q0", "q1"]
    assert [r["body"]["request"]["messages"][-1]["content"] for r in server.requests] == ["q0", "q1"]


async def test_a_turn_stored_while_the_mirror_is_not_open_is_skipped_with_a_warning(server, caplog):
    store = MemoryCache(clock=FakeClock())
    backend = TapesCache(store, ingest_url=server.url)
    await store.open()  # the inner backend opened by its owner, the mirror never
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        entry = await turn(backend)
    assert await store.get_all_qa_entries("u1", "s1") == [entry]
    assert server.requests == []
    assert any("skipped" in message for message in mirror_warnings(caplog))


# -- payload shapes --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
async def test_each_turn_is_posted_in_the_providers_wire_format(tmp_path, server, provider):
    async with tapes(tmp_path, server.url + "/", provider=provider) as backend:
        entry = await turn(backend, context="Tapes record LLM traffic.", qa_id="t1")
        await backend.flush()
        assert await backend.get_all_qa_entries("u1", "s1") == [entry]

    [sent] = server.requests
    assert sent["path"] == "/v1/ingest"
    assert sent["content_type"] == "application/json"
    body = sent["body"]
    assert (body["provider"], body["agent_name"]) == (provider, "memlab")
    request, response = body["request"], body["response"]
    if provider == "openai":
        assert request["messages"] == [
            {"role": "system", "content": "Tapes record LLM traffic."},
            {"role": "user", "content": "What is a tape?"},
        ]
        assert request["user"] == "u1" and request["metadata"] == {"session_id": "s1", "qa_id": "t1"}
        assert response["object"] == "chat.completion"
        assert response["choices"] == [
            {"index": 0, "message": {"role": "assistant", "content": "A recorded turn."}, "finish_reason": "stop"}
        ]
    elif provider == "anthropic":
        assert request["system"] == "Tapes record LLM traffic."
        assert request["messages"] == [{"role": "user", "content": "What is a tape?"}]
        assert isinstance(request["max_tokens"], int)
        assert (response["type"], response["role"], response["stop_reason"]) == ("message", "assistant", "end_turn")
        assert response["content"] == [{"type": "text", "text": "A recorded turn."}]
    else:
        assert request["messages"][-1] == {"role": "user", "content": "What is a tape?"}
        assert request["stream"] is False
        assert response["message"] == {"role": "assistant", "content": "A recorded turn."}
        assert response["done"] is True and response["created_at"] == entry.time
    assert request["model"] == response["model"]


async def test_unknown_provider_is_mirrored_as_openai_with_a_warning(tmp_path, server, caplog):
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        backend = tapes(tmp_path, server.url, provider="mistral")
    assert any("mistral" in message for message in mirror_warnings(caplog))
    async with backend:
        await turn(backend)
    [sent] = server.requests
    assert sent["body"]["provider"] == "openai"
    assert sent["body"]["response"]["object"] == "chat.completion"


# -- the local store is the truth ----------------------------------------------------------


@pytest.mark.parametrize("failure", ["refused", "http_500", "http_404", "timeout"])
async def test_a_failed_mirror_is_a_warning_never_a_failed_write(tmp_path, server, closed_port, caplog, failure):
    url = f"http://127.0.0.1:{closed_port}" if failure == "refused" else server.url
    if failure.startswith("http_"):
        server.status = int(failure[5:])
    if failure == "timeout":
        server.gate.clear()  # never answers within the timeout
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        async with tapes(tmp_path, url, timeout=0.3) as backend:
            entries = [await turn(backend), await turn(backend, question="second")]
            await backend.flush()
            assert await backend.get_all_qa_entries("u1", "s1") == entries
    assert len(mirror_warnings(caplog)) == 2


async def test_only_new_turns_are_mirrored(tmp_path, server):
    async with tapes(tmp_path, server.url) as backend:
        entry = await turn(backend, qa_id="t1")
        with pytest.raises(SessionQAEntryValidationError):
            await turn(backend, qa_id="t1")  # a write the inner backend rejects is not mirrored
        with pytest.raises(SessionQAEntryValidationError):
            await turn(backend, feedback_score=9)
        await backend.update_qa_entry("u1", "s1", "t1", answer="edited", feedback_score=4)
        await backend.delete_feedback("u1", "s1", "t1")
        await backend.create_session_context_entry("u1", "s1", {"id": "g1", "text": "rule"})
        await backend.update_session_context_entry("u1", "s1", "g1", {"text": "changed"})
        await backend.delete_session_context_entry("u1", "s1", "g1")
        await backend.delete_qa_entry("u1", "s1", "t1")
        await backend.delete_session("u1", "s1")
        await backend.flush()
    assert [r["body"]["response"]["choices"][0]["message"]["content"] for r in server.requests] == [entry.answer]


# -- background mirroring ------------------------------------------------------------------


async def test_the_turn_returns_before_the_post_completes_and_close_flushes(tmp_path, server, caplog):
    server.gate.clear()
    backend = tapes(tmp_path, server.url)
    await backend.open()
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        for i in range(3):
            await turn(backend, question=f"q{i}")  # returns while the server holds its answer
        assert len(backend._pending) == 3
        closing = asyncio.create_task(backend.close())
        await asyncio.sleep(0.1)
        assert not closing.done()  # close() waits for the pending mirrors
        server.gate.set()
        await closing
    assert backend._pending == set()
    assert sorted(r["body"]["request"]["messages"][-1]["content"] for r in server.requests) == ["q0", "q1", "q2"]
    assert mirror_warnings(caplog) == []


async def test_pending_mirrors_are_bounded_and_the_next_turn_waits_for_a_slot(tmp_path, server):
    server.gate.clear()
    backend = tapes(tmp_path, server.url)
    backend.max_in_flight = 2
    async with backend:
        await turn(backend, question="q0")
        await turn(backend, question="q1")
        third = asyncio.create_task(turn(backend, question="q2"))
        await asyncio.sleep(0.1)
        assert not third.done()  # stored locally, waiting for a mirror slot
        assert [e.question for e in await backend.get_all_qa_entries("u1", "s1")] == ["q0", "q1", "q2"]
        assert len(backend._pending) == 2
        server.gate.set()
        await third
    assert len(server.requests) == 3


async def test_a_turn_still_waiting_for_a_slot_when_close_starts_is_skipped_with_a_warning(tmp_path, server, caplog):
    server.gate.clear()
    backend = tapes(tmp_path, server.url)
    backend.max_in_flight = 1
    await backend.open()
    with caplog.at_level(logging.WARNING, logger="memlab.cache"):
        await turn(backend, question="q0")
        waiting = asyncio.create_task(turn(backend, question="q1"))
        await asyncio.sleep(0.1)
        closing = asyncio.create_task(backend.close())
        await asyncio.sleep(0.1)
        server.gate.set()
        await asyncio.gather(waiting, closing)
    assert [r["body"]["request"]["messages"][-1]["content"] for r in server.requests] == ["q0"]
    skipped = f"tapes mirror of turn {waiting.result().qa_id} skipped: the tapes cache is not open"
    assert [message for message in mirror_warnings(caplog) if "skipped" in message] == [skipped]
    async with backend:
        assert [e.question for e in await backend.get_all_qa_entries("u1", "s1")] == ["q0", "q1"]
