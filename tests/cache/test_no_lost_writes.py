"""No lost writes across processes: 8 OS processes × 200 appends into one session.

One test for every backend that other processes can share (memory cannot).
Each process opens its own backend on the same store and appends with explicit
qa_ids; afterwards every entry is there once, and each writer's entries are in
the order it wrote them.
"""

import uuid

import pytest

from memlab.testing.processes import run_in_processes
from memlab.testing.suppliers import server_url

WRITERS, PER_WRITER = 8, 200


def _location(name: str, tmp_path) -> str:
    if name == "sqlite":
        return f"sqlite:///{tmp_path / 'cache.db'}"
    if name == "fs":
        return str(tmp_path / "fs-cache")
    if name == "redis":
        return server_url("MEMLAB_TEST_REDIS_URL")
    return server_url("MEMLAB_TEST_POSTGRES_URL")


def _backend(name: str, location: str):
    """Each process builds its own backend on the shared store."""
    if name == "fs":
        from memlab.cache import DiskCache

        return DiskCache(location, purge_interval_seconds=0)
    if name == "redis":
        from memlab.cache import RedisCache

        return RedisCache(location, purge_interval_seconds=0)
    from memlab.cache import SQLCache

    return SQLCache(location, purge_interval_seconds=0)


async def _writer(name: str, location: str, session: str, writer: int, *, barrier) -> None:
    async with _backend(name, location) as cache:
        barrier.wait(timeout=120)
        for i in range(PER_WRITER):
            await cache.create_qa_entry("u", session, question=f"w{writer}", answer="a", qa_id=f"w{writer}-{i:04d}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sqlite", "fs", "redis", "postgres"])
async def test_eight_processes_append_to_one_session(name, tmp_path):
    location = _location(name, tmp_path)
    session = f"lost-writes-{uuid.uuid4().hex}"
    failures = await run_in_processes(_writer, [(name, location, session, w) for w in range(WRITERS)], timeout=300)
    assert not failures, failures[0]

    async with _backend(name, location) as cache:
        ids = [entry.qa_id for entry in await cache.get_all_qa_entries("u", session)]
        await cache.delete_session("u", session)
    assert len(ids) == len(set(ids)) == WRITERS * PER_WRITER  # all there, none duplicated
    for w in range(WRITERS):
        assert [qa_id for qa_id in ids if qa_id.startswith(f"w{w}-")] == [f"w{w}-{i:04d}" for i in range(PER_WRITER)]
