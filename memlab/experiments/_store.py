"""The grid's disk cache: one JSON file per successful cell x seed, keyed by what determines it.

Key: the sha256 of compact sorted-key JSON of ``{"config": config_fingerprint(<the cell's
config>), "workload": {"class", "name", "fingerprint"}, "seed", "schema": SCHEMA_VERSION}``,
where the fingerprint is the config as JSON without ``data_root``; a cell varying strategy
objects adds ``"objects": {<keyword>: {"class", "fingerprint"}}`` (their declared
fingerprints, :mod:`memlab.experiments._strategies`; a cell with an object without one is
not stored at all). A file is written to a
temporary name in the same directory and moved into place with :func:`os.replace`, so a
killed run leaves either the whole result or none (a stray ``.tmp-*`` file at worst,
never read). An unreadable or foreign file reads as a miss and is computed again.

Secrets (the ``SecretStr`` fields ``llm.api_key``, ``embedding.api_key``,
``cache.password``, and the password of any ``scheme://user:password@host`` URL in a
string field) enter the key as ``hmac-sha256:<hex>``, the HMAC-SHA256 of the value under
a local secret, never as the value itself. So two API keys (two accounts) or two
passwords (two servers) are two cells with two cache keys, the same secret gives the
same cache key on every run against the same cache directory, and nothing in the cache
lets anyone test a guessed key or password without the local secret. (Schema 1 dropped
secrets from the key instead: configs differing only in a secret shared one result, and
a grid could not compare them.) The local secret is 32 random bytes, hex-encoded, in
``<cache_dir>/secret.key`` (:data:`SECRET_FILE`), created with mode 0600 when a grid
with a secret first needs it; deleting it turns every result keyed with a secret into a
miss. A grid without ``cache_dir`` uses a random secret of its own (its keys then hold
within that grid only). A config without secrets needs no local secret. Secrets never
reach a cache file: the readable notes beside a result show them masked.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr

from memlab.exceptions import ConfigError, ValidationError
from memlab.experiments._workload import Workload, WorkloadResult
from memlab.privacy import replace_url_passwords, url_passwords

if TYPE_CHECKING:
    from memlab.config import StackConfig

__all__ = [
    "SCHEMA_VERSION",
    "SECRET_FILE",
    "ResultStore",
    "cache_key",
    "canonical_json",
    "config_data",
    "config_fingerprint",
    "local_secret",
    "secret_values",
    "workload_identity",
]

#: bump when the stored result format or the meaning of a key changes: older files stop matching
SCHEMA_VERSION = 2
#: the local secret's file name inside a cache directory
SECRET_FILE = "secret.key"
_SECRET_BYTES = 32


def _secret_fields(model: BaseModel, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], str]:
    """``path -> value`` of the set ``SecretStr`` fields of ``model``, sections recursed into."""
    found: dict[tuple[str, ...], str] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, SecretStr):
            found[(*prefix, name)] = value.get_secret_value()
        elif isinstance(value, BaseModel):
            found.update(_secret_fields(value, (*prefix, name)))
    return found


def _strings(data: Any, replace: Callable[[str], str]) -> Any:
    """JSON ``data`` with ``replace`` applied to every string in it."""
    if isinstance(data, dict):
        return {key: _strings(value, replace) for key, value in data.items()}
    if isinstance(data, list):
        return [_strings(value, replace) for value in data]
    return replace(data) if isinstance(data, str) else data


def config_data(config: "StackConfig", secret: Callable[[str], str]) -> dict[str, Any]:
    """The config as JSON data without ``data_root``, every secret (module docstring) written as ``secret(value)``."""
    data = config.model_dump(mode="json", exclude={"data_root"})
    data = _strings(data, lambda text: replace_url_passwords(text, {password: secret(password) for password in url_passwords(text)}))
    for path, value in _secret_fields(config).items():
        holder = data
        for name in path[:-1]:
            holder = holder[name]
        holder[path[-1]] = secret(value)
    return data


def secret_values(config: "StackConfig") -> list[str]:
    """The secrets of ``config`` in clear (module docstring), each once, in field order; ``[]`` for none."""
    found: list[str] = []

    def note(value: str) -> str:
        found.append(value)
        return value

    config_data(config, note)
    return list(dict.fromkeys(found))


def config_fingerprint(config: "StackConfig", secret: bytes | None = None) -> dict[str, Any]:
    """The config as JSON data without ``data_root``, each secret as its HMAC under ``secret`` (module docstring).

    Raises :class:`~memlab.exceptions.ValidationError` for a config holding secrets when
    ``secret`` is None.
    """
    if secret is None:
        if secret_values(config):
            raise ValidationError("the config holds secrets (API keys or passwords): its fingerprint needs the local secret "
                                  "that keys their HMACs (memlab.experiments._store.local_secret(cache_dir))")
        return config_data(config, str)  # nothing to replace
    key = secret
    return config_data(config, lambda value: "hmac-sha256:" + hmac.new(key, value.encode("utf-8"), hashlib.sha256).hexdigest())


def local_secret(directory: str | os.PathLike[str]) -> bytes:
    """The local secret of the cache ``directory`` (its :data:`SECRET_FILE`), created (mode 0600) when missing.

    Two processes creating it at once agree on one: it is written to a temporary file
    and linked into place only if no other is there. Raises
    :class:`~memlab.exceptions.ConfigError` naming the file when it holds no secret.
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / SECRET_FILE
    if not target.exists():
        handle, temp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".key")  # mode 0600
        try:
            with os.fdopen(handle, "w", encoding="ascii") as out:
                out.write(secrets.token_hex(_SECRET_BYTES) + "\n")
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(temp, target)  # fails if another process made one first: that one is used
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                if not target.exists():
                    os.replace(temp, target)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    text = target.read_text(encoding="ascii", errors="replace").strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != _SECRET_BYTES:
        raise ConfigError(f"{target} is not a grid cache secret ({_SECRET_BYTES} bytes as hex); delete it to start "
                          "afresh (the results keyed with secrets are then computed again)")
    return secret


def workload_identity(workload: Workload) -> dict[str, Any]:
    """What names a workload in a key: its class path, ``name`` and :meth:`~Workload.fingerprint`."""
    cls = type(workload)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "name": workload.name, "fingerprint": workload.fingerprint()}


def canonical_json(data: Any) -> str:
    """Compact sorted-key JSON of ``data`` (NaN refused): the text a key or an id hashes."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def cache_key(
    config: "StackConfig", workload: Workload, seed: int, secret: bytes | None = None, objects: dict[str, Any] | None = None
) -> str:
    """The sha256 hex digest naming one cell x seed's result (module docstring).

    ``secret``: the local secret (:func:`local_secret`); needed when ``config`` holds
    secrets, else :class:`~memlab.exceptions.ValidationError`. ``objects``: keyword ->
    the identity (class and fingerprint) of each strategy object of the cell.
    """
    material: dict[str, Any] = {"config": config_fingerprint(config, secret), "workload": workload_identity(workload), "seed": seed,
                                "schema": SCHEMA_VERSION}
    if objects:
        material["objects"] = objects
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

