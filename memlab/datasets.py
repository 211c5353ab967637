"""``stack.datasets``: named datasets per user, permissions, and their documents.

Who may do what:

* the owner of a dataset may read, write and grant it;
* ``grant(dataset, user, "read" | "write", by=owner)`` gives another user one
  permission (``write`` does not imply ``read``);
* an agent user (``parent_user_id`` set) acts with its own permissions plus
  those of its parent user, one level up.

A ``dataset`` argument is a :class:`~memlab.models.Dataset`, a UUID (or UUID
string) of any dataset, or a name, which is looked up among the acting user's
own datasets. Refusals raise :class:`~memlab.exceptions.PermissionDeniedError`
naming the dataset id and permission, never its content; a dataset that does not
exist raises :class:`~memlab.exceptions.NotFoundError` (a ``ValidationError``).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from memlab.exceptions import NotFoundError, PermissionDeniedError, ValidationError
from memlab.models import DataRecord, Dataset, ForgetResult, User
from memlab.relational import RelationalStore
from memlab.users import Users
from memlab.validation import check_flag, check_name, check_text

MAIN_DATASET = "main_dataset"
PERMISSIONS = ("read", "write")


def _dataset_uuid(dataset: Any) -> uuid.UUID | None:
    if isinstance(dataset, Dataset):
        return dataset.id
    if isinstance(dataset, uuid.UUID):
        return dataset
    if isinstance(dataset, str):
        check_text("dataset", dataset)
        try:
            return uuid.UUID(dataset)
        except ValueError:
            return None
    raise ValidationError(f"dataset must be a Dataset, a UUID or a name, got {type(dataset).__name__} {dataset!r}")


def _check_permission(permission: str) -> str:
    if permission not in PERMISSIONS:
        raise ValidationError(f"permission must be one of {', '.join(PERMISSIONS)}, got {permission!r}")
    return permission


class Deletes(Protocol):
    """What performs deletions: the stack's :class:`~memlab.flows.forget.ForgetFlow` (delete, then clean the sessions)."""

    async def delete(
        self, target: Dataset, *, data_id: Any = None, keep_dataset: bool = False, keep_data: bool = False, dry_run: bool = False
    ) -> ForgetResult: ...


class Datasets:
    """Dataset registry of one stack; ``forgetting()`` returns the stack's forget flow, through which deletions go."""

    # the method ``list`` shadows the builtin in this class body: annotations here spell it ``builtins.list``

    def __init__(self, store: RelationalStore, users: Users, forgetting: Callable[[], Deletes]) -> None:
        self._store = store
        self._users = users
        self._forgetting = forgetting

    async def create(self, name: str, user: Any = None) -> Dataset:
        """Create the user's dataset ``name`` (or return the existing one)."""
        name = check_name("dataset name", name)
        owner = await self._users.resolve(user)
        return await self._store.datasets.create(owner.id, name)

    async def get(self, name: str, user: Any = None) -> Dataset | None:
        """The user's own dataset ``name``, or None."""
        check_text("dataset name", name)
        owner = await self._users.resolve(user)
        return await self._store.datasets.get(owner.id, name)

    async def list(self, user: Any = None, permission: str = "read") -> builtins.list[Dataset]:
        """Every dataset the user may ``permission`` (own first, then granted, oldest first)."""
        _check_permission(permission)
        acting = await self._users.resolve(user)
        found: dict[uuid.UUID, Dataset] = {}
        for principal in self._principals(acting):
            for dataset in await self._store.datasets.of_owner(principal):
                found.setdefault(dataset.id, dataset)
        for principal in self._principals(acting):
            for dataset in await self._store.datasets.granted(principal, permission):
                found.setdefault(dataset.id, dataset)
        return list(found.values())

    async def grant(self, dataset: Any, user: Any, permission: str, *, by: Any = None) -> None:
        """Give ``user`` ``permission`` on ``dataset``; ``by`` (default user when None) must own it."""
        _check_permission(permission)
        granter = await self._users.resolve(by)
        target = await self._find(dataset, granter)
        if target.owner_id != granter.id:
            raise PermissionDeniedError(f"user {granter.id} does not own dataset {target.id} and cannot grant on it")
        grantee = await self._users.resolve(user)
        await self._store.datasets.grant(target.id, grantee.id, permission)

    async def can(self, user: Any, dataset: Any, permission: str) -> bool:
        """Whether ``user`` may ``permission`` the dataset (False for an unknown dataset)."""
        _check_permission(permission)
        acting = await self._users.resolve(user)
        try:
            target = await self._find(dataset, acting)
        except ValidationError:
            return False
        return await self._allowed(acting, target, permission)

    async def resolve(self, dataset: Any, user: Any, permission: str, *, create: bool = False) -> Dataset:
        """The dataset ``user`` may ``permission``; a missing own name is created when ``create``.

        Raises ``NotFoundError`` (a ``ValidationError``) for an unknown dataset and ``PermissionDeniedError``
        when the user lacks the permission.
        """
        _check_permission(permission)
        acting = await self._users.resolve(user)
        if create and _dataset_uuid(dataset) is None:
            target = await self.create(dataset, acting)
        else:
            target = await self._find(dataset, acting)
        if not await self._allowed(acting, target, permission):
            raise PermissionDeniedError(f"user {acting.id} may not {permission} dataset {target.id}")
        return target

    async def list_data(self, dataset: Any, user: Any = None) -> builtins.list[DataRecord]:
        """The documents of a dataset the user may read, oldest first."""
        target = await self.resolve(dataset, user, "read")
        return await self._store.data.of_dataset(target.id)

    async def delete_data(self, dataset: Any, data_id: Any, user: Any = None, *, dry_run: bool = False) -> ForgetResult:
        """Remove one document, the graph elements only it supported and the cached turns that used them (as ``forget(data_id=...)``).

        ``dry_run``: change nothing and return what would be removed.
        """
        check_flag("dry_run", dry_run)
        target = await self.resolve(dataset, user, "write")
        return await self._forgetting().delete(target, data_id=data_id, dry_run=dry_run)

    async def empty_dataset(self, dataset: Any, user: Any = None, *, dry_run: bool = False) -> ForgetResult:
        """Remove every document of the dataset, its whole graph and every session attributed to it; the dataset itself stays.

        ``dry_run``: change nothing and return what would be removed.
        """
        check_flag("dry_run", dry_run)
        target = await self.resolve(dataset, user, "write")
        return await self._forgetting().delete(target, keep_dataset=True, keep_data=False, dry_run=dry_run)

    # -- internals -----------------------------------------------------------------
    @staticmethod
    def _principals(user: User) -> builtins.list[uuid.UUID]:
        return [user.id] + ([user.parent_user_id] if user.parent_user_id else [])

    async def _find(self, dataset: Any, acting: User) -> Dataset:
        dataset_id = _dataset_uuid(dataset)
        if dataset_id is not None:
            found = await self._store.datasets.by_id(dataset_id)
            if found is None:
                raise NotFoundError(f"dataset {dataset_id} does not exist", what="dataset")
            return found
        if not dataset.strip():
            raise ValidationError(f"dataset name must be a non-blank string, got {dataset!r}")
        found = await self._store.datasets.get(acting.id, dataset.strip())
        if found is None:
            raise NotFoundError(f"user {acting.id} has no dataset named {dataset!r}", what="dataset")
        return found

    async def _allowed(self, acting: User, target: Dataset, permission: str) -> bool:
        for principal in self._principals(acting):
            if target.owner_id == principal or permission in await self._store.datasets.permissions(target.id, principal):
                return True
        return False
