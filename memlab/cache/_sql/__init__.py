"""The SQL session cache, one subpackage: SQLite (default) or PostgreSQL.

* :mod:`.backend` - :class:`SQLCache`, the :class:`~memlab.cache.CacheBackend` on SQL tables;
* :mod:`.statements` - every statement it runs, built once per dialect with SQLAlchemy Core;
* :mod:`.schema` - its tables at the newest migration (:data:`SQL_SCHEMA`, the
  ``MetaData`` that ``memlab.migrations`` upgrades to and that the benchmark copies).

The transaction runner (:mod:`memlab._sqlrun`) stays one level up because memlab's
metadata store (``memlab.db``) and the migrations run on it too. Its fast path runs a
SQLite transaction inline on the DBAPI connection, bypassing SQLAlchemy's engine:
measured on the 2-core machine, a thread hop costs ~0.3 ms and SQLAlchemy's
per-statement execution ~0.08-0.12 ms, against ~0.03 ms for a whole local
transaction (``memlab bench cache``: sqlite append ~0.49x of raw sqlite3 with it,
the thread hop alone would cap it far lower); contended writes and schema work go
through SQLAlchemy's aiosqlite engine.
"""

from memlab.cache._sql.backend import SQLCache
from memlab.cache._sql.schema import metadata as SQL_SCHEMA
from memlab.cache._sql.statements import PG_SESSION_SETTINGS, SWEEP_LOCK_KEY

__all__ = ["PG_SESSION_SETTINGS", "SQLCache", "SQL_SCHEMA", "SWEEP_LOCK_KEY"]
