"""Helpers of the MCP tests: the server's environment, the stdio parameters, and tool calls that must succeed or fail."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

import memlab

REPO = Path(memlab.__file__).resolve().parent.parent
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1"}


def server_env(data_root: Path, **extra: str) -> dict[str, str]:
    """What the server subprocess needs: this checkout's memlab, a data root, the hashing embedder, offline."""
    return {"PYTHONPATH": str(REPO), "MEMLAB_DATA_ROOT": str(data_root), "EMBEDDING_MODEL": "memlab/hashing", **OFFLINE, **extra}


def stdio(data_root: Path, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "memlab", "mcp"], env=server_env(data_root, **extra), cwd=str(data_root)
    )


async def ok(client: Any, tool: str, **arguments: Any) -> Any:
    """The structured result of a call that must succeed (a list result unwrapped from ``{"result": ...}``)."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    content = result.structured_content
    return content["result"] if set(content) == {"result"} else content


async def error(client: Any, tool: str, **arguments: Any) -> str:
    """The text of a call that must be a tool error (not a protocol error, not a crash)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    return " ".join(block.text for block in result.content)


def free_port() -> int:
    """A loopback port nothing listens on (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
