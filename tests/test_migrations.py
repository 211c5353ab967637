"""Cache schema migrations (memlab.migrations) on SQLite and, with
``MEMLAB_TEST_POSTGRES_URL`` set, on PostgreSQL (a throw-away database per test)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from memlab._sqlrun import resolve_url
from memlab.cache._sql import SQLCache
from memlab.migrations import HEAD, REVISIONS, VERSION_TABLE, MigrationError, alembic_config, run_migrations
from memlab.testing import FakeClock, postgres_database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.server)])
async def db_url(request, tmp_path):
    """URL of an empty database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'cache.db'}"
        return
    async with postgres_database("memlab_mig") as url:
        yield url


async def _sql(url: str, *statements: str, params: list[dict] | None = None):
    """Run statements in one transaction; the last one's rows (if any)."""
    engine = create_async_engine(resolve_url(url)[1])
    try:
        async with engine.begin() as conn:
            result = None
            for statement in statements:
                result = await conn.execute(text(statement), params or {})
            return result.fetchall() if result is not None and result.returns_rows else None
    finally:
        await engine.dispose()


async def _schema(url: str) -> dict:
    """Tables -> (columns, indexes, unique constraints), comparable across databases."""

    def read(conn):
        insp = inspect(conn)
        out = {}
        for table in sorted(insp.get_table_names()):
            columns = [(c["name"], str(c["type"]).split("(")[0], c["nullable"]) for c in insp.get_columns(table)]
            indexes = sorted((ix["name"], tuple(ix["column_names"]), bool(ix["unique"])) for ix in insp.get_indexes(table))
            uniques = sorted((uc["name"], tuple(uc["column_names"])) for uc in insp.get_unique_constraints(table))
            out[table] = (columns, indexes, uniques)
        return out

    engine = create_async_engine(resolve_url(url)[1])
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(read)
    finally:
        await engine.dispose()


async def _version(url: str) -> str:
    return (await _sql(url, f"SELECT version_num FROM {VERSION_TABLE}"))[0][0]


CONTEXT_ROWS = [  # (user, session, entry_id, payload) in insert order
    ("u1", "s1", "g1", '{"id": "g1", "v": 1}'),
    ("u1", "s1", "g2", '{"id": "g2", "v": 1}'),
    ("u1", "s1", "g1", '{"id": "g1", "v": 2}'),
    ("u1", "s2", "g1", '{"id": "g1", "v": "other session"}'),
    ("u1", "s1", "g1", '{"id": "g1", "v": 3}'),
    ("u1", "s1", "g2", '{"id": "g2", "v": 2}'),
    ("u2", "s1", "g1", '{"id": "g1", "v": "other user"}'),
]


async def _old_database_with_duplicates(url: str) -> None:
    assert await run_migrations(url, revision="0001_initial") == "0001_initial"
    await _sql(
        url,
        *[
            "INSERT INTO cache_session_context (user_id, session_id, entry_id, payload, created_at) "
            f"VALUES ('{u}', '{s}', '{e}', '{p}', {100 + i})"
            for i, (u, s, e, p) in enumerate(CONTEXT_ROWS)
        ],
        "INSERT INTO cache_session_state (user_id, session_id, kind, expires_at, epoch) VALUES "
        "('u1', 's1', 'context', NULL, 1), ('u1', 's2', 'context', NULL, 2), ('u2', 's1', 'context', NULL, 3)",
    )


def test_head_is_the_last_script():
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    assert scripts.get_current_head() == HEAD
    chain = [rev.revision for rev in scripts.walk_revisions()][::-1]
    assert tuple(chain) == REVISIONS


async def test_upgrade_merges_duplicates_and_adds_the_unique_index(db_url):
    await _old_database_with_duplicates(db_url)
    with pytest.raises(Exception):  # the old schema cannot take the upsert's ON CONFLICT
        await _sql(
            db_url,
            "INSERT INTO cache_session_context (user_id, session_id, entry_id, payload, created_at) "
            "VALUES ('u', 's', 'e', '{}', 1) ON CONFLICT (user_id, session_id, entry_id) DO NOTHING",
        )

    assert await run_migrations(db_url) == HEAD
    rows = await _sql(db_url, "SELECT user_id, session_id, entry_id, payload, created_at FROM cache_session_context ORDER BY seq")
    # first row of each (user, session, entry) keeps its place and created_at, with the newest payload
    assert [tuple(r) for r in rows] == [
        ("u1", "s1", "g1", '{"id": "g1", "v": 3}', 100.0),
        ("u1", "s1", "g2", '{"id": "g2", "v": 2}', 101.0),
        ("u1", "s2", "g1", '{"id": "g1", "v": "other session"}', 103.0),
        ("u2", "s1", "g1", '{"id": "g1", "v": "other user"}', 106.0),
    ]
    indexes = {name: (cols, unique) for name, cols, unique in (await _schema(db_url))["cache_session_context"][1]}
    assert indexes["ux_cache_session_context_entry"] == (("user_id", "session_id", "entry_id"), True)
    assert await _version(db_url) == HEAD
    assert await run_migrations(db_url) == HEAD  # idempotent

    cache = SQLCache(db_url, clock=FakeClock(), purge_interval_seconds=0)
    await cache.open()
    try:
        assert await cache.get_session_context_entries("u1", "s1") == [{"id": "g1", "v": 3}, {"id": "g2", "v": 2}]
        await cache.create_session_context_entry("u1", "s1", {"id": "g1", "v": 4})  # upserts in place
        await cache.create_session_context_entry("u1", "s1", {"id": "g3", "v": 1})
        assert await cache.get_session_context_entries("u1", "s1") == [
            {"id": "g1", "v": 4},
            {"id": "g2", "v": 2},
            {"id": "g3", "v": 1},
        ]
    finally:
        await cache.close()
    count = await _sql(db_url, "SELECT count(*) FROM cache_session_context WHERE user_id = 'u1' AND session_id = 's1'")
    assert count[0][0] == 3


