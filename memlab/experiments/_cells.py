"""Grid cells: the ``vary`` mapping checked and expanded into validated StackConfigs.

A vary key is a dotted StackConfig path (``analysis.search_mode``), a top-level field
(``db_url``), a whole section name whose values are dicts merged onto the base
section (``cache``), or an alias of :data:`ALIASES` (``llm_latency_ms``). Cells are the
cartesian product of the value lists in the order given, the first key varying
slowest. Everything is checked here, before anything runs: an unknown key, an empty
value list or a value the config (or a strategy builder) rejects raises
:class:`~memlab.exceptions.ConfigError` naming the key and the value.

So that a cell's label never lies, two keys may not set one field: ``cache`` (a section)
with ``cache.backend`` is refused when a ``cache`` value sets ``backend`` (in either
order; ``cache`` with ``cache.host`` is fine while no ``cache`` value sets ``host``), as
are two keys naming one path (``llm_latency_ms`` and ``llm.offline_latency_ms``). And no
two cells may run the same config: two values of one key giving the same config are
refused, and so are two cells whose configs are the same once defaults are resolved
(:func:`config_identity`: ``ttl.policy`` ``auto`` is the cache backend's default, no
expiry is policy ``none``, unset chunk sizes are the embedder's, an unset
``embedding.api_key`` is ``llm.api_key``). Secrets count: two API keys are two cells.

Secrets never show: a value of a secret field (``llm.api_key``, ``cache.password``, ...;
given as a ``SecretStr`` or a plain string, alone or in a section dict) renders as
``**********`` in labels, frames and messages, a URL password as ``***``.

Strategy objects: a vary key that is a :class:`~memlab.MemoryStack` keyword (``cache``,
``ttl``, ``session_retriever``, ``session_reranker``, ``analysis``, ``merge``, ``llm``, ``embedder``) may
hold objects or classes instead of config values (:mod:`memlab.experiments._strategies`:
their checks, labels and fingerprints). Such a key leaves the cell's config as the base's
and gives the cell a :class:`~memlab.experiments._strategies.Strategy` (``Cell.strategies``).
A strategy key may not be varied beside a config key its object overrides (``cache``
objects with ``cache.*`` or ``ttl.*``, since a cache keeps its own TTL policy; ``embedder`` with ``embedding.model``, ``session_retriever``
with ``session.retriever``, ``session_reranker`` with ``session.reranker`` / ``session.rerank_top_n``), and a cell may not hold both a ``cache`` and a ``ttl``
object (the cache stamps with its own policy) nor either with ``cache.enabled`` false.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import json
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, SecretStr

from memlab.config import (
    StackConfig,
    build_analysis_mode,
    build_embedder,
    build_llm_client,
    build_merge_policy,
    build_session_reranker,
    build_session_retriever,
    build_ttl_policy,
)
from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments._store import canonical_json, config_data
from memlab.experiments._strategies import FAMILIES, KEYWORD_ONLY, Strategy, is_strategy_value, strategy
from memlab.privacy import mask_url_passwords

__all__ = ["ALIASES", "Cell", "check_buildable", "column_dtype", "config_identity", "expand", "render_value", "resolve_key", "shown"]

#: shorthand vary keys -> the StackConfig path they stand for
ALIASES: dict[str, str] = {"llm_latency_ms": "llm.offline_latency_ms"}
#: fields a grid sets itself, never varied
_RESERVED = frozenset({"data_root"})


@dataclass(frozen=True)
class Cell:
    """One point of the grid: ``index`` (run order), ``settings`` (vary key -> value as given), ``config``.

    ``config`` is the base config with the settings applied, validated; its
    ``data_root`` is the base's (each run gets a fresh one instead). ``strategies``: vary
    key -> :class:`~memlab.experiments._strategies.Strategy` of the keys varied over objects.
    """

    index: int
    settings: dict[str, Any]
    config: StackConfig
    strategies: dict[str, Strategy] = field(default_factory=dict)

    def label(self) -> str:
        """``key=value, ...`` of the settings (values as the frame renders them, secrets masked; objects by their label)."""
        return _label(self.settings, self.strategies) or "base"

    def rendered(self, key: str) -> Any:
        """The frame's value of vary key ``key`` for this cell (an object's label)."""
        chosen = self.strategies.get(key)
        return chosen.label if chosen is not None else render_value(self.settings[key], key)

    def objects(self) -> dict[str, Any]:
        """MemoryStack keyword -> a fresh object of each strategy of the cell (one call per run)."""
        return {key: chosen.fresh() for key, chosen in self.strategies.items()}


def _label(settings: Mapping[str, Any], strategies: Mapping[str, Strategy] | None = None) -> str:
    chosen = strategies or {}
    return ", ".join(f"{key}={chosen[key].label if key in chosen else shown(value, key)}" for key, value in settings.items())


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
    build_session_reranker(config)
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


def config_identity(config: StackConfig, *, resolved: bool = True) -> str:
    """A digest telling configs apart (in memory only: the secrets enter it in clear); ``data_root`` left out.

    ``resolved``: with the defaults resolved (module docstring), so that configs that
    build the same stack have one identity; else the fields as they are.
    """
    data = config_data(config, str)
    if resolved:
        policy = build_ttl_policy(config)
        data["ttl"] = {"policy": policy.name, "seconds": policy.seconds, "slack": getattr(policy, "slack", None)}
        size, overlap = config.graph.chunking(build_embedder(config).max_tokens)
        data["graph"] = {**data["graph"], "chunk_size": size, "chunk_overlap": overlap}
        data["embedding"] = {**data["embedding"], "api_key": data["embedding"]["api_key"] or data["llm"]["api_key"]}
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


#: strategy key -> the config paths (sections or fields) its object overrides (a cache object stamps with its own TTL policy)
_OVERRIDES: dict[str, tuple[tuple[str, ...], ...]] = {
    "cache": (("cache",), ("ttl",)), "ttl": (("ttl",),), "analysis": (("analysis",),), "merge": (("merge",),),
    "llm": (("llm",),), "embedder": (("embedding",),), "session_retriever": (("session", "retriever"),),
    "session_reranker": (("session", "reranker"), ("session", "rerank_top_n")),
}


def _values(key: str, values: Any) -> list[Any]:
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
        raise ConfigError(f"vary key {key!r}: give a list of values, got {values!r}")
    if not values:
        raise ConfigError(f"vary key {key!r} has an empty list of values")
    return list(values)


def _strategy_axis(key: str, values: list[Any]) -> list[Strategy]:
    """The strategies of one key's values, checked; two with one label are refused."""
    chosen: list[Strategy] = []
    for value in values:
        if not is_strategy_value(key, value):
            raise ConfigError(f"vary key {key!r} mixes strategy objects and {key} section values: vary one kind per grid")
        item = strategy(key, value)
        if any(item.label == earlier.label for earlier in chosen):
            raise ConfigError(f"vary key {key!r}: two values are labelled {item.label}; a label must tell cells apart "
                              "(give them distinct fingerprint()s or parameters)")
        chosen.append(item)
    return chosen


