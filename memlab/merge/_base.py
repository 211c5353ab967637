"""The :class:`MergePolicy` contract and the identity every policy merges by.

Identity (:func:`identity`, SPEC §6.5). An item is read as a mapping (keys) when it
is one, otherwise through attributes. The first rule that applies wins:

1. ``edge_id`` non-blank -> ``("edge", str(edge_id).strip())``: a graph edge with an
   object id.
2. ``source``, ``relationship`` and ``target`` all present (not None) ->
   ``("graph", str(source), str(relationship), str(target), bool(directed))``, where
   ``directed`` defaults to True: a graph edge known by its endpoints.
3. ``id`` non-blank -> ``str(id).strip()``.
4. Otherwise None: the item has no identity and is never merged with another item.

Edge identities are tuples and ``id`` identities strings, so the two never collide.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from memlab.exceptions import ValidationError

__all__ = ["MergePolicy", "identity"]

_MISSING = object()


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name, _MISSING)
    if isinstance(item, BaseModel) and _absent_from_model(item, name):
        return _MISSING  # what getattr would say, without pydantic raising and catching an AttributeError
    return getattr(item, name, _MISSING)


def _absent_from_model(item: BaseModel, name: str) -> bool:
    """True when ``getattr(item, name)`` would raise: not a field value, extra, private attribute or class attribute
    (pydantic's own lookup, for models that keep it; the class is read once per class and name)."""
    cls = type(item)
    if not _plain_lookup(cls) or name in item.__dict__ or not _not_on_class(cls, name):
        return False
    extra = item.__pydantic_extra__
    return not (extra and name in extra)


@functools.lru_cache(maxsize=256)
def _plain_lookup(cls: type) -> bool:
    return cls.__getattr__ is BaseModel.__getattr__ and cls.__getattribute__ is object.__getattribute__  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1024)
def _not_on_class(cls: type, name: str) -> bool:
    return not hasattr(cls, name) and name not in getattr(cls, "__private_attributes__", {})


def _present(value: Any) -> bool:
    return value is not _MISSING and value is not None


def _blank(value: Any) -> bool:
    return not _present(value) or not str(value).strip()


def identity(item: Any) -> Hashable | None:
    """The key ``item`` is merged by, or None when it has none (rules in the module docstring)."""
    edge_id = _field(item, "edge_id")
    if not _blank(edge_id):
        return ("edge", str(edge_id).strip())
    source, relationship, target = (_field(item, name) for name in ("source", "relationship", "target"))
    if _present(source) and _present(relationship) and _present(target):
        directed = _field(item, "directed")
        return ("graph", str(source), str(relationship), str(target), True if not _present(directed) else bool(directed))
    item_id = _field(item, "id")
    return None if _blank(item_id) else str(item_id).strip()


def distinct(lane: Iterable[Any]) -> list[tuple[Hashable | None, Any]]:
    """``(identity, item)`` for the first occurrence of each identity in ``lane``, in order.

    Items without identity are all kept.
    """
    seen: set[Hashable] = set()
    out: list[tuple[Hashable | None, Any]] = []
    for item in lane:
        key = identity(item)
        if key is not None:
            if key in seen:
                continue
            seen.add(key)
        out.append((key, item))
    return out


def _lane(value: Any, name: str) -> list[Any]:
    if isinstance(value, (str, bytes, bytearray)) or not isinstance(value, Sequence):
        raise ValidationError(f"{name} must be a sequence of items or None, got {value!r}")
    return list(value)


def _count(value: Any, name: str, *, minimum: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be an int or None, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValidationError(f"{name} must be >= {minimum}, got {value!r}")
    return value


class MergePolicy(abc.ABC):
    """How the raw-query and the rewritten-query result lists become one list.

    :meth:`merge` is pure and synchronous: it neither mutates nor copies the items,
    and returns a new list of the given item objects. ``raw`` and ``rewrite`` are
    sequences (not strings) or None; None means the lane failed or did not run. A
    failed rewrite lane is treated like an empty one by every policy; what a failed
    raw lane means is each policy's rule (:class:`~memlab.merge.RawOnlyMerge` then answers from the
    rewrite lane, the other built-ins treat it as empty). Items are mappings or objects; :func:`identity` says
    which of them are the same result. ``limit`` caps the output length (None: no
    cap). ``reserve`` is a hint some policies read (see each policy).

    Every policy guarantees: at most ``limit`` items; no identity twice (items
    without identity are distinct); deterministic output for equal inputs.

    Raises :class:`~memlab.exceptions.ValidationError` naming the bad value when a
    lane is not a sequence or None, ``limit`` is not an int >= 0 or None, or
    ``reserve`` is not an int or None. Subclasses implement :meth:`_merge`, which
    receives the lanes as lists (None kept) and the checked numbers.
    """

    @classmethod
    def from_config(cls, config: Any) -> "MergePolicy":
        """This policy as a :class:`~memlab.config.StackConfig` describes it (``MEMLAB_MERGE_POLICY=<name>``)."""
        return cls()

    def merge(
        self, raw: Sequence[Any] | None, rewrite: Sequence[Any] | None, limit: int | None, reserve: int | None = None
    ) -> list[Any]:
        """The merged list of ``raw`` and ``rewrite`` under ``limit``."""
        raw_items = None if raw is None else _lane(raw, "raw")
        rewrite_items = None if rewrite is None else _lane(rewrite, "rewrite")
        checked_limit = _count(limit, "limit", minimum=0)
        checked_reserve = _count(reserve, "reserve", minimum=None)
        return self._merge(raw_items, rewrite_items, checked_limit, checked_reserve)

    @abc.abstractmethod
    def _merge(self, raw: list[Any] | None, rewrite: list[Any] | None, limit: int | None, reserve: int | None) -> list[Any]:
        """Merge checked lanes; ``limit`` is an int >= 0 or None, ``reserve`` an int or None."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
