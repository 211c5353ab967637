"""``store.feedback``: the feedback weight of each graph element (node or edge id), moved by rated session turns.

A weight is in [0, 1]; an element never rated has none (readers take 0.5, neutral).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import bindparam, select
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB
from memlab.metadata_tables import element_feedback_weights
from memlab.relational._base import Insert, Repository, binds


class FeedbackWeightRepository(Repository):
    """Graph elements' feedback weights: read many at once, written in one transaction."""

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        row = insert(element_feedback_weights).values(**binds("element_id", "weight"), updated_at=bindparam("now"))
        return {
            "feedback_weight_of": select(element_feedback_weights.c.weight).where(element_feedback_weights.c.element_id == bindparam("id")),
            "feedback_weight_set": row.on_conflict_do_update(
                index_elements=[element_feedback_weights.c.element_id],
                set_={"weight": row.excluded.weight, "updated_at": row.excluded.updated_at},
            ),
        }

    async def weights(self, element_ids: Iterable[str]) -> dict[str, float]:
        """The stored weight of each of ``element_ids`` that has one."""
        ids = sorted(set(element_ids))
        if not ids:
            return {}

        def work(db: DB) -> dict[str, float]:
            found = {element_id: db.first("feedback_weight_of", id=element_id) for element_id in ids}
            return {element_id: float(row[0]) for element_id, row in found.items() if row is not None}

        return await self._run(work, write=False)

    async def set_weights(self, weights: Mapping[str, float]) -> None:
        """Store ``weights`` (element id -> weight in [0, 1]) in one transaction."""
        if not weights:
            return
        now = self._now()

        def work(db: DB) -> None:
            for element_id, weight in sorted(weights.items()):
                db.run("feedback_weight_set", element_id=element_id, weight=weight, now=now)

        await self._run(work, write=True)
