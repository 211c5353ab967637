"""Grid cells: the ``vary`` mapping checked and expanded into validated StackConfigs.

A vary key is a dotted StackConfig path (``analysis.search_mode``), a top-level field
(``db_url``), a whole section name whose values are dicts merged onto the base
section (``cache``), or an alias of :data:`ALIASES` (``llm_latency_ms``). Cells are the
cartesian product of the value lists in the order given, the first key varying
slowest. Everything is checked here, before anything runs: an unknown key, an empty
value list or a value the config (or a strategy builder) rejects raises
:class:`~memlab.exceptions.ConfigError` naming the key and the value.
"""

from __future__ import annotations

import enum
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, SecretStr

from memlab.config import (
    StackConfig,
    build_analysis_mode,
    build_embedder,
    build_llm_client,
    build_merge_policy,
    build_session_retriever,
    build_ttl_policy,
)
from memlab.exceptions import ConfigError, ValidationError
from memlab.privacy import mask_url_passwords

__all__ = ["ALIASES", "Cell", "check_buildable", "column_dtype", "expand", "render_value", "resolve_key", "shown"]

#: shorthand vary keys -> the StackConfig path they stand for
ALIASES: dict[str, str] = {"llm_latency_ms": "llm.offline_latency_ms"}
#: fields a grid sets itself, never varied
_RESERVED = frozenset({"data_root"})


@dataclass(frozen=True)
class Cell:
    """One point of the grid: ``index`` (run order), ``settings`` (vary key -> value as given), ``config``.

    ``config`` is the base config with the settings applied, validated; its
    ``data_root`` is the base's (each run gets a fresh one instead).
    """

    index: int
    settings: dict[str, Any]
    config: StackConfig

    def label(self) -> str:
        """``key=value, ...`` of the settings (values as the frame renders them)."""
        return ", ".join(f"{key}={shown(value)}" for key, value in self.settings.items()) or "base"


def _section_type(name: str) -> type[BaseModel] | None:
    field = StackConfig.model_fields.get(name)
    annotation = field.annotation if field is not None else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _fields(model: type[BaseModel]) -> str:
    return ", ".join(sorted(name for name in model.model_fields if name not in _RESERVED))


