"""memlab's own metadata database: ``{data_root}/memlab.db`` (or ``MEMLAB_DB_URL``).

The split rule: one engine, one runner, owned by :class:`RelationalStore` (open, close,
the statements of the dialect); the queries live in one repository per concern, each
taking the store's run function and never opening a connection of its own:
``store.users`` (users, API keys), ``store.datasets`` (datasets, permissions),
``store.data`` (documents), ``store.sessions`` (``session_records``, ``session_datasets``),
``store.usage`` (usage counters, ``session_model_usage``) and ``store.runs``
(``pipeline_runs``, build state). A repository's row -> model converters live with it.
"""

from memlab.relational._data import DataRepository, NewData
from memlab.relational._datasets import DatasetRepository
from memlab.relational._runs import ADD_PIPELINE, COGNIFY_PIPELINE, BuildState, RunRepository
from memlab.relational._sessions import READS_REMEMBERED, SessionRecordRepository
from memlab.relational._store import RelationalStore, statements_for
from memlab.relational._usage import SESSION_ORDER_COLUMNS, SESSION_STATUSES, UsageRepository
from memlab.relational._users import UserRepository

__all__ = [
    "ADD_PIPELINE",
    "COGNIFY_PIPELINE",
    "READS_REMEMBERED",
    "SESSION_ORDER_COLUMNS",
    "SESSION_STATUSES",
    "BuildState",
    "DataRepository",
    "DatasetRepository",
    "NewData",
    "RelationalStore",
    "RunRepository",
    "SessionRecordRepository",
    "UsageRepository",
    "UserRepository",
    "statements_for",
]
