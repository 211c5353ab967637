"""MEMLAB_DB_URL: memlab's metadata on a shared PostgreSQL (or a given SQLite file), seen alike by every stack."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from memlab import BackendError, MemoryStack, StackConfig
from memlab.config import CacheConfig
from memlab.testing import fast_config, postgres_database
from memlab.testing.suppliers import missing

CURIE = "Marie Curie discovered Polonium in 1898."


def _config(root, url, *, shared_cache: bool = False) -> StackConfig:
    """A stack under ``root`` with its metadata at ``url``; ``shared_cache``: its session cache in that database too."""
    config = fast_config(root).model_copy(update={"db_url": url})
    if shared_cache:
        config = config.model_copy(update={"cache": CacheConfig(backend="postgres", db_url=url)})
    return config


@pytest.fixture
async def shared_url():
    async with postgres_database("memlab_shared") as url:
        yield url


@pytest.mark.server
async def test_two_stacks_on_one_database_share_users_datasets_grants_records_and_keys(tmp_path, shared_url):
    async with MemoryStack.from_config(_config(tmp_path / "a", shared_url)) as a, MemoryStack.from_config(_config(tmp_path / "b", shared_url)) as b:
        assert (await a.users.default()).id == (await b.users.default()).id  # one default user, not one per machine
        remembered = await a.remember(CURIE, dataset="science")
        assert [dataset.id for dataset in await b.datasets.list()] == [remembered.dataset_id]
        assert [record.id for record in await b.datasets.list_data("science")] == [uuid.UUID(remembered.data_ids[0])]
        bob = await a.users.create("bob")
        await a.datasets.grant("science", bob, "read")
        assert await b.datasets.can(bob, remembered.dataset_id, "read") and not await b.datasets.can(bob, remembered.dataset_id, "write")
        await a.search("Who discovered Polonium?", datasets=["science"], session_id="chat")
        record = await b.usage.get("chat")
        assert record is not None and record.tokens_in > 0 and record.dataset_id == remembered.dataset_id
        assert await b.session.end("chat") and (await a.usage.get("chat")).status == "completed"
        key = await a.users.create_api_key(bob)
        assert (await b.users.user_for_api_key(key)).id == bob.id
        assert await b.users.revoke_api_key(key) and await a.users.user_for_api_key(key) is None


@pytest.mark.server
async def test_processes_racing_to_create_one_dataset_get_the_same_one(tmp_path, shared_url):
    stacks = [MemoryStack.from_config(_config(tmp_path / f"s{index}", shared_url)) for index in range(3)]
    for stack in stacks:
        await stack.open()
    try:
        owner = await stacks[0].users.default()
        created = await asyncio.gather(*(stack.datasets.create("race", owner) for stack in stacks for _ in range(4)))
        assert len({dataset.id for dataset in created}) == 1
        await asyncio.gather(*(stack.remember(CURIE, dataset="race") for stack in stacks))  # same content from three stacks
        assert len(await stacks[1].datasets.list_data("race")) == 1
    finally:
        for stack in stacks:
            await stack.close()


@pytest.mark.server
async def test_the_stack_recovers_when_its_connections_are_cut(tmp_path, shared_url):
    import asyncpg
    from sqlalchemy.engine import make_url

    async with MemoryStack.from_config(_config(tmp_path, shared_url)) as stack:
        await stack.remember(CURIE, dataset="science")
        admin = await asyncpg.connect(make_url(shared_url).set(drivername="postgresql").render_as_string(hide_password=False))
        try:
            name = make_url(shared_url).database
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
        finally:
            await admin.close()
        try:
            await stack.datasets.list()
        except BackendError as exc:  # the first call may see the cut; it names the database, never the password
            assert make_url(shared_url).host in str(exc) and "metadata database" in str(exc)
        assert [dataset.name for dataset in await stack.datasets.list()] == ["science"]  # the next call reconnects


async def test_an_unreachable_database_is_a_backend_error_naming_it_without_the_password(tmp_path):
    url = "postgresql+asyncpg://memlab:s3cret-pw@127.0.0.1:1/memlab"
    stack = MemoryStack.from_config(_config(tmp_path, url))
    with pytest.raises(BackendError) as raised:
        await stack.open()
    message = str(raised.value)
    assert "127.0.0.1:1" in message and "metadata database" in message and "s3cret-pw" not in message


async def test_a_sqlite_url_puts_memlab_db_where_it_says(tmp_path):
    target = tmp_path / "elsewhere" / "meta.db"
    target.parent.mkdir()
    async with MemoryStack.from_config(_config(tmp_path / "root", f"sqlite:///{target}")) as stack:
        await stack.datasets.create("notes")
    assert target.exists() and not (tmp_path / "root" / "memlab.db").exists()


@pytest.mark.server
async def test_permanent_memory_is_shared_through_postgresql(tmp_path, shared_url):
    machine_a, machine_b = _config(tmp_path / "a", shared_url, shared_cache=True), _config(tmp_path / "b", shared_url, shared_cache=True)
    async with MemoryStack.from_config(machine_a) as a, MemoryStack.from_config(machine_b) as b:
        remembered = await a.remember(CURIE, dataset="science")
        assert not (tmp_path / "a" / "graph").exists()  # nothing on local disk: the snapshot is in the database
        [hit] = await b.recall("Polonium", datasets=["science"], query_type="CHUNKS", top_k=1)
        assert "Polonium" in hit.text and hit.raw["data_ids"] == remembered.data_ids
        await b.search("Who discovered Polonium?", datasets=["science"], session_id="chat")
        forgotten = await a.forget(data_id=remembered.data_ids[0], dataset="science")
        assert forgotten.cleanup.sessions and forgotten.cleanup.sessions[0].session_id == "chat"  # b's turn, cleaned by a
        assert await b.recall("Polonium", datasets=["science"], query_type="CHUNKS") == []  # gone everywhere
        assert await b.session.get_session("chat") == []


@pytest.mark.server
async def test_concurrent_writers_on_two_machines_lose_no_document(tmp_path, shared_url):
    texts = [f"Scientist number {index} studied element {index} in Lisbon." for index in range(6)]
    async with MemoryStack.from_config(_config(tmp_path / "a", shared_url)) as a, MemoryStack.from_config(_config(tmp_path / "b", shared_url)) as b:
        await a.datasets.create("shared")
        results = await asyncio.gather(*(stack.remember(text, dataset="shared") for stack, text in zip([a, b] * 3, texts)))
        graph = await a.memory.graph(results[0].dataset_id)
        supported = {data_id for node in graph.nodes() for data_id in node["supporters"]}
        assert supported == {result.data_ids[0] for result in results}  # every writer's document is in the committed graph
        assert len(await b.datasets.list_data("shared")) == 6


def _restart_postgres() -> None:
    """Restart the test PostgreSQL server (``scripts/with-servers.sh`` says how); skip when it does not."""
    import os
    import subprocess

    command = os.environ.get("MEMLAB_TEST_POSTGRES_RESTART")
    if not command:
        missing("MEMLAB_TEST_POSTGRES_RESTART is not set (run under scripts/with-servers.sh, which exports it)")
    argv = ["su", "postgres", "-s", "/bin/sh", "-c", command] if os.geteuid() == 0 else ["/bin/sh", "-c", command]
    subprocess.run(argv, check=True, capture_output=True, timeout=60, cwd="/")


@pytest.mark.server
async def test_a_postgresql_restart_mid_run_is_survived_without_restarting_the_stack(tmp_path, shared_url):
    async with MemoryStack.from_config(_config(tmp_path, shared_url, shared_cache=True)) as stack:
        remembered = await stack.remember(CURIE, dataset="science")
        await stack.search("Who discovered Polonium?", datasets=["science"], session_id="chat")
        await asyncio.to_thread(_restart_postgres)
        outcomes = []
        for _ in range(3):  # the first calls may meet the dropped connections
            try:
                outcomes.append(len(await stack.datasets.list()))
            except BackendError as exc:
                assert "metadata database" in str(exc)
                outcomes.append(exc)
        assert outcomes[-1] == 1  # recovered, no restart of the stack
        for _ in range(3):  # every read checks the committed snapshot's token in the database
            try:
                hits = await stack.recall("Polonium", datasets=["science"], query_type="CHUNKS", top_k=1)
                break
            except BackendError as exc:
                assert "permanent memory" in str(exc) or "metadata database" in str(exc)
        assert hits and hits[0].raw["data_ids"] == remembered.data_ids
        turns = await stack.session.get_session("chat")  # the cache fails open while down, then answers again
        assert len(turns) in (0, 1)
        assert len(await stack.session.get_session("chat")) == 1