def resolve_key(key: Any) -> tuple[str, ...]:
    """The StackConfig path of vary key ``key``: ``("section", "field")``, ``("section",)`` or ``("field",)``."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"a vary key must be a non-empty string, got {key!r}")
    parts = tuple(ALIASES.get(key, key).split("."))
    head = parts[0]
    if head in _RESERVED:
        raise ConfigError(f"vary key {key!r}: the grid gives every run a fresh {head}; it cannot be varied")
    if head not in StackConfig.model_fields:
        raise ConfigError(f"unknown vary key {key!r}: StackConfig has no {head!r} (choose from {_fields(StackConfig)}, "
                          f"dotted section.field paths, or {', '.join(ALIASES)})")
    section = _section_type(head)
    if len(parts) == 1:
        return parts
    if section is None or len(parts) != 2:
        raise ConfigError(f"unknown vary key {key!r}: use a section name, a top-level field or section.field")
    if parts[1] not in section.model_fields:
        raise ConfigError(f"unknown vary key {key!r}: {section.__name__} has no field {parts[1]!r} (fields: {_fields(section)})")
    return parts


def _apply(data: dict[str, Any], path: tuple[str, ...], value: Any, key: str) -> None:
    """Set ``value`` at ``path`` of the ``model_dump()`` data ``data`` (a section value merges onto the section)."""
    section = _section_type(path[0])
    if len(path) == 2:
        data[path[0]] = {**data[path[0]], path[1]: value}
        return
    if section is None:
        data[path[0]] = value
        return
    if isinstance(value, BaseModel):
        if not isinstance(value, section):
            raise ConfigError(f"vary key {key!r}: value {shown(value)} is a {type(value).__name__}, not a {section.__name__}")
        value = value.model_dump(exclude_unset=True)
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"vary key {key!r} names the whole {path[0]} section: each value must be a dict of {section.__name__} fields, got {value!r}"
        )
    data[path[0]] = {**data[path[0]], **value}


def check_buildable(config: StackConfig) -> None:
    """Build the cheap strategies of ``config`` (nothing connects, nothing loads) so a bad name fails now."""
    embedder = build_embedder(config)
    config.graph.chunking(embedder.max_tokens)
    build_session_retriever(config, embedder)
    build_analysis_mode(config)
    build_merge_policy(config)
    build_ttl_policy(config)
    build_llm_client(config)


def _build(base: dict[str, Any], pairs: Sequence[tuple[str, tuple[str, ...], Any]]) -> StackConfig:
    data = dict(base)
    for key, path, value in pairs:
        _apply(data, path, value, key)
    for name, value in data.items():  # sections first: their errors name the field and value alone
        section = _section_type(name)
        if section is not None and isinstance(value, dict):
            data[name] = section(**value)
    config = StackConfig(**data)
    check_buildable(config)
    return config


def _reraise(exc: ConfigError, where: str) -> ConfigError:
    error = ConfigError(f"{where}: {exc}")
    error.problems = exc.problems
    return error


_UNSET = object()


def expand(base: StackConfig, vary: Mapping[str, Sequence[Any]] | None) -> list[Cell]:
    """The cells of ``vary`` over ``base`` (module docstring); raises :class:`ConfigError` before anything runs."""
    if not isinstance(base, StackConfig):
        raise ValidationError(f"Grid base must be a memlab.config.StackConfig, got {type(base).__name__}")
    vary = {} if vary is None else vary
    if not isinstance(vary, Mapping):
        raise ValidationError(f"Grid vary must be a mapping of config keys to lists of values, got {type(vary).__name__}")
    data = base.model_dump()
    axes: list[list[tuple[str, tuple[str, ...], Any]]] = []
    seen: dict[tuple[str, ...], str] = {}
    for key, values in vary.items():
        path = resolve_key(key)
        if path in seen:
            raise ConfigError(f"vary keys {seen[path]!r} and {key!r} both set {'.'.join(path)}")
        seen[path] = key
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
            raise ConfigError(f"vary key {key!r}: give a list of values, got {values!r}")
        if not values:
            raise ConfigError(f"vary key {key!r} has an empty list of values")
        axis = []
        built: list[tuple[Any, dict[str, Any]]] = []
        for value in values:
            try:
                dumped = _build(data, [(key, path, value)]).model_dump(mode="json")
            except ConfigError as exc:
                raise _reraise(exc, f"vary key {key!r}, value {shown(value)}") from None
            same = next((earlier for earlier, dump in built if dump == dumped), _UNSET)
            if same is not _UNSET:
                raise ConfigError(f"vary key {key!r}: values {shown(same)} and {shown(value)} give the same config (one cell twice)")
            built.append((value, dumped))
            axis.append((key, path, value))
        axes.append(axis)
    cells = []
    for index, pairs in enumerate(itertools.product(*axes)):
        settings = {key: value for key, _, value in pairs}
        try:
            config = _build(data, pairs)
        except ConfigError as exc:
            label = ", ".join(f"{key}={shown(value)}" for key, value in settings.items())
            raise _reraise(exc, f"grid cell {index} ({label})") from None
        cells.append(Cell(index, settings, config))
    return cells


# -- rendering values for the frame -----------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, SecretStr):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return str(value)


def render_value(value: Any) -> Any:
    """A vary value as its frame cell: dicts / sections as compact sorted-key JSON, enums by value, secrets masked.

    Secrets: ``SecretStr`` values show as ``**********`` and URL passwords as ``***``.
    """
    if isinstance(value, (Mapping, BaseModel)):
        data = value.model_dump(mode="json", exclude_unset=True) if isinstance(value, BaseModel) else value
        return mask_url_passwords(json.dumps(data, sort_keys=True, separators=(",", ":"), default=_jsonable))
    if isinstance(value, SecretStr):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, str):
        return mask_url_passwords(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return mask_url_passwords(str(value))


def shown(value: Any) -> str:
    """A vary value as an error message or label shows it: dicts as JSON, anything else as the repr of its rendering."""
    rendered = render_value(value)
    return rendered if isinstance(value, (Mapping, BaseModel)) else repr(rendered)


def column_dtype(values: Sequence[Any]) -> str:
    """The nullable pandas dtype of a column holding ``values`` (rendered): boolean, Int64, Float64, else string."""
    present = [value for value in values if value is not None]
    if present and all(isinstance(value, bool) for value in present):
        return "boolean"
    if present and all(isinstance(value, int) and not isinstance(value, bool) for value in present):
        return "Int64"
    if present and all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in present):
        return "Float64"
    return "string"