async def test_opening_the_cache_upgrades_an_old_database(db_url, caplog):
    await _old_database_with_duplicates(db_url)
    cache = SQLCache(db_url, clock=FakeClock(), purge_interval_seconds=0)
    with caplog.at_level(logging.INFO, logger="memlab.migrations"):
        await cache.open()
    try:
        messages = [r.getMessage() for r in caplog.records if r.name == "memlab.migrations"]
        assert any("upgraded" in m and "0001_initial" in m and HEAD in m for m in messages), messages
        assert any("removed 3 duplicate" in m for m in messages), messages
        await cache.create_session_context_entry("u1", "s1", {"id": "g2", "v": 9})
        assert await cache.get_session_context_entries("u1", "s1") == [{"id": "g1", "v": 3}, {"id": "g2", "v": 9}]
    finally:
        await cache.close()
    assert await _version(db_url) == HEAD


async def test_fresh_database_is_created_at_head_with_the_migrated_schema(db_url, tmp_path, request):
    cache = SQLCache(db_url, clock=FakeClock())
    await cache.open()
    await cache.close()
    assert await _version(db_url) == HEAD
    created = await _schema(db_url)

    # the same schema reached through the revisions, on a second database of the same kind
    if db_url.startswith("sqlite"):
        other = f"sqlite:///{tmp_path / 'migrated.db'}"
        await run_migrations(other, revision="0001_initial")
        await run_migrations(other)
        migrated = await _schema(other)
    else:
        await _sql(db_url, f"DROP TABLE {VERSION_TABLE}", *[f"DROP TABLE {t}" for t in created if t != VERSION_TABLE])
        await run_migrations(db_url, revision="0001_initial")
        await run_migrations(db_url)
        migrated = await _schema(db_url)
    assert migrated == created


async def test_unversioned_old_schema_is_adopted_and_upgraded(db_url):
    await _old_database_with_duplicates(db_url)
    await _sql(db_url, f"DROP TABLE {VERSION_TABLE}")  # as created by create_all before migrations existed
    assert await run_migrations(db_url) == HEAD
    rows = await _sql(db_url, "SELECT count(*) FROM cache_session_context")
    assert rows[0][0] == 4


async def test_unversioned_current_schema_is_stamped_head(db_url):
    cache = SQLCache(db_url, clock=FakeClock())
    await cache.open()
    await cache.create_session_context_entry("u", "s", {"id": "g"})
    await cache.close()
    await _sql(db_url, f"DROP TABLE {VERSION_TABLE}")
    assert await run_migrations(db_url) == HEAD
    assert (await _sql(db_url, "SELECT count(*) FROM cache_session_context"))[0][0] == 1


async def test_concurrent_opens_of_a_fresh_database(db_url):
    caches = [SQLCache(db_url, clock=FakeClock(), purge_interval_seconds=0) for _ in range(4)]
    await asyncio.gather(*(cache.open() for cache in caches))
    try:
        for i, cache in enumerate(caches):
            await cache.create_qa_entry("u", "s", question=f"q{i}", answer="a")
        assert len(await caches[0].get_all_qa_entries("u", "s")) == 4
    finally:
        for cache in caches:
            await cache.close()
    assert await _version(db_url) == HEAD


async def test_a_newer_schema_is_refused(db_url):
    await run_migrations(db_url)
    await _sql(db_url, f"UPDATE {VERSION_TABLE} SET version_num = '9999_from_the_future'")
    with pytest.raises(MigrationError, match="9999_from_the_future"):
        await run_migrations(db_url)
    cache = SQLCache(db_url)
    with pytest.raises(MigrationError):
        await cache.open()


async def test_unknown_target_revision_is_refused(db_url):
    with pytest.raises(MigrationError):
        await run_migrations(db_url, revision="0003_nope")


