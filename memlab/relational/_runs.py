"""``store.runs``: the ``pipeline_runs`` table, one row per pipeline step of a dataset, and its build state.

A run starts ``started`` and finishes ``completed`` / ``errored``; a run of the
staging pipeline (:data:`ADD_PIPELINE`) records documents and builds nothing.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple, cast

from sqlalchemy import bindparam, exists, func, select, update
from sqlalchemy.sql import ClauseElement

from memlab._sqlrun import DB
from memlab.metadata_tables import data, pipeline_runs
from memlab.models import PipelineRun
from memlab.relational._base import Insert, Repository, binds, when

#: ``pipeline_runs.pipeline_name`` of a remember() run's staging step (records documents, builds nothing)
ADD_PIPELINE = "add_pipeline"
#: ``pipeline_runs.pipeline_name`` of the step that builds a dataset's graph
COGNIFY_PIPELINE = "cognify_pipeline"

_RUN_COLS = tuple(pipeline_runs.c)


class BuildState(NamedTuple):
    """A dataset's document count, whether it has any run, any completed build, and its latest build run."""

    documents: int
    any_run: bool
    built: bool
    latest_build: PipelineRun | None


def _pipeline_run(row) -> PipelineRun:
    return PipelineRun(
        id=uuid.UUID(row[0]),
        dataset_id=uuid.UUID(row[1]),
        pipeline_name=row[2],
        status=row[3],
        error_class=row[4],
        error_message=row[5],
        data_count=row[6],
        started_at=when(row[7]),
        finished_at=when(row[8]) if row[8] else None,
    )


class RunRepository(Repository):
    """Pipeline runs of each dataset, and what the recall warm-up probe reads of them."""

    @staticmethod
    def statements(insert: Insert) -> dict[str, ClauseElement]:
        of_dataset = pipeline_runs.c.dataset_id == bindparam("dataset_id")
        building = (of_dataset, pipeline_runs.c.pipeline_name != bindparam("staging"))
        return {
            "run_insert": pipeline_runs.insert().values(**binds("id", "dataset_id", "pipeline_name", "status", "data_count", "started_at")),
            "run_finish": update(pipeline_runs)
            .where(pipeline_runs.c.id == bindparam("id"))
            .values(**binds("status", "error_class", "error_message", "finished_at")),
            "run_latest_build": select(*_RUN_COLS)
            .where(*building)
            .order_by(pipeline_runs.c.started_at.desc(), pipeline_runs.c.id.desc())
            .limit(1),
            "build_summary": select(
                select(func.count()).select_from(data).where(data.c.dataset_id == bindparam("dataset_id")).scalar_subquery(),
                exists().where(of_dataset),
                exists().where(*building, pipeline_runs.c.status == "completed"),
            ),
            "runs_of_dataset": select(*_RUN_COLS).where(of_dataset).order_by(pipeline_runs.c.started_at, pipeline_runs.c.id),
        }

    async def start(self, dataset_id: uuid.UUID, pipeline_name: str, data_count: int) -> PipelineRun:
        """A new ``started`` run of ``pipeline_name`` over ``data_count`` documents."""
        row = (str(uuid.uuid4()), str(dataset_id), pipeline_name, "started", None, None, data_count, self._now(), None)
        await self._run(
            lambda db: db.run(
                "run_insert", id=row[0], dataset_id=row[1], pipeline_name=pipeline_name, status="started", data_count=data_count,
                started_at=row[7],
            ),
            write=True,
        )
        return _pipeline_run(row)

    async def finish(self, run_id: uuid.UUID, status: str, *, error_class: str | None = None, error_message: str | None = None) -> None:
        """Mark a run ``completed`` / ``errored``; ``error_message`` must already be scrubbed."""
        finished = self._now()
        await self._run(
            lambda db: db.run(
                "run_finish", id=str(run_id), status=status, error_class=error_class, error_message=error_message, finished_at=finished
            ),
            write=True,
        )

    async def of_dataset(self, dataset_id: uuid.UUID) -> list[PipelineRun]:
        """The dataset's runs, oldest first."""
        rows = await self._run(lambda db: db.rows("runs_of_dataset", dataset_id=str(dataset_id)), write=False)
        return [_pipeline_run(row) for row in rows]

    async def build_state(self, dataset_id: uuid.UUID, staging_pipeline: str) -> BuildState:
        """What the recall warm-up probe needs of a dataset, in one read; runs of ``staging_pipeline`` build nothing."""
        ids = str(dataset_id)

        def work(db: DB) -> BuildState:
            # a SELECT of aggregates always returns exactly one row
            documents, any_run, built = cast(tuple, db.first("build_summary", dataset_id=ids, staging=staging_pipeline))
            latest = db.first("run_latest_build", dataset_id=ids, staging=staging_pipeline)
            return BuildState(documents, bool(any_run), bool(built), _pipeline_run(latest) if latest else None)

        return await self._run(work, write=False)
