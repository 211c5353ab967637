"""A real uvicorn server on a free loopback port, driven with httpx.

The server runs ``memlab.api.create_app`` in a thread on its own stack; the test writes
sessions through a second stack on the same data root (``memlab.db`` is shared, as
between processes), and both read one ``FakeClock``, so a test ages sessions by
advancing it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
import uvicorn

from memlab import MemoryStack
from memlab.api import create_app
from memlab.testing import FakeClock, fast_config

START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
#: a question the offline LLM answers from an empty or small dataset (one LLM call per turn, plus analysis)
QUESTION = "Who owns the billing service?"


@contextmanager
def running_server(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a thread on a free loopback port; yields the base URL once /healthz answers 200."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", ws="none", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="memlab-api-test-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            if not thread.is_alive():
                raise RuntimeError("the test server exited during startup")
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the test server did not answer /healthz within 60 s")
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "the test server did not stop"


@dataclass
class Live:
    """A running API (``url``, ``client``) and the writer stack on the same data root and clock."""

    url: str
    stack: MemoryStack
    clock: FakeClock
    client: httpx.AsyncClient

    async def key(self, user: Any) -> str:
        return await self.stack.users.create_api_key(user)

    async def get(self, path: str, key: str | None = None, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return await self.client.get(path, params=params, headers=headers)

    async def post(self, path: str, key: str | None, body: Any = None, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return await self.client.post(path, json=body, headers=headers, **kwargs)

    async def posted(self, path: str, key: str, body: Any = None, status: int = 200) -> Any:
        """POST ``body`` as the key's user; asserts the status and returns the JSON answer."""
        response = await self.post(path, key, body)
        assert response.status_code == status, (path, body, response.status_code, response.text)
        return response.json()

    async def session(self, user: Any, session_id: str, dataset: str | None = None) -> None:
        await add_session(self.stack, user, session_id, dataset)

    async def ok(self, path: str, key: str, **params: Any) -> Any:
        response = await self.get(path, key, **params)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
async def live(tmp_path) -> Any:
    clock = FakeClock(START)
    config = fast_config(tmp_path)
    async with MemoryStack.from_config(config, clock=clock) as writer:
        with running_server(create_app(MemoryStack.from_config(config, clock=clock))) as url:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                yield Live(url, writer, clock, client)


async def add_session(stack: MemoryStack, user: Any, session_id: str, dataset: str | None = None) -> None:
    """A session of ``user``: a remembered turn (no dataset), or a searched turn attributed to its own ``dataset`` (created when missing)."""
    if dataset is None:
        result = await stack.remember("a note for later", session_id=session_id, user=user, self_improvement=False)
        assert result.status == "session_stored", result
    else:
        await stack.datasets.create(dataset, user=user)  # or the user's existing one of that name
        await stack.search(QUESTION, datasets=[dataset], session_id=session_id, user=user)


@pytest.fixture
def serve_app():
    """``serve_app(app)``: the :func:`running_server` context manager (yields the base URL)."""
    return running_server


@pytest.fixture
def env_root(tmp_path, monkeypatch):
    """A data root in ``MEMLAB_DATA_ROOT`` for ``MemoryStack.from_env()`` (the hashing embedder; no cache or metadata URL from the shell)."""
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    for name in ("CACHE_BACKEND", "CACHE_DB_URL", "CACHING", "MEMLAB_DB_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path
