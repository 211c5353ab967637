"""Experiments: StackConfig variations x a workload x seeds -> one tidy DataFrame.

::

    from memlab.config import StackConfig, EmbeddingConfig
    from memlab.experiments import Grid, ModesConversation

    grid = Grid(
        base=StackConfig(embedding=EmbeddingConfig(model="memlab/hashing")),
        vary={"analysis.search_mode": ["concurrent", "sequential", "off"], "llm_latency_ms": [0, 200]},
        workload=ModesConversation(turns=20, documents=20),
        seeds=[0, 1],
        cache_dir=None,           # or a directory: each successful cell x seed is stored there and reused
    )
    frame = await grid.run(progress=True)       # level="metric" (default) or level="turn"
    grid.cells                                  # the Cells (index, settings, config), in run order
    grid.frame("turn")                          # the last run again, at another level

``vary`` keys: a dotted StackConfig path (``analysis.search_mode``, ``merge.policy``,
``cache.backend``, ``session.retriever``, ``embedding.model``, ``ttl.policy``, ...), a
top-level field (``db_url``), a whole section name whose values are dicts merged onto
the base section (``"cache": [{"backend": "sqlite"}, {"backend": "redis", "port": 6379}]``),
or ``llm_latency_ms`` (= ``llm.offline_latency_ms``). A :class:`~memlab.MemoryStack`
keyword (``cache``, ``ttl``, ``session_retriever``, ``analysis``, ``merge``, ``llm``,
``embedder``) may instead hold strategy objects or classes
(``vary={"session_retriever": [KeywordSessionRetriever(), MyRetriever]}``): each run gets
a fresh one (a deep copy, or the class built with no arguments) passed into the
workload's stacks; cells are labelled ``ClassName(param=value, ...)`` and keyed by the
object's ``fingerprint()``; one without runs uncached, with a ``UserWarning`` (rules:
:mod:`memlab.experiments._strategies`). Cells are the cartesian product
in the order given, the first key varying slowest. Every cell's config is built and
checked in the constructor: an unknown key, an empty list or a rejected value raises
:class:`~memlab.exceptions.ConfigError` naming the key and the value; bad seeds or a
non-workload raise :class:`~memlab.exceptions.ValidationError`. So that a cell's label
never lies, two keys setting one field (``cache`` whose dicts set ``backend``, with
``cache.backend``) and two cells with the same config once defaults are resolved
(``ttl.policy`` ``auto`` and the backend's default, say) raise ``ConfigError`` too (see
:mod:`memlab.experiments._cells`). Secrets (``llm.api_key``, ``cache.password``, URL
passwords) count: two API keys are two cells, shown masked (``**********``) in labels
and frames.

Every cell x seed runs on a fresh stack: the workload gets the cell's config with a
fresh temporary ``data_root`` (deleted afterwards) and the seed. A run that raises is
recorded (``status`` ``failed``, ``error`` ``"Type: message"``) and the grid goes on.

Metric frame (``level="metric"``): one row per cell x seed x metric.

===============  ========================  ==================================================
column           dtype                     meaning
===============  ========================  ==================================================
``cell``         Int64                     the cell's index (:attr:`Grid.cells`)
one per key      Int64 / Float64 /         the cell's value, named exactly as the vary key; a
                 boolean / string          dict value as compact sorted-key JSON (string)
``seed``         Int64
``workload``     string                    the workload's ``name``
``metric``       string                    <NA> on a failed run's single row
``value``        Float64                   <NA> also where a metric is undefined for the run
``unit``         string                    :data:`TIMING_UNITS` (``s``, ``ms``, ``us``, ``ops/s``)
                                           mark wall-clock metrics; all others are identical
                                           for the same config and seed
``status``       category (``ok``,
                 ``failed``)
``error``        string                    ``"Type: message"`` of a failed run, else <NA>
``cached``       bool                      read from ``cache_dir`` instead of computed
===============  ========================  ==================================================

Turn frame (``level="turn"``): one row per cell x seed x turn of workloads that report
turns (failed runs and workloads without turns contribute none): ``cell``, the vary
columns, ``seed``, ``workload``, ``turn`` (Int64), then the workload's per-turn columns
typed by its ``turn_columns`` (else from their values: boolean / Int64 / Float64 /
string).

Disk cache (``cache_dir``): see :mod:`memlab.experiments._store`; the key is a sha256
of the cell's config (without ``data_root``; each secret as its HMAC under a local
secret, ``<cache_dir>/secret.key``, mode 0600), the workload's class, name and
:meth:`~Workload.fingerprint`, the seed and :data:`SCHEMA_VERSION`. Failed runs are not
stored; writes are atomic.

Workloads (each documents its metrics): :class:`ModesConversation` (``modes``),
:class:`CacheWorkload` (``cache``), :class:`ConversationalBenchmark` (``quality``),
:class:`MergeLanes` (``merge_lanes``); write your own by subclassing :class:`Workload`.
pandas and tqdm are imported when a grid runs, not on import.

Experiments as files (``experiments/NNN_slug/config.toml``, see :mod:`memlab.experiments._toml`):
:func:`load_experiment` / :func:`grid_from_toml` read one into an :class:`Experiment` / a
:class:`Grid`; :func:`summary_table` / :func:`format_summary` give the medians per cell;
:func:`write_results` writes a frame to ``results/<UTC time>.parquet`` / ``.csv`` / ``.txt``.
"""

from memlab.experiments._cache_ops import CACHE_OPERATIONS, CacheWorkload
from memlab.experiments._cells import ALIASES, Cell
from memlab.experiments._checks import SIZES
from memlab.experiments._grid import Grid, Run
from memlab.experiments._merge import MergeLanes
from memlab.experiments._modes import ModesConversation
from memlab.experiments._quality import ConversationalBenchmark
from memlab.experiments._store import SCHEMA_VERSION, cache_key
from memlab.experiments._toml import (
    Experiment,
    format_summary,
    grid_from_toml,
    load_experiment,
    run_experiment,
    summary_table,
    write_results,
)
from memlab.experiments._workload import (
    TIMING_UNITS,
    Workload,
    WorkloadResult,
    is_timing,
)

__all__ = [
    "ALIASES",
    "CACHE_OPERATIONS",
    "SCHEMA_VERSION",
    "SIZES",
    "TIMING_UNITS",
    "CacheWorkload",
    "Cell",
    "ConversationalBenchmark",
    "Experiment",
    "Grid",
    "MergeLanes",
    "ModesConversation",
    "Run",
    "Workload",
    "WorkloadResult",
    "cache_key",
    "format_summary",
    "grid_from_toml",
    "run_experiment",
    "is_timing",
    "load_experiment",
    "summary_table",
    "write_results",
]