def _split(vary: Mapping[str, Sequence[Any]]) -> tuple[list[tuple[str, tuple[str, ...], list[Any]]], dict[str, list[Strategy]]]:
    """The config keys as ``(key, path, values)`` and the strategy keys as their strategies, each checked."""
    keys = []
    strategies: dict[str, list[Strategy]] = {}
    seen: dict[tuple[str, ...], str] = {}
    for key, values in vary.items():
        listed = _values(key, values) if key in FAMILIES else None
        if listed is not None and (key in KEYWORD_ONLY or any(is_strategy_value(key, value) for value in listed)):
            strategies[key] = _strategy_axis(key, listed)
            continue
        path = resolve_key(key)
        if path in seen:
            raise ConfigError(f"vary keys {seen[path]!r} and {key!r} both set {'.'.join(path)}")
        seen[path] = key
        keys.append((key, path, _values(key, values)))
    for key in strategies:
        for overridden in _OVERRIDES[key]:
            for other, path, _ in keys:
                if path[: len(overridden)] == overridden or overridden[: len(path)] == path:
                    raise ConfigError(f"vary keys {key!r} (objects) and {other!r} both decide {'.'.join(overridden)}: a {key} "
                                      f"object ignores {other}, so a cell would run under a label that lies; vary one of them")
    return keys, strategies


def _check_objects(cell: Cell) -> None:
    """The agreement rules of MemoryStack that a cell's objects could break (module docstring)."""
    given = cell.strategies
    if ("cache" in given or "ttl" in given) and not cell.config.cache.enabled:
        which = "cache" if "cache" in given else "ttl"
        raise ConfigError(f"grid cell {cell.index} ({cell.label()}): a {which} object needs cache.enabled=True (caching is off)")
    if "cache" in given and "ttl" in given:
        raise ConfigError(f"grid cell {cell.index} ({cell.label()}): a cache object stamps with its own TTL policy, so a ttl object "
                          "beside it is ambiguous; build the cache with ttl=... instead")


def _fields_set(value: Any) -> set[str]:
    """The fields a whole-section vary value sets."""
    if isinstance(value, BaseModel):
        return set(value.model_fields_set)
    return {name for name in value if isinstance(name, str)} if isinstance(value, Mapping) else set()


