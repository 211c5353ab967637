"""What a deletion removed, and the one place session caches hear about it.

Every deletion of permanent memory (``forget()``, ``datasets.delete_data()``,
``datasets.empty_dataset()``) ends in :meth:`MemoryStack._after_forget` with a
:class:`ForgetEvent`; that is the single call site for invalidating cached
session turns that quoted the removed graph elements (SPEC §7). The
invalidation rules themselves arrive with provenance-exact cleanup; until then
cached turns are left untouched.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class ForgetEvent:
    """One deletion: the dataset, the documents, and the graph elements that disappeared.

    ``whole_dataset`` is True when the dataset's whole memory went (``forget(dataset=...)``,
    ``memory_only``, ``empty_dataset``), so dataset-level invalidation applies.
    """

    dataset_id: uuid.UUID
    data_ids: frozenset[str]
    node_ids: frozenset[str]
    edge_ids: frozenset[str]
    whole_dataset: bool