def test_alembic_command_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ini = tmp_path / "alembic.ini"
    ini.write_text(f"[alembic]\nscript_location = memlab:migrations\nsqlalchemy.url = {url}\n")
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "alembic", "-c", str(ini), *args], capture_output=True, text=True, timeout=120
    )
    upgraded = run("upgrade", "0001_initial")
    assert upgraded.returncode == 0, upgraded.stderr
    assert asyncio.run(_version(url)) == "0001_initial"
    upgraded = run("upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    assert asyncio.run(_version(url)) == HEAD
    offline = run("upgrade", "0001_initial:head", "--sql")
    assert offline.returncode == 0, offline.stderr
    assert "CREATE UNIQUE INDEX ux_cache_session_context_entry" in offline.stdout


async def test_run_migrations_without_url_uses_the_environment(tmp_path, monkeypatch):
    import memlab

    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path))
    monkeypatch.delenv("CACHE_DB_URL", raising=False)
    monkeypatch.setenv("CACHE_BACKEND", "sqlite")
    head = await memlab.run_migrations()
    assert head and (tmp_path / "cache.db").exists()
    monkeypatch.setenv("CACHE_BACKEND", "redis")
    with pytest.raises(memlab.ConfigError, match="not a SQL backend"):
        await memlab.run_migrations()


# -- the metadata lineage (memlab.db) ------------------------------------------------


async def _metadata_to(path, revision: str) -> str:
    from memlab._sqlrun import SQLiteRunner
    from memlab.migrations import METADATA, upgrade_connection

    runner = SQLiteRunner(path, {})
    await runner.open()
    try:
        return await runner.run_ddl(lambda conn: upgrade_connection(conn, revision=revision, lineage=METADATA))
    finally:
        await runner.close()


def test_metadata_head_is_the_last_script():
    from alembic.script import ScriptDirectory

    from memlab.migrations import METADATA

    scripts = ScriptDirectory.from_config(alembic_config(lineage=METADATA))
    assert scripts.get_current_head() == METADATA.head
    assert tuple(rev.revision for rev in scripts.walk_revisions())[::-1] == METADATA.revisions


async def test_a_fresh_memlab_db_has_the_schema_its_revisions_build(tmp_path):
    from memlab.migrations import METADATA
    from memlab.relational import RelationalStore

    store = RelationalStore(tmp_path / "fresh.db", FakeClock())
    await store.open()
    await store.close()
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert (await _sql(fresh, f"SELECT version_num FROM {METADATA.version_table}"))[0][0] == METADATA.head
    await _metadata_to(tmp_path / "stepped.db", METADATA.revisions[0])
    await _metadata_to(tmp_path / "stepped.db", "head")
    assert await _schema(f"sqlite:///{tmp_path / 'stepped.db'}") == await _schema(fresh)


async def test_an_unversioned_memlab_db_of_the_previous_release_is_adopted_and_upgraded(tmp_path, caplog):
    from memlab.migrations import METADATA
    from memlab.relational import RelationalStore

    path = tmp_path / "memlab.db"
    url = f"sqlite:///{path}"
    await _metadata_to(path, METADATA.revisions[0])
    await _sql(
        url,
        f"DROP TABLE {METADATA.version_table}",  # as the previous release's create_all left it
        "INSERT INTO users (id, name, parent_user_id, is_default, created_at) VALUES ('u-1', 'ada', NULL, 0, '2026-01-01T00:00:00+00:00')",
    )
    store = RelationalStore(path, FakeClock())
    with caplog.at_level(logging.INFO, logger="memlab.migrations"):
        await store.open()
    try:
        assert "adopted an unversioned memlab metadata schema" in caplog.text
        assert (await _sql(url, f"SELECT version_num FROM {METADATA.version_table}"))[0][0] == METADATA.head
        assert await _sql(url, "SELECT name FROM users") == [("ada",)]
        await store.sessions.touch(uuid.uuid4(), "s1", None)  # the new tables work
        assert await _sql(url, "SELECT session_id, status FROM session_records") == [("s1", "running")]
    finally:
        await store.close()


def test_alembic_command_line_on_the_metadata_lineage(tmp_path):
    from memlab.migrations import METADATA

    url = f"sqlite:///{tmp_path / 'memlab.db'}"
    ini = tmp_path / "alembic.ini"
    ini.write_text("[alembic]\nscript_location = memlab:migrations/metadata\n")
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "alembic", "-c", str(ini), "-x", f"url={url}", *args], capture_output=True, text=True, timeout=120
    )
    upgraded = run("upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    assert asyncio.run(_sql(url, f"SELECT version_num FROM {METADATA.version_table}"))[0][0] == METADATA.head
    offline = run("upgrade", f"{METADATA.revisions[0]}:head", "--sql")
    assert offline.returncode == 0, offline.stderr
    assert "CREATE TABLE session_model_usage" in offline.stdout
