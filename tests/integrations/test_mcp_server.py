"""``memlab mcp`` over stdio, driven by the official SDK's own client, and the server in process.

The stdio tests start ``python -m memlab mcp`` as a subprocess (the SDK's ``StdioServerParameters``)
on a fresh data root, list its tools, call each one, and check that a bad argument and a
memlab error are tool errors (``is_error``) after which the server still answers. The in-process
tests (``Client(create_server(stack))``, the SDK's in-memory transport) cover the callers: the
permission model, ``MEMLAB_API_KEY`` and what import memlab loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


from memlab import MemoryStack
from memlab.integrations.mcp import API_KEY_ENV, TOOL_NAMES, create_server
from memlab.testing import fast_config

from mcp import Client
from mcp_helpers import REPO, error, free_port, ok, server_env, stdio  # tests/integrations/mcp_helpers.py

READ_ONLY = {"recall", "get_session", "list_sessions", "session_usage"}


async def test_stdio_lists_and_calls_every_tool_and_bad_arguments_are_tool_errors(tmp_path):
    async with Client(stdio(tmp_path), read_timeout_seconds=120) as client:
        listed = (await client.list_tools()).tools
        assert [tool.name for tool in listed] == list(TOOL_NAMES)
        for tool in listed:
            assert tool.input_schema["type"] == "object" and tool.description, tool.name
            assert tool.output_schema is not None, tool.name
            assert tool.annotations.read_only_hint is (tool.name in READ_ONLY), tool.name
        schemas = {tool.name: tool.input_schema for tool in listed}
        assert schemas["recall"]["required"] == ["query"]
        assert schemas["add_feedback"]["properties"]["feedback_score"]["anyOf"][0] == {"maximum": 5, "minimum": 1, "type": "integer"}
        assert "enum" in json.dumps(schemas["search"]["$defs"]["SearchType"])
        forget_tool = next(tool for tool in listed if tool.name == "forget")
        assert forget_tool.annotations.destructive_hint is True and "dry_run" in schemas["forget"]["properties"]

        stored = await ok(client, "remember", text="Alice owns the billing service.", session_id="chat-1", self_improvement=False)
        assert stored["status"] == "session_stored"
        qa_id = stored["data_ids"][0]
        hits = await ok(client, "recall", query="Who owns billing?", session_id="chat-1")
        assert hits[0]["source"] == "session" and hits[0]["qa_id"] == qa_id and "Alice" in hits[0]["answer"]

        documents = await ok(client, "remember", text="Marie Curie discovered Polonium in 1898.")
        assert documents["status"] == "completed" and len(documents["data_ids"]) == 1
        graph = await ok(client, "recall", query="Who discovered Polonium?")
        assert graph and graph[0]["source"] == "graph"
        answered = await ok(client, "search", query="Who discovered Polonium?", session_id="chat-2")
        assert answered and answered[0]["source"] == "graph" and "Curie" in answered[0]["text"]
        chunks = await ok(client, "search", query="Polonium", query_type="CHUNKS", only_context=True)
        assert chunks and chunks[0]["search_type"] == "CHUNKS"

        assert await ok(client, "add_feedback", session_id="chat-1", qa_id=qa_id, feedback_score=5, feedback_text="right") == {
            "stored": True, "session_id": "chat-1", "qa_id": qa_id,
        }
        assert (await ok(client, "add_feedback", session_id="chat-1", qa_id="no-such-turn", feedback_score=1))["stored"] is False
        turns = await ok(client, "get_session", session_id="chat-1", last_n=10)
        assert [(turn["qa_id"], turn["feedback_score"]) for turn in turns] == [(qa_id, 5)]
        assert len(await ok(client, "get_session", session_id="chat-2")) == 1  # search stored its turn

        page = await ok(client, "list_sessions", order_by="started_at", descending=False)
        named = [item["session_id"] for item in page["items"] if item["session_id"].startswith("chat-")]
        assert named == ["chat-1", "chat-2"] and page["total"] == len(page["items"])  # and the default session recall answered in
        usage = await ok(client, "session_usage", session_id="chat-2")
        assert usage["session_id"] == "chat-2" and usage["tokens_in"] > 0 and usage["status"] == "running"
        assert await ok(client, "end_session", session_id="chat-2") == {"ended": True, "session_id": "chat-2", "status": "completed"}
        assert (await ok(client, "session_usage", session_id="chat-2"))["status"] == "completed"

        data_id = documents["data_ids"][0]
        preview = await ok(client, "forget", data_id=data_id, dry_run=True)
        assert preview["dry_run"] is True and preview["data_ids"] == [data_id]
        assert await ok(client, "recall", query="Who discovered Polonium?", query_type="CHUNKS")  # nothing was deleted
        deleted = await ok(client, "forget", data_id=data_id)
        assert deleted["dry_run"] is False and deleted["data_ids"] == [data_id]

        # bad arguments: the SDK's schema check, then memlab's own; each is a tool error, never a crash
        assert "top_k" in await error(client, "recall", query="x", top_k="lots")
        assert "query" in await error(client, "recall")
        assert "feedback_score" in await error(client, "add_feedback", session_id="chat-1", qa_id=qa_id, feedback_score=9)
        assert "last_n" in await error(client, "get_session", session_id="chat-1", last_n=0)
        assert "query_type" in await error(client, "search", query="x", query_type="NO_SUCH_TYPE")
        assert "invalid argument: ValidationError: unknown scope 'nowhere'" in await error(client, "recall", query="x", scope="nowhere")
        assert "invalid argument" in await error(client, "get_session", session_id="bad\x00id")
        assert "not found" in await error(client, "session_usage", session_id="never-seen")
        assert "file://" in await error(client, "remember", text="file:///etc/passwd")
        assert "no_such_tool" in await error(client, "no_such_tool")
        # ... and the server still answers
        assert (await ok(client, "list_sessions"))["total"] == page["total"]


async def test_stdio_acts_as_the_owner_of_memlab_api_key(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        alice = await stack.users.create("alice")
        key = await stack.users.create_api_key(alice)
        async with Client(stdio(tmp_path, **{API_KEY_ENV: key}), read_timeout_seconds=120) as client:
            await ok(client, "remember", text="a note of alice", session_id="alice-chat", self_improvement=False)
        assert [item.session_id for item in (await stack.usage.list_sessions(alice)).items] == ["alice-chat"]
        assert (await stack.usage.list_sessions(await stack.users.default())).total == 0


def test_stdio_with_a_revoked_key_stops_before_serving(tmp_path):
    import asyncio

    async def revoked() -> str:
        async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
            key = await stack.users.create_api_key(await stack.users.create("bob"))
            assert await stack.users.revoke_api_key(key)
            return key

    key = asyncio.run(revoked())
    env = {**os.environ, **server_env(tmp_path, **{API_KEY_ENV: key})}
    done = subprocess.run([sys.executable, "-m", "memlab", "mcp"], env=env, cwd=tmp_path, input="", capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"memlab: error: {API_KEY_ENV} is not a live memlab API key (unknown or revoked)"
    assert done.stdout == ""  # stdout is the protocol's


async def test_tools_act_as_the_caller_with_memlab_permissions(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        alice, bob = await stack.users.create("alice"), await stack.users.create("bob")
        async with Client(create_server(stack, user=alice)) as as_alice:
            stored = await ok(as_alice, "remember", text="Alice's launch plan is secret.", dataset="plans")
            await ok(as_alice, "remember", text="alice's turn", session_id="alice-chat", self_improvement=False)
        dataset_id = stored["dataset_id"]
        async with Client(create_server(stack, user=bob)) as as_bob:
            text = await error(as_bob, "forget", dataset=dataset_id, dry_run=True)
            assert text.startswith("Error executing tool forget: permission denied: PermissionDeniedError"), text
            assert "permission denied" in await error(as_bob, "recall", query="launch plan", query_type="CHUNKS", dataset_ids=[dataset_id])
            assert "not found" in await error(as_bob, "session_usage", session_id="alice-chat")
            assert await ok(as_bob, "get_session", session_id="alice-chat") == []
            assert (await ok(as_bob, "list_sessions"))["total"] == 0
        await stack.datasets.grant(dataset_id, bob, "read", by=alice)
        async with Client(create_server(stack, user=bob)) as as_bob:
            shared = await ok(as_bob, "recall", query="launch plan", query_type="CHUNKS", dataset_ids=[dataset_id])
            assert "launch plan" in shared[0]["text"]  # read: bob may search alice's dataset by its id ...
            assert "permission denied" in await error(as_bob, "forget", dataset=dataset_id, dry_run=True)  # ... but not write
        assert (await stack.forget(dataset=dataset_id, user=alice, dry_run=True)).dataset_ids  # still there


async def test_a_stack_that_is_not_open_is_an_unavailable_tool_error(tmp_path):
    stack = MemoryStack.from_config(fast_config(tmp_path))
    async with Client(create_server(stack)) as client:
        text = await error(client, "list_sessions")
        assert "unavailable: StackStateError:" in text and "is not open" in text, text


def test_import_memlab_and_the_integration_module_do_not_import_the_sdk():
    code = "import sys, memlab, memlab.integrations.mcp; print(sorted(n for n in ('mcp', 'starlette', 'uvicorn') if n in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_mcp_is_a_command_of_memlab():
    from memlab.cli import build_parser

    parser = build_parser()
    assert "mcp" in parser.format_help()
    args = parser.parse_args(["mcp", "--http", "--port", "0"])
    assert (args.http, args.host, args.port) == (True, None, 0)
    assert parser.parse_args(["mcp"]).http is False


def test_host_and_port_without_http_are_a_usage_error(capsys):
    from memlab.cli import main

    assert main(["mcp", "--port", "9000"]) == 2
    assert capsys.readouterr().err.strip() == "memlab: error: --host and --port apply to --http only (stdio has neither)"


def _memlab(argv: list[str], cwd, python: tuple[str, ...] = ("-m", "memlab"), **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **server_env(cwd), **env}
    return subprocess.run([sys.executable, *python, *argv], env=full, cwd=cwd, input="", capture_output=True, text=True, timeout=120)


def test_a_metadata_database_that_is_down_is_one_error_line_on_both_transports(tmp_path):
    port = free_port()  # nothing listens there
    for argv in (["mcp"], ["mcp", "--http", "--port", "0"]):
        done = _memlab(argv, tmp_path, MEMLAB_DB_URL=f"postgresql+asyncpg://postgres@127.0.0.1:{port}/x")
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert len(lines) == 1 and lines[0].startswith("memlab: error: ") and str(port) in lines[0], (argv, done.stderr)
        assert done.stdout == ""


def test_without_the_sdk_the_command_names_the_extra(tmp_path):
    hide = "import sys; sys.modules['mcp'] = None; from memlab.cli import main; sys.exit(main(sys.argv[1:]))"
    for argv in (["mcp"], ["mcp", "--http", "--port", "0"]):
        done = _memlab(argv, tmp_path, python=("-c", hide))
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip() == "memlab: error: memlab.integrations.mcp needs the MCP SDK: pip install 'memlab[mcp]'"
