"""The generic JSON-schema filler of the offline structured output (rules in :mod:`memlab.llm.offline`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["fill_schema"]

_MAX_DEPTH = 12


def fill_schema(schema: Mapping[str, Any], text: str = "") -> Any:
    """A deterministic value valid for the JSON ``schema``; strings get ``text``."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    title = schema.get("title")
    root = frozenset({f"#/$defs/{title}", f"#/definitions/{title}"}) if title in defs else frozenset()
    return _fill(schema, defs, text, 0, root)


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    name = ref.rsplit("/", 1)[-1]
    target = defs.get(name, {})
    return {**target, **{key: value for key, value in node.items() if key != "$ref"}}


def _fill(node: Any, defs: Mapping[str, Any], text: str, depth: int, path: frozenset[str] = frozenset()) -> Any:
    """Fill one schema node; ``path`` holds the ``$ref`` names being expanded (recursion guard)."""
    if not isinstance(node, Mapping):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        path = path | {ref}
    node = _resolve(node, defs)
    if "const" in node:
        return node["const"]
    if "default" in node:
        return node["default"]
    if node.get("enum"):
        return node["enum"][0]
    if depth > _MAX_DEPTH:
        return None
    for combinator in ("anyOf", "oneOf"):
        branches = node.get(combinator)
        if branches:
            nullable = any(isinstance(b, Mapping) and b.get("type") == "null" for b in branches)
            concrete = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if nullable and (not concrete or (isinstance(concrete[0], Mapping) and concrete[0].get("$ref") in path)):
                return None  # an optional self-reference ends the recursion
            return _fill((concrete or branches)[0], defs, text, depth + 1, path)
    if node.get("allOf"):
        merged: dict[str, Any] = {}
        for part in node["allOf"]:
            merged.update(_resolve(part, defs) if isinstance(part, Mapping) else {})
        return _fill(merged, defs, text, depth + 1, path)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in node else "array" if ("items" in node or "prefixItems" in node) else None
    if kind == "object":
        return {name: _fill(sub, defs, text, depth + 1, path) for name, sub in node.get("properties", {}).items()}
    if kind == "array":
        prefix = node.get("prefixItems")
        if prefix:
            return [_fill(sub, defs, text, depth + 1, path) for sub in prefix]
        count = int(node.get("minItems", 0))
        return [_fill(node.get("items", {}), defs, text, depth + 1, path) for _ in range(count)]
    if kind == "string":
        return _fill_string(node, text)
    if kind in ("integer", "number"):
        return _fill_number(node, integer=kind == "integer")
    if kind == "boolean":
        return False
    return None


_FORMATTED = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "duration": "PT0S",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "offline@example.com",
    "uri": "https://example.com/",
}


def _fill_string(node: Mapping[str, Any], text: str) -> str:
    value = _FORMATTED.get(node.get("format", ""), text)
    max_length = node.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        value = value[:max_length]
    min_length = node.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        value += "x" * (min_length - len(value))
    return value


def _fill_number(node: Mapping[str, Any], *, integer: bool) -> int | float:
    low = node.get("minimum")
    low_open = node.get("exclusiveMinimum")
    high = node.get("maximum")
    high_open = node.get("exclusiveMaximum")
    value: float = 0
    if low is not None and value < low:
        value = low
    if low_open is not None and value <= low_open:
        if integer:
            value = math.floor(low_open) + 1
        else:
            ceiling = min(x for x in (high, high_open, low_open + 2) if x is not None)
            value = (low_open + ceiling) / 2
    if high is not None and value > high:
        value = high
    if high_open is not None and value >= high_open:
        value = math.ceil(high_open) - 1 if integer else high_open - 1
    return int(value) if integer else float(value)
