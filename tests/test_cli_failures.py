"""Every ``memlab`` command against a Redis and a PostgreSQL that nothing listens on.

Each runs as ``python -m memlab ...`` in a subprocess. A command that cannot proceed
exits non-zero with exactly one line on stderr, ``memlab: error: ...``, naming the
server, and no traceback; the ones the seeds let fail open (the session walk-through,
key management, whose session cache is not needed) run to the end.
The last tests put those servers in ``./.env`` (or ``--env-file``) only: each command
that builds a stack fails on them, so each read the file.
Not here: ``serve`` with the cache down (it starts and fails open: tests/api), and the
benchmarks that build their own stores (ingest, recall, modes, usage, quality).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

#: variables of the shell that would choose other stores
_STORE_VARIABLES = ("CACHING", "CACHE_BACKEND", "CACHE_DB_URL", "CACHE_HOST", "CACHE_PORT", "MEMLAB_DB_URL", "DB_PROVIDER")
_SERVER_URLS = ("MEMLAB_TEST_REDIS_URL", "MEMLAB_TEST_POSTGRES_URL", "TAPES_INGEST_URL")

DEMO = ["demo", "--turns", "2", "--documents", "2", "--latency-ms", "0", "--quiet"]
BENCH_SERVE = ["bench", "serve", "--workers", "1", "--clients", "1", "--turn-clients", "0", "--seconds", "1", "--single-seconds", "1", "--sessions", "2", "--quiet"]
BENCH_CACHE = ["bench", "cache", "--n", "5", "--sessions", "2", "--per-session", "2", "--repeats", "1", "--no-raw", "--quiet"]
BENCH_CLEANUP = ["bench", "cleanup", "--turns", "4", "--contaminated", "1", "--repeats", "1", "--quiet"]


@pytest.fixture
def dead_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_memlab(argv: list[str], tmp_path: Path, *, python: list[str] | None = None, **settings: str) -> subprocess.CompletedProcess[str]:
    """``python -m memlab argv`` in ``tmp_path`` (its own data root, the hashing embedder, no LLM latency) with ``settings``."""
    env = {key: value for key, value in os.environ.items() if key.upper() not in (*_STORE_VARIABLES, *_SERVER_URLS)}
    env.update(
        MEMLAB_DATA_ROOT=str(tmp_path / "data"),
        EMBEDDING_MODEL="memlab/hashing",
        MEMLAB_OFFLINE_LATENCY_MS="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
        HF_HUB_OFFLINE="1",
    )
    env.update(settings)
    command = [sys.executable, *(python or ["-m", "memlab"]), *argv]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def assert_one_error_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("memlab: error: ")
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def redis_down(port: int) -> dict[str, str]:
    return {"CACHE_BACKEND": "redis", "CACHE_HOST": "127.0.0.1", "CACHE_PORT": str(port), "MEMLAB_TEST_REDIS_URL": f"redis://127.0.0.1:{port}/0"}


def postgres_down(port: int) -> dict[str, str]:
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{port}/x"
    return {"MEMLAB_DB_URL": url, "MEMLAB_TEST_POSTGRES_URL": url}


@pytest.mark.parametrize(
    "argv",
    [DEMO, BENCH_SERVE, [*BENCH_CACHE, "--backends", "redis"], [*BENCH_CLEANUP, "--backends", "redis"]],
    ids=["demo", "bench-serve", "bench-cache", "bench-cleanup"],
)
def test_a_command_that_needs_redis_says_in_one_line_that_it_is_down(argv, tmp_path, dead_port):
    line = assert_one_error_line(run_memlab(argv, tmp_path, **redis_down(dead_port)), f"127.0.0.1:{dead_port}")
    assert "redis" in line


@pytest.mark.parametrize(
    "argv",
    [
        DEMO,
        ["demo", "session"],
        ["serve", "--port", "0", "--workers", "2"],
        ["users", "create-key", "alice"],
        ["users", "revoke-key", "mlk_unknown"],
        BENCH_SERVE,
        [*BENCH_CACHE, "--backends", "postgres"],
        [*BENCH_CLEANUP, "--backends", "postgres"],
    ],
    ids=["demo", "demo-session", "serve", "create-key", "revoke-key", "bench-serve", "bench-cache", "bench-cleanup"],
)
def test_a_command_whose_postgres_is_down_says_it_in_one_line(argv, tmp_path, dead_port):
    assert_one_error_line(run_memlab(argv, tmp_path, **postgres_down(dead_port)), str(dead_port))


def test_the_session_walk_through_fails_open_on_a_redis_that_is_down(tmp_path, dead_port):
    done = run_memlab(["demo", "session"], tmp_path, **redis_down(dead_port))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "cache backend:  redis (RedisCache)" in done.stdout  # it ran to its last section
    assert "nothing to annotate (the cache is unavailable)" in done.stdout
    assert f"127.0.0.1:{dead_port}" in done.stderr  # the warnings name the server


def test_key_management_does_not_need_the_session_cache(tmp_path, dead_port):
    done = run_memlab(["users", "create-key", "alice"], tmp_path, **redis_down(dead_port))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("mlk_")


def test_a_missing_extra_is_one_line_naming_it(tmp_path):
    """Without the redis package (hidden from the import system), CACHE_BACKEND=redis says what to install."""
    hide = "import sys; sys.modules['redis'] = None; from memlab.cli import main; sys.exit(main(sys.argv[1:]))"
    done = run_memlab(["demo", "session"], tmp_path, python=["-c", hide], CACHE_BACKEND="redis")
    assert_one_error_line(done, "memlab[redis]")


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--turns", "2", "--documents", "2", "--latency-ms", "0", "--quiet"],
        ["demo", "session"],
        ["serve", "--port", "0"],
        ["users", "create-key", "alice"],
        ["users", "revoke-key", "mlk_unknown"],
        ["bench", "serve", "--quiet"],
    ],
    ids=["demo", "demo-session", "serve", "create-key", "revoke-key", "bench-serve"],
)
def test_every_command_that_builds_a_stack_reads_dot_env(argv, tmp_path, dead_port):
    """The file alone names a PostgreSQL that is down: each command fails on it, so each read the file."""
    (tmp_path / ".env").write_text("".join(f"{name}={value}\n" for name, value in postgres_down(dead_port).items()))
    assert_one_error_line(run_memlab(argv, tmp_path), str(dead_port))


def test_bench_reads_its_server_urls_from_dot_env(tmp_path, dead_port):
    (tmp_path / "bench.env").write_text(f"MEMLAB_TEST_REDIS_URL={redis_down(dead_port)['MEMLAB_TEST_REDIS_URL']}\n")
    argv = ["--env-file", "bench.env", "bench", "cache", "--backends", "redis", "--n", "5", "--sessions", "1", "--per-session", "1", "--repeats", "1", "--no-raw", "--quiet"]
    assert_one_error_line(run_memlab(argv, tmp_path), f"redis: CacheConnectionError: redis cache at 127.0.0.1:{dead_port}")
