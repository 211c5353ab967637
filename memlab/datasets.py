"""``stack.datasets``: named datasets per user (ownership; permissions come with permanent memory)."""

from __future__ import annotations

from typing import Any

from memlab.exceptions import ValidationError
from memlab.models import Dataset
from memlab.relational import RelationalStore
from memlab.users import Users

MAIN_DATASET = "main_dataset"


class Datasets:
    """Dataset registry of one stack."""

    def __init__(self, store: RelationalStore, users: Users) -> None:
        self._store = store
        self._users = users

    async def create(self, name: str, user: Any = None) -> Dataset:
        """Create the user's dataset ``name`` (or return the existing one)."""
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"dataset name must be a non-blank string, got {name!r}")
        owner = await self._users.resolve(user)
        return await self._store.create_dataset(owner.id, name.strip())

    async def get(self, name: str, user: Any = None) -> Dataset | None:
        """The user's dataset ``name``, or None."""
        owner = await self._users.resolve(user)
        return await self._store.get_dataset(owner.id, name)