def _check_overlaps(keys: Sequence[tuple[str, tuple[str, ...], list[Any]]]) -> None:
    """Refuse a section key whose values set a field that another key varies (module docstring)."""
    for section_key, section_path, values in keys:
        if len(section_path) != 1 or _section_type(section_path[0]) is None:
            continue
        for field_key, field_path, _ in keys:
            if len(field_path) != 2 or field_path[0] != section_path[0]:
                continue
            setting = next((value for value in values if field_path[1] in _fields_set(value)), _UNSET)
            if setting is not _UNSET:
                where = ".".join(field_path)
                raise ConfigError(
                    f"vary keys {section_key!r} and {field_key!r} both set {where} (the {section_key!r} value "
                    f"{shown(setting, section_key)} sets {field_path[1]!r}), so a cell would run one key's value under the "
                    f"other's label; vary {where} under one key only"
                )


def _axis(data: dict[str, Any], key: str, path: tuple[str, ...], values: Sequence[Any]) -> list[tuple[str, tuple[str, ...], Any]]:
    """The ``(key, path, value)`` of each value, each built alone onto the base; two giving one config are refused."""
    built: dict[str, tuple[int, Any]] = {}
    for position, value in enumerate(values):
        try:
            identity = config_identity(_build(data, [(key, path, value)]), resolved=False)
        except ConfigError as exc:
            raise _reraise(exc, f"vary key {key!r}, value {shown(value, key)}") from None
        if identity in built:
            first, same = built[identity]
            raise ConfigError(f"vary key {key!r}: values {shown(same, key)} and {shown(value, key)} give the same config "
                              f"(one cell twice; values {first} and {position} of its list)")
        built[identity] = (position, value)
    return [(key, path, value) for value in values]


def expand(base: StackConfig, vary: Mapping[str, Sequence[Any]] | None) -> list[Cell]:
    """The cells of ``vary`` over ``base`` (module docstring); raises :class:`ConfigError` before anything runs."""
    if not isinstance(base, StackConfig):
        raise ValidationError(f"Grid base must be a memlab.config.StackConfig, got {type(base).__name__}")
    vary = {} if vary is None else vary
    if not isinstance(vary, Mapping):
        raise ValidationError(f"Grid vary must be a mapping of config keys to lists of values, got {type(vary).__name__}")
    data = base.model_dump()
    keys, objects = _split(vary)
    _check_overlaps(keys)
    axes: dict[str, list[Any]] = {key: _axis(data, key, path, values) for key, path, values in keys}
    axes.update({key: chosen for key, chosen in objects.items()})
    order = list(vary)  # the cartesian product in the order given, config and strategy keys alike
    cells: list[Cell] = []
    seen: dict[str, Cell] = {}
    for index, combination in enumerate(itertools.product(*(axes[key] for key in order))):
        picked = dict(zip(order, combination, strict=True))
        pairs = [picked[key] for key in order if key not in objects]
        strategies: dict[str, Strategy] = {key: picked[key] for key in order if key in objects}
        settings = {key: strategies[key].template if key in strategies else picked[key][2] for key in order}
        try:
            config = _build(data, pairs)
        except ConfigError as exc:
            raise _reraise(exc, f"grid cell {index} ({_label(settings, strategies)})") from None
        cell = Cell(index, settings, config, strategies)
        _check_objects(cell)
        identity = config_identity(config) + canonical_json({key: chosen.label for key, chosen in strategies.items()})
        if identity in seen:
            earlier = seen[identity]
            raise ConfigError(f"grid cells {earlier.index} ({earlier.label()}) and {index} ({cell.label()}) give the same config "
                              "once defaults are resolved (one config counted as two cells); drop one of the values")
        seen[identity] = cell
        cells.append(cell)
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


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or any(_is_secret(arg) for arg in typing.get_args(annotation))


def _secret_field(model: type[BaseModel], name: str) -> bool:
    field = model.model_fields.get(name)
    return field is not None and _is_secret(field.annotation)


def _secret_path(path: tuple[str, ...]) -> bool:
    if len(path) == 2:
        section = _section_type(path[0])
        return section is not None and _secret_field(section, path[1])
    return _secret_field(StackConfig, path[0])


_MASK = str(SecretStr("secret"))


def _masked(value: Any, key: str) -> Any:
    """``value`` of vary key ``key`` with the values of secret fields replaced by the mask."""
    path = resolve_key(key)
    if value is None:
        return None
    if _secret_path(path):
        return _MASK
    section = _section_type(path[0]) if len(path) == 1 else None
    if section is not None and isinstance(value, Mapping):
        return {name: _MASK if item is not None and _secret_field(section, name) else item for name, item in value.items()}
    return value


def render_value(value: Any, key: str | None = None) -> Any:
    """A vary value as its frame cell: dicts / sections as compact sorted-key JSON, enums by value, secrets masked.

    Secrets: ``SecretStr`` values, and with ``key`` (the vary key) any value of a secret
    field, show as ``**********``; URL passwords as ``***``.
    """
    if key is not None:
        value = _masked(value, key)
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


def shown(value: Any, key: str | None = None) -> str:
    """A vary value (of vary ``key``) as an error message or label shows it: dicts as JSON, else the repr of its rendering."""
    rendered = render_value(value, key)
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
