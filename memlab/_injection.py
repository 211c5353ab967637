"""The strategy objects a :class:`~memlab.MemoryStack` takes instead of building them: their types, and the rules tying them together.

:func:`check_types` refuses a value of the wrong family before anything is built;
:func:`retriever_registry` turns ``retrievers=`` into a registry; :func:`stack_clock`
applies the cache / TTL policy / clock agreement rules documented on ``MemoryStack``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from memlab.clock import Clock, SystemClock
from memlab.config import StackConfig
from memlab.exceptions import ConfigError, MemlabError
from memlab.retrievers import Retriever, Retrievers, SearchType, parse_search_type

if TYPE_CHECKING:
    from memlab.analysis import AnalysisMode
    from memlab.cache import CacheBackend
    from memlab.embeddings import Embedder
    from memlab.llm import LLMClient
    from memlab.merge import MergePolicy
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever
    from memlab.ttl import TTLPolicy

__all__ = ["Injected", "check_types", "families", "retriever_registry", "stack_clock"]


class Injected(TypedDict, total=False):
    """The strategy objects :class:`MemoryStack` (and ``from_config`` / ``from_env``) take instead of building them."""

    cache: "CacheBackend | None"
    ttl: "TTLPolicy | None"
    session_retriever: "SessionRetriever[Any] | None"
    session_reranker: "SessionReranker | None"
    analysis: "AnalysisMode | None"
    merge: "MergePolicy | None"
    llm: "LLMClient | None"
    embedder: "Embedder | None"
    retrievers: "Retrievers | Mapping[SearchType | str, Retriever] | None"
    clock: Clock | None


def families() -> dict[str, tuple[str, type, str]]:
    """keyword -> (family, base class, its public name) of each injectable strategy object."""
    from memlab.analysis import AnalysisMode
    from memlab.cache import CacheBackend
    from memlab.embeddings import Embedder
    from memlab.llm import LLMClient
    from memlab.merge import MergePolicy
    from memlab.session.rerankers import SessionReranker
    from memlab.session.retrievers import SessionRetriever
    from memlab.ttl import TTLPolicy

    return {
        "cache": ("cache backend", CacheBackend, "memlab.cache.CacheBackend"),
        "ttl": ("TTL policy", TTLPolicy, "memlab.ttl.TTLPolicy"),
        "session_retriever": ("session retriever", SessionRetriever, "memlab.session.retrievers.SessionRetriever"),
        "session_reranker": ("session reranker", SessionReranker, "memlab.session.rerankers.SessionReranker"),
        "analysis": ("analysis mode", AnalysisMode, "memlab.analysis.AnalysisMode"),
        "merge": ("merge policy", MergePolicy, "memlab.merge.MergePolicy"),
        "llm": ("LLM client", LLMClient, "memlab.llm.LLMClient"),
        "embedder": ("embedder", Embedder, "memlab.embeddings.Embedder"),
    }


def _wrong_type(keyword: str, family: str, expected: str, value: Any) -> ConfigError:
    hint = f"the class {value.__qualname__}: pass an instance" if isinstance(value, type) else f"a {type(value).__name__}"
    return ConfigError(f"{keyword}= must be a {family} (an instance of {expected}), got {hint}")


def check_types(objects: Mapping[str, Any]) -> None:
    """``ConfigError`` naming the family and base class of the first passed object of the wrong type."""
    for keyword, (family, base, expected) in families().items():
        value = objects.get(keyword)
        if value is not None and not isinstance(value, base):
            raise _wrong_type(keyword, family, expected, value)
    clock = objects.get("clock")
    if clock is not None and not (callable(getattr(clock, "now", None)) and callable(getattr(clock, "monotonic", None))):
        raise _wrong_type("clock", "clock", "memlab.clock.Clock, with now() and monotonic()", clock)


def _same_clock(first: Clock, second: Clock) -> bool:
    """The same object, or two real clocks (every ``SystemClock`` reads the same time)."""
    return first is second or (type(first) is SystemClock and type(second) is SystemClock)


def retriever_registry(retrievers: Any) -> Retrievers:
    """``retrievers=`` as a registry: a ``Retrievers`` as is; a mapping over the defaults; ``ConfigError`` otherwise."""
    if retrievers is None:
        return Retrievers()
    if isinstance(retrievers, Retrievers):
        return retrievers
    expected = "memlab.retrievers.Retrievers, or a mapping SearchType -> memlab.retrievers.Retriever"
    if not isinstance(retrievers, Mapping):
        raise _wrong_type("retrievers", "retriever registry", expected, retrievers)
    given: dict[SearchType, Retriever] = {}
    for key, retriever in retrievers.items():
        try:
            search_type = parse_search_type(key)
        except MemlabError:
            raise ConfigError(f"retrievers= keys must be search types (memlab.SearchType), got {key!r}") from None
        if not isinstance(retriever, Retriever):
            raise _wrong_type(f"retrievers[{search_type.value}]", "retriever", "memlab.retrievers.Retriever", retriever)
        given[search_type] = retriever
    return Retrievers(instances=given)


def stack_clock(config: StackConfig, cache: "CacheBackend | None", ttl: "TTLPolicy | None", clock: Clock | None) -> Clock:
    """The stack's clock, after the rules that tie a passed cache, TTL policy and clock together."""
    if cache is not None and not config.cache.enabled:
        raise ConfigError("cache= was given but the config turns caching off (cache.enabled=False); drop one of them")
    if ttl is not None and not config.cache.enabled:
        raise ConfigError("ttl= was given but the config turns caching off (cache.enabled=False): no cache would use it")
    if cache is None:
        return clock if clock is not None else SystemClock()
    if ttl is not None and ttl is not cache.ttl:
        raise ConfigError(
            f"cache= and ttl= disagree: the cache stamps with its own TTL policy ({cache.ttl!r}), not {ttl!r}; "
            "build the cache with ttl=... and leave ttl= out"
        )
    if clock is not None and not _same_clock(clock, cache.clock):
        raise ConfigError(
            f"cache= and clock= disagree: the cache reads its own clock ({cache.clock!r}), not {clock!r}; "
            "build the cache with clock=... (the same object) or leave clock= out"
        )
    return cache.clock if clock is None else clock
