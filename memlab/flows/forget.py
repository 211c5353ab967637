"""``forget()``: delete permanent memory, by dataset, by document, or everything a user owns."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import ValidationError
from memlab.models import ForgetResult
from memlab.relational import RelationalStore
from memlab.users import Users

if TYPE_CHECKING:
    from memlab.graph import PermanentMemory

__all__ = ["ForgetFlow"]


class ForgetFlow:
    """forget() over the given collaborators (see :meth:`memlab.MemoryStack.forget`)."""

    def __init__(self, *, users: Users, datasets: Datasets, store: RelationalStore, memory: Callable[[], "PermanentMemory"]) -> None:
        self.users = users
        self.datasets = datasets
        self.store = store
        self.memory = memory

    async def forget(self, *, dataset: Any, data_id: Any, memory_only: bool, everything: bool, user: Any) -> ForgetResult:
        resolved = await self.users.resolve(user)
        if everything:
            if dataset is not None or data_id is not None or memory_only:
                raise ValidationError("forget(everything=True) takes no dataset, data_id or memory_only")
            total = ForgetResult()
            for owned in await self.store.datasets_of_owner(resolved.id):
                part = await self.memory().forget_dataset(owned, keep_dataset=False, keep_data=False)
                total = ForgetResult(**{name: sorted(getattr(total, name) + getattr(part, name)) for name in ForgetResult.model_fields})
            return total
        if data_id is not None:
            if memory_only:
                raise ValidationError("forget(data_id=...) removes one document; memory_only applies to a whole dataset")
            return await self.datasets.delete_data(MAIN_DATASET if dataset is None else dataset, data_id, resolved)
        if dataset is None:
            raise ValidationError("forget() needs dataset=..., data_id=... or everything=True")
        target = await self.datasets.resolve(dataset, resolved, "write")
        return await self.memory().forget_dataset(target, keep_dataset=memory_only, keep_data=memory_only)
