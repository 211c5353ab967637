"""The recall warm-up probe (SPEC §9.4): is there a graph to search yet?

The probe reads ``pipeline_runs`` and the document records only, never the
graph or vectors. Per dataset, in order:

1. a completed graph-writing run (any pipeline but ``add_pipeline``) and at
   least ``threshold`` documents → **warm**;
2. else the latest graph-writing run errored → **build_failed** (its error
   class and PII-scrubbed message);
3. else any run but no completed build (staged only, or a first build still
   in flight) → **warm** (fail safe);
4. else → **memory_warming_up** (never built, or built but holding fewer than
   ``threshold`` documents).

Over several datasets: warm if any is warm, else build_failed if any failed,
else warming up. Warm verdicts are cached ``cache_ttl`` seconds per dataset
(the stack's clock); cold ones are probed again on every call. Probe errors
count as warm: the probe never blocks a real answer.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime

from memlab._clock import Clock
from memlab.models import SystemRecallResponse
from memlab.privacy import scrub_error_message
from memlab.relational import ADD_PIPELINE, RelationalStore

logger = logging.getLogger("memlab.recall")

WARMING_UP_TEXT = "Memory is still warming up: no knowledge graph data exists yet for the requested datasets."
BUILD_FAILED_TEXT = (
    "Memory build failed: the last ingestion for the requested datasets ended in an error ({error}). "
    "Fix the cause and re-run remember()."
)


class WarmupProbe:
    """One stack's probe; ``store`` is its relational store, ``clock`` its clock."""

    def __init__(self, store: RelationalStore, clock: Clock, *, threshold: int, cache_ttl: float) -> None:
        self._store = store
        self._clock = clock
        self.threshold = threshold
        self.cache_ttl = cache_ttl
        self._warm_until: dict[uuid.UUID, datetime] = {}

    async def marker(self, dataset_ids: Sequence[uuid.UUID]) -> SystemRecallResponse | None:
        """None when the datasets are warm (or the probe failed); else the marker to return."""
        try:
            return await self._probe(dataset_ids)
        except Exception as exc:  # fail open
            logger.warning("recall warm-up probe failed, searching anyway: %s: %s", type(exc).__name__, exc)
            return None

    async def _probe(self, dataset_ids: Sequence[uuid.UUID]) -> SystemRecallResponse | None:
        now = self._clock.now()
        if any(self._warm_until.get(dataset_id, now) > now for dataset_id in dataset_ids):
            return None
        failed = None
        count = 0
        for dataset_id in dataset_ids:
            state = await self._store.runs.build_state(dataset_id, ADD_PIPELINE)
            count += state.documents
            if state.built and state.documents >= self.threshold:
                self._warm(dataset_id, now)
                return None
            if state.latest_build is not None and state.latest_build.status == "errored":
                failed = failed or state.latest_build
            elif state.any_run and not state.built:  # staged only, or a first build in flight: fail safe
                self._warm(dataset_id, now)
                return None
        if failed is not None:
            message = scrub_error_message(failed.error_message)
            error = f"{failed.error_class}: {message}" if message else (failed.error_class or "unknown error")
            return SystemRecallResponse(
                status="build_failed",
                text=BUILD_FAILED_TEXT.format(error=error),
                datapoint_count=count,
                threshold=self.threshold,
                error_class=failed.error_class,
                error_message=message,
            )
        return SystemRecallResponse(status="memory_warming_up", text=WARMING_UP_TEXT, datapoint_count=count, threshold=self.threshold)

    def _warm(self, dataset_id: uuid.UUID, now: datetime) -> None:
        from datetime import timedelta

        if self.cache_ttl > 0:
            self._warm_until[dataset_id] = now + timedelta(seconds=self.cache_ttl)
