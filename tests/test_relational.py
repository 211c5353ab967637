"""The split of :mod:`memlab.relational`: one store owning one runner, one repository per concern over it."""

from __future__ import annotations

import inspect

import pytest
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from memlab.exceptions import StackStateError
from memlab.relational import (
    DataRepository,
    DatasetRepository,
    RelationalStore,
    RunRepository,
    SessionRecordRepository,
    UsageRepository,
    UserRepository,
)
from memlab.testing import FakeClock

#: the store's attribute per repository
REPOSITORIES = {
    "users": UserRepository,
    "datasets": DatasetRepository,
    "data": DataRepository,
    "sessions": SessionRecordRepository,
    "usage": UsageRepository,
    "runs": RunRepository,
}


def test_the_store_keeps_only_its_lifecycle_and_exposes_a_repository_per_concern(tmp_path):
    store = RelationalStore(tmp_path / "memlab.db", FakeClock())
    methods = {name for name, _ in inspect.getmembers(RelationalStore, inspect.isfunction) if not name.startswith("_")}
    assert methods == {"open", "close", "require_open"}
    for name, repository in REPOSITORIES.items():
        assert type(getattr(store, name)) is repository


@pytest.mark.parametrize("insert", [sqlite_insert, pg_insert], ids=["sqlite", "postgresql"])
def test_statement_names_are_unique_across_repositories(insert):
    seen: dict[str, str] = {}
    for repository in REPOSITORIES.values():
        for name in repository.statements(insert):
            assert name not in seen, f"{repository.__name__} and {seen[name]} both define {name!r}"
            seen[name] = repository.__name__


async def test_every_repository_runs_through_the_stores_one_runner(tmp_path):
    store = RelationalStore(tmp_path / "memlab.db", FakeClock())
    with pytest.raises(StackStateError):
        await store.users.default()  # not open: no repository reaches a database of its own
    await store.open()
    try:
        user = await store.users.default()
        dataset = await store.datasets.create(user.id, "docs")
        assert await store.data.count(dataset.id) == 0
        assert await store.runs.of_dataset(dataset.id) == []
        await store.sessions.touch(user.id, "s1", dataset.id)
        assert [record.session_id for record in await store.sessions.of_user(user.id)] == ["s1"]
        assert await store.usage.models("s1", user.id) == []
    finally:
        await store.close()
    with pytest.raises(StackStateError):
        await store.sessions.of_user(user.id)
