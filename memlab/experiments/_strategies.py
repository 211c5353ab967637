"""Strategy objects as grid values: which vary values are objects, their labels, fingerprints and fresh copies.

A vary key that is a :class:`~memlab.MemoryStack` keyword (:data:`FAMILIES`: ``cache``,
``ttl``, ``session_retriever``, ``session_reranker``, ``analysis``, ``merge``, ``llm``, ``embedder``) takes
strategy objects: an instance of the family's base class, or a concrete subclass of it
(instantiated with no arguments). ``cache``, ``ttl``, ``analysis``, ``merge`` and
``llm`` are config sections too: there a dict (or a section model) is a section value
as before, an object or class a strategy; one key's list holds one kind or the other.
Anything else (a name string, an object of another family, an abstract class, a class
that needs arguments, an instance that cannot be deep-copied) raises
:class:`~memlab.exceptions.ConfigError` naming the key, when the grid is built.

Fresh objects: every cell x seed run gets its own object: a deep copy of an instance
(:func:`copy.deepcopy`; state an instance gathered before the grid ran is copied too),
a new instance of a class.

Labels (the cell's label and the frame's column for the key), by the first rule that
applies to the object (a class: to one instance made when the grid is built):

1. it declares ``fingerprint()``: ``ClassName(k=v, ...)`` of the mapping it returns
   (values as their ``repr``), or ``ClassName(<repr of the value>)`` for another value;
2. a memlab class (its module under ``memlab.``): its ``repr`` (memlab's strategies show
   their parameters there, ``BM25SessionRetriever(k1=1.2, b=0.75)``);
3. otherwise ``ClassName(p=v, ...)`` of its ``__init__`` parameters stored under the same
   public attribute name (``self.k = k``; a dataclass's init fields), in signature order.

Two values of one key with the same label are refused (a label must tell cells apart).

Disk-cache key: per object, ``{"class": "<module>.<qualname>", "fingerprint": ...}``
where the fingerprint is what ``fingerprint()`` returns (a str or JSON-serialisable
data; anything else is a ``ConfigError``), or, for a memlab class without one, its
``repr``. An object of any other class without ``fingerprint()`` cannot be told apart
from a changed version of itself, so its cells run uncached: a :class:`UserWarning`
saying so is issued when a grid with a ``cache_dir`` runs.
"""

from __future__ import annotations

import copy
import inspect
import json
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from memlab.exceptions import ConfigError

__all__ = ["FAMILIES", "Strategy", "family_base", "is_strategy_value", "strategy"]

#: the MemoryStack keywords a grid varies over objects (``retrievers`` and ``clock`` are not varied)
FAMILIES = ("cache", "ttl", "session_retriever", "session_reranker", "analysis", "merge", "llm", "embedder")
#: family keywords that are not StackConfig sections: every value must be a strategy
KEYWORD_ONLY = ("session_retriever", "session_reranker", "embedder")


def family_base(keyword: str) -> tuple[str, type, str]:
    """``(family, base class, its public name)`` of a :data:`FAMILIES` keyword (the table MemoryStack checks with)."""
    from memlab._injection import families

    return families()[keyword]


def is_strategy_value(keyword: str, value: Any) -> bool:
    """True when ``value`` of vary key ``keyword`` is meant as a strategy object (an object or a class, not a section dict)."""
    from collections.abc import Mapping

    from pydantic import BaseModel

    if keyword not in FAMILIES:
        return False
    if keyword in KEYWORD_ONLY:
        return True
    return not isinstance(value, (Mapping, BaseModel))


@dataclass(frozen=True)
class Strategy:
    """One strategy value of a vary key: ``template`` (as given), its ``label`` and ``identity`` (None: no fingerprint)."""

    keyword: str
    template: Any
    label: str
    identity: dict[str, Any] | None

    def fresh(self) -> Any:
        """The object one run uses: a deep copy of an instance, a new instance of a class."""
        return self.template() if isinstance(self.template, type) else copy.deepcopy(self.template)

    @property
    def why_uncached(self) -> str:
        """Why a cell holding this value runs uncached."""
        cls = type(self.template) if not isinstance(self.template, type) else self.template
        return (f"{self.keyword}={self.label}: {cls.__module__}.{cls.__qualname__} declares no fingerprint(), so the grid cannot tell "
                "its results from those of a changed version; its cells run uncached (add a fingerprint() returning a str or "
                "JSON data of every parameter that changes results)")


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_memlab(cls: type) -> bool:
    return cls.__module__ == "memlab" or cls.__module__.startswith("memlab.")


def _init_params(obj: Any) -> list[tuple[str, Any]]:
    """Rule 3 of the module docstring: ``__init__`` parameters kept as same-named public attributes."""
    if is_dataclass(obj):
        names = [field.name for field in fields(obj) if field.init]
    else:
        try:
            signature = inspect.signature(type(obj).__init__)
        except (TypeError, ValueError):
            return []
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        names = [name for name, parameter in list(signature.parameters.items())[1:] if parameter.kind in kinds]
    return [(name, getattr(obj, name)) for name in names if not name.startswith("_") and hasattr(obj, name)]


def _declared(obj: Any) -> Any:
    method = getattr(obj, "fingerprint", None)
    return method if callable(method) else None


def _describe(keyword: str, obj: Any) -> tuple[str, dict[str, Any] | None]:
    """``(label, identity)`` of one instance (module docstring)."""
    cls = type(obj)
    name = cls.__name__
    method = _declared(obj)
    if method is not None:
        declared = method()
        try:
            json.dumps(declared, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"vary key {keyword!r}: {_qualified(cls)}.fingerprint() must return a str or JSON-serialisable data: {exc}") from None
        if isinstance(declared, dict):
            label = f"{name}({', '.join(f'{key}={value!r}' for key, value in declared.items())})"
        else:
            label = f"{name}({declared!r})"
        return label, {"class": _qualified(cls), "fingerprint": declared}
    if _is_memlab(cls):
        text = repr(obj)
        return text, {"class": _qualified(cls), "fingerprint": text}
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in _init_params(obj))})", None


def strategy(keyword: str, value: Any) -> Strategy:
    """``value`` of vary key ``keyword`` checked (module docstring) and described; ``ConfigError`` naming what is wrong."""
    family, base, expected = family_base(keyword)
    where = f"vary key {keyword!r}"
    if isinstance(value, type):
        if not issubclass(value, base):
            raise ConfigError(f"{where}: the class {value.__qualname__} is not a {family} (a subclass of {expected})")
        if inspect.isabstract(value):
            raise ConfigError(f"{where}: the class {value.__qualname__} is abstract: give a concrete {family} class or an instance")
        try:
            probe = value()
        except Exception as exc:  # noqa: BLE001 - reported as the value's error
            raise ConfigError(f"{where}: the class {value.__qualname__} cannot be built with no arguments "
                              f"({type(exc).__name__}: {exc}); pass an instance instead") from None
    elif isinstance(value, base):
        probe = value
        try:
            copy.deepcopy(value)
        except Exception as exc:  # noqa: BLE001 - reported as the value's error
            raise ConfigError(f"{where}: {type(value).__qualname__} instance cannot be deep-copied ({type(exc).__name__}: {exc}); "
                              "each run needs a fresh one: pass its class (built with no arguments) instead") from None
    else:
        section = "" if keyword in KEYWORD_ONLY else f", or a dict of {keyword} section fields"
        raise ConfigError(f"{where} must hold {family} objects (instances or subclasses of {expected}{section}), "
                          f"got {value!r} ({type(value).__name__})")
    label, identity = _describe(keyword, probe)
    return Strategy(keyword, value, label, identity)
