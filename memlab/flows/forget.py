"""``forget()``: delete permanent memory, by dataset, by document, or everything a user owns, and clean the sessions that used it.

This flow orchestrates every delete of permanent memory: ``forget()`` and
``stack.datasets.delete_data()`` / ``empty_dataset()`` (which hand their checked
target to :meth:`ForgetFlow.delete`). Each delete runs in two steps:
:class:`~memlab.graph.PermanentMemory` removes the graph, vector and relational data
and returns what it removed (a :class:`~memlab.provenance.ForgetEvent`); then the
flow passes that event to :meth:`SessionCleaner.after_forget
<memlab.provenance.SessionCleaner.after_forget>` and builds the
:class:`~memlab.models.ForgetResult` from both. So the graph delete has completed
before the cleaner lists the sessions (the ordering :mod:`memlab.provenance` relies on).

Every path checks its arguments and the user's ``write`` permission before anything
is read or deleted; the session cleanup runs after the graph, vector and relational
deletes and never fails them. ``dry_run=True`` runs the same checks and reads and
returns the same :class:`~memlab.models.ForgetResult` without changing anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memlab.datasets import MAIN_DATASET, Datasets
from memlab.exceptions import ValidationError
from memlab.models import Dataset, ForgetResult
from memlab.provenance import SessionCleaner
from memlab.relational import RelationalStore
from memlab.users import Users
from memlab.validation import check_flag

if TYPE_CHECKING:
    from memlab.graph import PermanentMemory

__all__ = ["ForgetFlow"]


class ForgetFlow:
    """forget() over the given collaborators (see :meth:`memlab.MemoryStack.forget`)."""

    def __init__(
        self,
        *,
        users: Users,
        datasets: Datasets,
        store: RelationalStore,
        memory: Callable[[], "PermanentMemory"],
        cleaner: SessionCleaner,
    ) -> None:
        self.users = users
        self.datasets = datasets
        self.store = store
        self.memory = memory
        self.cleaner = cleaner

    async def forget(self, *, dataset: Any, data_id: Any, memory_only: bool, everything: bool, user: Any, dry_run: bool) -> ForgetResult:
        for name, flag in (("memory_only", memory_only), ("everything", everything), ("dry_run", dry_run)):
            check_flag(name, flag)
        if everything:
            if dataset is not None or data_id is not None or memory_only:
                raise ValidationError("forget(everything=True) takes no dataset, data_id or memory_only")
            return await self._everything(user, dry_run)
        if data_id is not None:
            if memory_only:
                raise ValidationError("forget(data_id=...) removes one document; memory_only applies to a whole dataset")
            return await self.datasets.delete_data(MAIN_DATASET if dataset is None else dataset, data_id, user, dry_run=dry_run)
        if dataset is None:
            raise ValidationError("forget() needs dataset=..., data_id=... or everything=True")
        target = await self.datasets.resolve(dataset, user, "write")
        return await self.delete(target, keep_dataset=memory_only, keep_data=memory_only, dry_run=dry_run)

    async def delete(
        self, target: Dataset, *, data_id: Any = None, keep_dataset: bool = False, keep_data: bool = False, dry_run: bool = False
    ) -> ForgetResult:
        """Delete from ``target`` (already resolved with ``write``), then clean the sessions; the one path of every delete.

        With ``data_id``: that one document (``keep_dataset`` / ``keep_data`` do not
        apply). Without: the dataset's whole graph and vectors, its documents unless
        ``keep_data``, the dataset itself unless ``keep_dataset``.
        """
        memory = self.memory()
        if data_id is not None:
            event = await memory.forget_data(target, data_id, dry_run=dry_run)
        else:
            event = await memory.forget_dataset(target, keep_dataset=keep_dataset, keep_data=keep_data, dry_run=dry_run)
        receipt = await self.cleaner.after_forget(event)  # after the graph delete completed (memlab.provenance relies on it)
        return ForgetResult(
            dataset_ids=[] if data_id is not None or keep_dataset else [target.id],
            data_ids=sorted(event.data_ids),
            node_ids=sorted(event.node_ids),
            edge_ids=sorted(event.edge_ids),
            cleanup=receipt,
            dry_run=dry_run,
        )

    async def _everything(self, user: Any, dry_run: bool) -> ForgetResult:
        """Every dataset the user owns (and the sessions attributed to them), then every session of the user."""
        resolved = await self.users.resolve(user)
        total = ForgetResult(dry_run=dry_run)
        for owned in await self.store.datasets.of_owner(resolved.id):
            total = total.merged(await self.delete(owned, keep_dataset=False, keep_data=False, dry_run=dry_run))
        rest = await self.cleaner.forget_user(resolved.id, dry_run=dry_run)
        if dry_run:  # nothing was deleted above, so the user's sessions listed there are listed again here
            seen = {(session.user_id, session.session_id) for session in total.cleanup.sessions}
            rest.sessions = [session for session in rest.sessions if (session.user_id, session.session_id) not in seen]
        return total.model_copy(update={"cleanup": total.cleanup.merged(rest)})
