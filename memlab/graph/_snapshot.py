"""Atomic snapshots of one dataset's knowledge graph and vector collections under a directory.

Layout (the caller passes ``{data_root}/graph/{dataset_id}``)::

    CURRENT                  one line: the name of the committed version, e.g. "v000042"
    v000042/graph.json       KnowledgeGraph.to_dict()
    v000042/<name>.faiss     one faiss index per vector collection
    v000042/<name>.ids.json  its ids, labels and settings (VectorIndex.to_state)
    v000042/meta.json        the caller's meta, the store's dim/space, sha256 + size of every file above

Commit protocol of :func:`save_snapshot`: write every file of a new version
directory and fsync it, fsync the directory, then replace ``CURRENT``
atomically (temp file + fsync + ``os.replace`` + fsync of the directory), then
delete the older versions. A crash at any point leaves ``CURRENT`` naming
either the old or the new complete version; version directories ``CURRENT``
does not name are ignored by :func:`load_snapshot` and deleted by the next
save. One writer per directory at a time (the caller serialises saves).

A committed version that is missing a file, or whose file does not match its
recorded checksum or cannot be parsed, raises :class:`~memlab.BackendError`
naming the path: never an empty result.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memlab.exceptions import BackendError, ConfigError, ValidationError
from memlab.graph._graph import KnowledgeGraph
from memlab.graph._vectors import VectorIndex, VectorStore

__all__ = ["delete_snapshot", "load_snapshot", "save_snapshot", "snapshot_files", "snapshot_from_files"]

#: version of the snapshot layout (meta.json ``format``)
SNAPSHOT_FORMAT = 1
POINTER = "CURRENT"
_POINTER_TMP = "CURRENT.tmp"
_VERSION = re.compile(r"v(\d{6,})")
_GRAPH_FILE = "graph.json"
_META_FILE = "meta.json"


def snapshot_files(graph: KnowledgeGraph, vectors: VectorStore, meta: Mapping[str, Any]) -> dict[str, bytes | memoryview]:
    """The files of one snapshot version, by name (``graph.json``, per collection ``.faiss`` and ``.ids.json``, ``meta.json``).

    Bad arguments raise :class:`~memlab.ValidationError`. ``meta.json`` records every other
    file's sha256 and size, so a reader detects damage (:func:`snapshot_from_files`).
    """
    if not isinstance(graph, KnowledgeGraph):
        raise ValidationError(f"graph must be a KnowledgeGraph, got {type(graph).__name__}")
    if not isinstance(vectors, VectorStore):
        raise ValidationError(f"vectors must be a VectorStore, got {type(vectors).__name__}")
    if not isinstance(meta, Mapping):
        raise ValidationError(f"meta must be a mapping, got {type(meta).__name__}")
    try:
        meta_copy = json.loads(json.dumps(meta, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"meta must be JSON-safe: {exc}") from exc

    files: dict[str, bytes | memoryview] = {_GRAPH_FILE: _json_bytes(graph.to_dict(copy=False))}
    for name in vectors.names():
        blob, state = vectors.collection(name).to_state()
        files[f"{name}.faiss"] = blob.data  # == memoryview(blob); numpy types ndarray as a Buffer only on 3.12+
        files[f"{name}.ids.json"] = _json_bytes(state)
    record = {
        "format": SNAPSHOT_FORMAT,
        "meta": meta_copy,
        "vectors": {"dim": vectors.dim, "space": vectors.space, "collections": vectors.names()},
        "files": {name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)} for name, data in files.items()},
    }
    files[_META_FILE] = _json_bytes(record)
    return files


def save_snapshot(directory: str | os.PathLike[str], graph: KnowledgeGraph, vectors: VectorStore, meta: Mapping[str, Any]) -> None:
    """Commit ``graph``, ``vectors`` and the JSON-safe ``meta`` as the new snapshot of ``directory``, atomically.

    Bad arguments raise :class:`~memlab.ValidationError` before anything is
    written; a filesystem failure raises :class:`~memlab.BackendError` and
    leaves the previous snapshot loadable.
    """
    files = snapshot_files(graph, vectors, meta)
    root = Path(directory)
    try:
        root.mkdir(parents=True, exist_ok=True)
        current = _read_pointer(root)
        numbers = [0]
        for entry in root.iterdir():  # stray versions from failed saves go first
            match = _VERSION.fullmatch(entry.name)
            if match:
                numbers.append(int(match.group(1)))
            if (match and entry.name != current) or entry.name == _POINTER_TMP:
                _remove(entry)
        version = f"v{max(numbers) + 1:06d}"
        target = root / version
        target.mkdir()
        for name, data in files.items():
            _write_durably(target / name, data)
        _fsync_dir(target)
        _fsync_dir(root)
        _write_durably(root / _POINTER_TMP, f"{version}\n".encode())
        os.replace(root / _POINTER_TMP, root / POINTER)
        _fsync_dir(root)
    except OSError as exc:
        raise BackendError(f"could not save the graph snapshot under {root}: {exc}") from exc
    if current is not None:  # committed: an old version that survives a failure here is removed by the next save
        shutil.rmtree(root / current, ignore_errors=True)


def load_snapshot(directory: str | os.PathLike[str], *, space: str | None = None) -> tuple[KnowledgeGraph, VectorStore, dict[str, Any]] | None:
    """``(graph, vectors, meta)`` of the committed snapshot of ``directory``, or None when none was committed.

    ``space``, when given, must be the vector space the snapshot was built in
    (else :class:`~memlab.ConfigError`). Damage to the committed version raises
    :class:`~memlab.BackendError` naming the path.
    """
    root = Path(directory)
    current = _read_pointer(root)
    if current is None:
        return None
    target = root / current

    def read(name: str) -> bytes:
        try:
            return (target / name).read_bytes()
        except OSError as exc:
            raise BackendError(f"graph snapshot file {target / name} is unreadable: {exc}") from exc

    return snapshot_from_files(read, str(target), space=space)


def snapshot_from_files(
    read: Callable[[str], bytes], where: str, *, space: str | None = None
) -> tuple[KnowledgeGraph, VectorStore, dict[str, Any]]:
    """``(graph, vectors, meta)`` from one version's files, each read by name with ``read(name)``.

    ``where`` names the version in errors (a directory, a database row). A file that is
    missing, does not match the sha256 and size ``meta.json`` records, or cannot be
    parsed raises :class:`~memlab.BackendError`; a ``space`` other than the stored one
    raises :class:`~memlab.ConfigError`.
    """
    try:
        record = json.loads(read(_META_FILE))
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise BackendError(f"graph snapshot file {where}/{_META_FILE} is missing or malformed: {exc}") from exc
    try:
        if record.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"format {record.get('format')!r} is not {SNAPSHOT_FORMAT}")
        setup, checksums, meta = record["vectors"], record["files"], record["meta"]
        stored_space, names = setup["space"], list(setup["collections"])
        store = VectorStore(setup["dim"], stored_space)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"graph snapshot metadata {where}/{_META_FILE} is malformed: {exc}") from exc
    if space is not None and stored_space != space:
        raise ConfigError(f"graph snapshot {where} holds vectors of space {stored_space!r}, not {space!r}: re-ingest the data with this embedder")

    def checked(name: str) -> bytes:
        expected = checksums.get(name) if isinstance(checksums, Mapping) else None
        if not isinstance(expected, Mapping):
            raise BackendError(f"graph snapshot metadata {where}/{_META_FILE} does not list {name}")
        data = read(name)
        if len(data) != expected.get("bytes") or hashlib.sha256(data).hexdigest() != expected.get("sha256"):
            raise BackendError(f"graph snapshot file {where}/{name} is corrupt (size or sha256 differs from {_META_FILE})")
        return data

    try:
        graph = KnowledgeGraph.from_dict(json.loads(checked(_GRAPH_FILE)))
    except (ValueError, ValidationError) as exc:
        raise BackendError(f"graph snapshot file {where}/{_GRAPH_FILE} is malformed: {exc}") from exc
    for name in names:
        try:
            state = json.loads(checked(f"{name}.ids.json"))
            store._adopt(name, VectorIndex.from_state(checked(f"{name}.faiss"), state, space=stored_space))
        except (ValueError, ValidationError) as exc:
            raise BackendError(f"graph snapshot collection {name!r} ({where}/{name}.faiss, {where}/{name}.ids.json) is malformed: {exc}") from exc
    return graph, store, meta


def delete_snapshot(directory: str | os.PathLike[str]) -> bool:
    """Delete the snapshot directory; True when it existed. The pointer goes first, so a crash midway leaves no snapshot."""
    root = Path(directory)
    if not root.exists():
        return False
    try:
        (root / POINTER).unlink(missing_ok=True)
        _fsync_dir(root)
        shutil.rmtree(root)
    except OSError as exc:
        raise BackendError(f"could not delete the graph snapshot {root}: {exc}") from exc
    return True


def _read_pointer(root: Path) -> str | None:
    """The committed version name, None when there is no pointer; BackendError when the pointer is damaged."""
    path = root / POINTER
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendError(f"graph snapshot pointer {path} is unreadable: {exc}") from exc
    version = text.strip()
    if not _VERSION.fullmatch(version):
        raise BackendError(f"graph snapshot pointer {path} is corrupt: {text[:40]!r}")
    if not (root / version).is_dir():
        raise BackendError(f"graph snapshot pointer {path} names {version}, which does not exist")
    return version


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _write_durably(path: Path, data: bytes | memoryview) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
