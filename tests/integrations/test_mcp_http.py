"""``memlab mcp --http``: a real server process on a free loopback port, driven by the SDK's streamable HTTP client.

Keys are made with ``stack.users.create_api_key`` on a second stack over the same data root
(``memlab.db`` is shared between processes), exactly as for ``memlab serve``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from memlab import MemoryStack
from memlab.integrations.mcp import MCP_PATH, TOOL_NAMES
from memlab.testing import fast_config

import httpx2  # the SDK's HTTP client library (a dependency of mcp)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_helpers import error, free_port, ok, server_env  # tests/integrations/mcp_helpers.py

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextmanager
def mcp_http_server(data_root: Path) -> Iterator[str]:
    """``python -m memlab mcp --http`` on a free loopback port; yields the base URL once /healthz answers 200."""
    port = free_port()
    env = {**os.environ, **server_env(data_root)}
    for name in ("CACHE_BACKEND", "CACHE_DB_URL", "CACHING", "MEMLAB_DB_URL"):
        env.pop(name, None)
    log = data_root / "mcp-server.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "memlab", "mcp", "--http", "--port", str(port)], env=env, cwd=data_root, stdout=subprocess.DEVNULL, stderr=stderr
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        assert process.returncode in (0, -15), log.read_text()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 90) -> None:
    """Return once ``url``/healthz answers 200; raise with the server's log if it exits first or stays silent."""
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server never answered /healthz (exit status {process.returncode}): {log.read_text()}")


@asynccontextmanager
async def client_with_key(url: str, key: str) -> AsyncIterator[Any]:
    """The SDK's Client over streamable HTTP, sending ``Authorization: Bearer <key>`` on every request."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(120)) as http:
        async with Client(streamable_http_client(f"{url}{MCP_PATH}", http_client=http), read_timeout_seconds=120) as client:
            yield client


async def test_http_needs_a_memlab_api_key_and_each_call_acts_as_its_user(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        alice, bob = await stack.users.create("alice"), await stack.users.create("bob")
        alice_key, bob_key = await stack.users.create_api_key(alice), await stack.users.create_api_key(bob)
        with mcp_http_server(tmp_path) as url:
            health = httpx.get(f"{url}/healthz").json()
            assert health["status"] == "ok" and health["stack"] == "open"
            for headers in ({}, {"Authorization": "Bearer mlk_" + "x" * 43}, {"Authorization": "Bearer not-a-key"}, {"Authorization": "Basic YTpi"}):
                refused = httpx.post(f"{url}{MCP_PATH}", json=INITIALIZE, headers={**ACCEPT, **headers})
                assert refused.status_code == 401, (headers, refused.text)
                assert refused.headers["www-authenticate"].startswith("Bearer")

            async with client_with_key(url, alice_key) as as_alice:
                assert [tool.name for tool in (await as_alice.list_tools()).tools] == list(TOOL_NAMES)
                stored = await ok(as_alice, "remember", text="Alice owns the billing service.", session_id="alice-chat", self_improvement=False)
                hits = await ok(as_alice, "recall", query="Who owns billing?", session_id="alice-chat")
                assert hits[0]["qa_id"] == stored["data_ids"][0]
                assert (await ok(as_alice, "session_usage", session_id="alice-chat"))["user_id"] == str(alice.id)
                assert "top_k" in await error(as_alice, "recall", query="x", top_k=0)  # a bad argument: a tool error over HTTP too
                assert (await ok(as_alice, "list_sessions"))["total"] == 1

            async with client_with_key(url, bob_key) as as_bob:  # bob sees none of alice's sessions
                assert "not found" in await error(as_bob, "session_usage", session_id="alice-chat")
                assert await ok(as_bob, "get_session", session_id="alice-chat") == []
                assert (await ok(as_bob, "list_sessions"))["total"] == 0
                await ok(as_bob, "remember", text="bob's note", session_id="bob-chat", self_improvement=False)
            assert [item.session_id for item in (await stack.usage.list_sessions(bob)).items] == ["bob-chat"]

            opened = httpx.post(f"{url}{MCP_PATH}", json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {alice_key}"})
            assert opened.status_code == 200, opened.text
            session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            hijack = httpx.post(f"{url}{MCP_PATH}", json=listing, headers={**ACCEPT, **session, "Authorization": f"Bearer {bob_key}"})
            assert hijack.status_code == 404  # alice's MCP session is not bob's: answered as an unknown session

            assert await stack.users.revoke_api_key(alice_key)  # a revoked key is refused at once
            refused = httpx.post(f"{url}{MCP_PATH}", json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Bearer {alice_key}"})
            assert refused.status_code == 401
