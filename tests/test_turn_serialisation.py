"""Turns sent to one session from two processes never interleave (the cache backend's cross-process turn lock).

Each stored turn records the turns its prompt held as history (``turn_history_ids``);
serialised turns mean every turn's history is exactly the ten turns before it in the
final session.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memlab import MemoryStack, SessionLockTimeout
from memlab.config import CacheConfig
from memlab.testing import fast_config, postgres_database, server_url, supply_backend
from memlab.testing.processes import run_in_processes

TURNS = 50
SESSION = "shared-chat"


def _config(root: str, cache: dict, db_url: str | None):
    config = fast_config(Path(root), cache=CacheConfig(**cache))
    return config.model_copy(update={"db_url": db_url}) if db_url else config


async def _turns(root: str, cache: dict, db_url: str | None, writer: int, *, barrier) -> None:
    async with MemoryStack.from_config(_config(root, cache, db_url)) as stack:
        if writer == 0 and db_url is None:
            await stack.remember("Marie Curie discovered Polonium in 1898.", dataset="science")
        barrier.wait(timeout=120)
        for index in range(TURNS):
            await stack.search(f"writer {writer} asks question {index} about Polonium?", session_id=SESSION)


@contextlib.asynccontextmanager
async def _setup(backend: str, tmp_path: Path):
    """(cache settings, metadata URL): with a server backend both processes share the metadata database too."""
    if backend == "sqlite":
        yield {"backend": "sqlite"}, None
    elif backend == "fs":
        yield {"backend": "fs"}, None
    elif backend == "redis":
        url = urlsplit(server_url("MEMLAB_TEST_REDIS_URL"))
        async with postgres_database("memlab_turns") as db_url:
            yield {"backend": "redis", "host": url.hostname, "port": url.port}, db_url
    else:
        async with postgres_database("memlab_turns") as db_url:
            yield {"backend": "postgres", "db_url": db_url}, db_url


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "fs", pytest.param("redis", marks=pytest.mark.server), pytest.param("postgres", marks=pytest.mark.server)])
async def test_two_processes_turns_into_one_session_are_serialised(backend, tmp_path):
    async with _setup(backend, tmp_path) as (cache, db_url):
        root = str(tmp_path / "root")
        if db_url is not None:  # one shared memory: remember once before the writers start
            async with MemoryStack.from_config(_config(root, cache, db_url)) as stack:
                await stack.remember("Marie Curie discovered Polonium in 1898.", dataset="science")
        failures = await run_in_processes(_turns, [(str(tmp_path / f"p{writer}") if db_url else root, cache, db_url, writer) for writer in range(2)])
        assert not failures, failures[0]
        async with MemoryStack.from_config(_config(str(tmp_path / "p0") if db_url else root, cache, db_url)) as stack:
            turns = await stack.session.get_session(SESSION)
            assert len(turns) == 2 * TURNS
            for position, turn in enumerate(turns):
                expected = [earlier.qa_id for earlier in turns[max(0, position - 10) : position]]
                assert (turn.memify_metadata or {}).get("turn_history_ids", []) == expected, f"turn {position} saw another history"
            if db_url is not None:  # both processes added their usage to one shared record: no increment lost
                record = await stack.usage.get(SESSION)
                assert record.tokens_in == sum(turn.memify_metadata["turn_tokens_in"] for turn in turns)
                assert record.tokens_out == sum(turn.memify_metadata["turn_tokens_out"] for turn in turns)


@pytest.mark.parametrize("backend", ["sqlite", "fs", "fakeredis", pytest.param("redis", marks=pytest.mark.server), pytest.param("redis-cluster", marks=pytest.mark.server), pytest.param("postgres", marks=pytest.mark.server)])
async def test_a_turn_lock_held_elsewhere_times_out_with_a_clear_error(backend, tmp_path):
    async with contextlib.AsyncExitStack() as stack:
        # two handles on one store, as two processes would have
        holder_cache = await stack.enter_async_context(supply_backend(backend, tmp_path=tmp_path))
        waiter_cache = await stack.enter_async_context(supply_backend(backend, tmp_path=tmp_path))
        async with holder_cache.turn_lock("u1", "s1", timeout=5):
            with pytest.raises(SessionLockTimeout, match="s1"):
                async with waiter_cache.turn_lock("u1", "s1", timeout=0.2):
                    pass
            async with waiter_cache.turn_lock("u1", "another-session", timeout=0.2):  # other sessions are not blocked
                pass
        async with waiter_cache.turn_lock("u1", "s1", timeout=1):  # released: free again
            pass
