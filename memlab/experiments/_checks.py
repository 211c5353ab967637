"""Argument checks the workloads share (each raises :class:`~memlab.exceptions.ValidationError` naming the value)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlab.bench.errors import BenchmarkError
from memlab.exceptions import ValidationError

__all__ = [
    "REMEMBERING",
    "SIZES",
    "benchmark_size",
    "optional_limit",
    "positive_int",
    "search_type_name",
    "session_reranker",
    "session_retriever",
    "verify_and_clear_session",
]

#: the strategy objects a workload's untimed remembering stack takes from the cell's (they shape permanent memory)
REMEMBERING = ("llm", "embedder")

#: named sizes of the synthetic conversational benchmark (questions); an int is taken as it is
SIZES: dict[str, int] = {"tiny": 12, "small": 60, "default": 600}


def session_retriever(config: Any, objects: Mapping[str, Any]) -> Any:
    """The cell's session retriever: its object, else the one the config names (built with the cell's embedder, if any)."""
    from memlab.config import build_embedder, build_session_retriever

    given = objects.get("session_retriever")
    if given is not None:
        return given
    embedder = objects.get("embedder")
    return build_session_retriever(config, embedder if embedder is not None else build_embedder(config))


def session_reranker(config: Any, objects: Mapping[str, Any]) -> Any:
    """The cell's session reranker: its object, else the one the config names (None for ``none``)."""
    from memlab.config import build_session_reranker

    given = objects.get("session_reranker")
    return given if given is not None else build_session_reranker(config)


def positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be an int >= 1, got {value!r}")
    return value


def optional_limit(value: Any) -> int | None:
    return None if value is None else positive_int("limit", value)


def benchmark_size(value: Any) -> int:
    """Questions of the synthetic benchmark: a name of :data:`SIZES` or an int >= 1."""
    if isinstance(value, str):
        if value not in SIZES:
            raise ValidationError(f"size must be one of {', '.join(SIZES)} or an int >= 1, got {value!r}")
        return SIZES[value]
    return positive_int("size", value)


def search_type_name(value: Any) -> str:
    """The :class:`~memlab.retrievers.SearchType` value ``value`` names (a member or its string)."""
    from memlab.retrievers import SearchType

    try:
        return SearchType(getattr(value, "value", value)).value
    except ValueError:
        raise ValidationError(f"unknown search type {value!r}; choose from {', '.join(member.value for member in SearchType)}") from None


async def verify_and_clear_session(stack: Any, session_id: str, expected: int) -> None:
    """Raise :class:`~memlab.exceptions.BenchmarkError` unless the session holds ``expected`` turns; then delete it.

    Deleting it leaves nothing behind on a shared Redis or PostgreSQL server (the cell's
    stack is gone with its data root; its session would otherwise stay until its TTL).

    A stack whose session cache is unreachable keeps answering without it (fail-open,
    by design), so a workload would otherwise report numbers that never touched the
    backend the cell names. With caching off (``cache.enabled`` false) nothing is stored
    and nothing is checked.
    """
    if not stack.config.cache.enabled:
        return
    stored = len(await stack.session.get_session(session_id=session_id))
    if stored != expected:
        raise BenchmarkError(
            f"session {session_id!r} holds {stored} of the {expected} turns sent: the {stack.config.cache.backend} session cache "
            "failed open (unreachable?), so this cell did not measure it"
        )
    user = await stack.users.default()
    await stack.session_manager.delete_session(str(user.id), session_id)
