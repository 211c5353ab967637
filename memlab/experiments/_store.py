"""The grid's disk cache: one JSON file per successful cell x seed, keyed by what determines it.

Key: the sha256 of compact sorted-key JSON of ``{"config": <the cell's full config as
JSON, data_root removed, secret fields removed>, "workload": {"class", "name",
"fingerprint"}, "seed", "schema": SCHEMA_VERSION}``. A file is written to a temporary
name in the same directory and moved into place with :func:`os.replace`, so a killed
run leaves either the whole result or none (a stray ``.tmp-*`` file at worst, never
read). An unreadable or foreign file reads as a miss and is computed again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr

from memlab.exceptions import ValidationError
from memlab.experiments._workload import Workload, WorkloadResult

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = ["SCHEMA_VERSION", "ResultStore", "cache_key", "canonical_json", "config_fingerprint", "workload_identity"]

#: bump when the stored result format or the meaning of a key changes: older files stop matching
SCHEMA_VERSION = 1


def _is_secret(annotation: Any) -> bool:
    return annotation is SecretStr or any(_is_secret(arg) for arg in typing.get_args(annotation))


def _without_secrets(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """JSON-mode ``data`` of ``model`` without its secret fields (set or not), sections recursed into."""
    out = {}
    for name, value in data.items():
        field = model.model_fields.get(name)
        annotation = field.annotation if field is not None else None
        if _is_secret(annotation):
            continue
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and isinstance(value, dict):
            value = _without_secrets(annotation, value)
        out[name] = value
    return out


def config_fingerprint(config: "StackConfig") -> dict[str, Any]:
    """The config as JSON data without ``data_root`` and without secret fields (API keys, passwords)."""
    return _without_secrets(type(config), config.model_dump(mode="json", exclude={"data_root"}))


def workload_identity(workload: Workload) -> dict[str, Any]:
    """What names a workload in a key: its class path, ``name`` and :meth:`~Workload.fingerprint`."""
    cls = type(workload)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "name": workload.name, "fingerprint": workload.fingerprint()}


def canonical_json(data: Any) -> str:
    """Compact sorted-key JSON of ``data`` (NaN refused): the text a key or an id hashes."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def cache_key(config: "StackConfig", workload: Workload, seed: int) -> str:
    """The sha256 hex digest naming one cell x seed's result (module docstring)."""
    material = {"config": config_fingerprint(config), "workload": workload_identity(workload), "seed": seed, "schema": SCHEMA_VERSION}
    try:
        text = canonical_json(material)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{type(workload).__name__}.fingerprint() must be JSON-serialisable: {exc}") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResultStore:
    """Results under ``directory`` (created when missing), ``<key>.json`` each."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, key: str) -> WorkloadResult | None:
        """The stored result of ``key``, or None (absent, unreadable, another schema)."""
        try:
            document = json.loads(self.path(key).read_text(encoding="utf-8"))
            if document.get("schema") != SCHEMA_VERSION or document.get("key") != key:
                return None
            return WorkloadResult.from_json(document["result"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save(self, key: str, result: WorkloadResult, about: dict[str, Any]) -> Path:
        """Store ``result`` atomically (temp file + :func:`os.replace`); ``about``: readable context kept beside it."""
        text = json.dumps({"schema": SCHEMA_VERSION, "key": key, "about": about, "result": result.to_json()}, indent=1, default=str)
        target = self.path(key)
        handle, temp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return target

