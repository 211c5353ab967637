"""memlab: a Jupyter-first research toolkit for agent memory.

Sessions, caching and recall as strategy components assembled from config into a
:class:`MemoryStack`. ``import memlab`` is light: the stack, SQLAlchemy and every
heavy library load on first use.
"""

from __future__ import annotations

from typing import Any

from memlab._imports import lazy_getattr as _lazy_getattr
from memlab.exceptions import (
    BackendError,
    CacheConnectionError,
    ConfigError,
    DistillationCallsFailedError,
    EmbeddingError,
    LLMError,
    MemlabError,
    MigrationError,
    NotFoundError,
    SessionLockTimeout,
    SnapshotConflict,
    PermissionDeniedError,
    SessionDistillationError,
    SessionParameterValidationError,
    SessionPreconditionError,
    SessionQAEntryValidationError,
    StackStateError,
    StructuredOutputError,
    SyncInEventLoopError,
    ValidationError,
)

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "CacheConnectionError",
    "ConfigError",
    "DataRecord",
    "Dataset",
    "DistillResult",
    "DistillationCallsFailedError",
    "EmbeddingError",
    "ForgetResult",
    "GraphRecallResponse",
    "ImproveResult",
    "LLMError",
    "MemlabError",
    "MemoryStack",
    "MigrationError",
    "NotFoundError",
    "PermissionDeniedError",
    "PipelineRun",
    "RecallResponse",
    "RememberResult",
    "SearchType",
    "SessionContextEntry",
    "SessionContextRecallResponse",
    "SessionDistillationError",
    "SessionFeedbackEntry",
    "SessionLockTimeout",
    "SessionParameterValidationError",
    "SessionPreconditionError",
    "SessionQAEntry",
    "SessionQAEntryValidationError",
    "SessionRecallResponse",
    "SkillRecallResponse",
    "SnapshotConflict",
    "StackConfig",
    "StackStateError",
    "StructuredOutputError",
    "SyncInEventLoopError",
    "SyncMemoryStack",
    "SystemRecallResponse",
    "User",
    "ValidationError",
    "forget",
    "improve",
    "recall",
    "remember",
    "run_migrations",
    "search",
]

_LAZY = {
    "MemoryStack": "memlab.stack",
    "SyncMemoryStack": "memlab.sync",
    "StackConfig": "memlab.config",
    "DataRecord": "memlab.models",
    "Dataset": "memlab.models",
    "DistillResult": "memlab.models",
    "ForgetResult": "memlab.models",
    "GraphRecallResponse": "memlab.models",
    "SessionContextRecallResponse": "memlab.models",
    "SkillRecallResponse": "memlab.models",
    "SystemRecallResponse": "memlab.models",
    "ImproveResult": "memlab.models",
    "PipelineRun": "memlab.models",
    "RecallResponse": "memlab.models",
    "RememberResult": "memlab.models",
    "SessionContextEntry": "memlab.models",
    "SessionFeedbackEntry": "memlab.models",
    "SessionQAEntry": "memlab.models",
    "SessionRecallResponse": "memlab.models",
    "User": "memlab.models",
    "run_migrations": "memlab.migrations",
    "SearchType": "memlab.retrievers._types",
}


__getattr__ = _lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


async def remember(data: Any, **kwargs: Any):
    """:meth:`MemoryStack.remember` on the default stack (built from the environment)."""
    from memlab._default import default_stack

    return await (await default_stack()).remember(data, **kwargs)


async def recall(query_text: str, query_type: Any = None, **kwargs: Any):
    """:meth:`MemoryStack.recall` on the default stack (built from the environment)."""
    from memlab._default import default_stack

    return await (await default_stack()).recall(query_text, query_type, **kwargs)


async def forget(**kwargs: Any):
    """:meth:`MemoryStack.forget` on the default stack (built from the environment)."""
    from memlab._default import default_stack

    return await (await default_stack()).forget(**kwargs)


async def improve(**kwargs: Any):
    """:meth:`MemoryStack.improve` on the default stack (built from the environment)."""
    from memlab._default import default_stack

    return await (await default_stack()).improve(**kwargs)


async def search(query_text: str, query_type: Any = "GRAPH_COMPLETION", **kwargs: Any):
    """:meth:`MemoryStack.search` on the default stack (built from the environment)."""
    from memlab._default import default_stack

    return await (await default_stack()).search(query_text, query_type, **kwargs)
