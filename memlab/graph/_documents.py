"""Turning ``remember()`` input into :class:`Document` objects.

Accepted input (:func:`load_documents`):

* a ``str``: inline text, one document named ``text_<first 8 hex of its hash>``;
  a ``str`` starting with ``file://`` is a file path instead (``file:///abs/x.md``,
  ``file://rel/x.md`` relative to the working directory, percent-escapes decoded);
* a :class:`pathlib.Path` to a file: one document named after the file (``notes.md``);
* a ``Path`` to a directory: every supported file under it, **recursively**, in
  sorted path order, named by their path relative to the directory (``sub/notes.md``);
  hidden files and directories (a part starting with ``.``) and files with other
  extensions are skipped; a directory without a supported file is an error;
* a list or tuple of the above (not nested), in order.

Supported files are UTF-8 (a BOM is tolerated): ``.txt``, ``.md`` (kept as is),
``.json`` (flattened to ``key.sub: value`` lines, list items as ``key[0]``; arrays
and objects nested at most :data:`MAX_JSON_DEPTH` = 100 levels deep) and ``.csv``
(comma-separated with a header row; one ``col: value; col: value`` line per row,
empty cells left out). Extensions match case-insensitively.

Every document's ``text`` is normalised: BOM dropped, ``\\r\\n``/``\\r`` turned into
``\\n``, leading and trailing whitespace stripped; ``content_hash`` is the SHA-256
of that text. ``size_bytes`` is the size of the raw input (the file on disk, or
the UTF-8 encoding of an inline string), and ``max_bytes`` applies to it for both.

Loading is all-or-nothing: the first bad item raises
:class:`~memlab.exceptions.ValidationError` naming it and the reason, and no
document is returned.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from memlab.exceptions import ValidationError

__all__ = ["MAX_DOCUMENT_BYTES", "MAX_JSON_DEPTH", "SUPPORTED_EXTENSIONS", "Document", "load_documents"]

MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
#: deepest nesting of arrays/objects a ``.json`` document may have
MAX_JSON_DEPTH = 100
SUPPORTED_EXTENSIONS = ("csv", "json", "md", "txt")
FILE_URL_PREFIX = "file://"
INLINE_EXTENSION = "txt"

_PREVIEW_CHARS = 40
_WINDOWS_DRIVE = re.compile(r"^/[A-Za-z]:[/\\]")


@dataclass(frozen=True)
class Document:
    """One input document: normalised ``text`` plus where it came from.

    ``source`` is the absolute path of the file, None for inline text;
    ``extension`` is the lowercase file extension without the dot (``"txt"`` for
    inline text).
    """

    name: str
    text: str
    source: str | None
    extension: str
    content_hash: str
    size_bytes: int


def load_documents(data: Any, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> list[Document]:
    """The documents in ``data`` (see the module docstring), in input order.

    Raises :class:`~memlab.exceptions.ValidationError` for an empty list, an item
    that is not a ``str`` or ``Path``, empty or whitespace-only text, a missing
    path, an unsupported extension, binary content (NUL bytes, invalid UTF-8), a
    file or text above ``max_bytes`` (files are checked with ``stat`` before
    reading), and JSON or CSV that does not parse.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValidationError(f"max_bytes must be a positive int, got {max_bytes!r}")
    if isinstance(data, (list, tuple)):
        if not data:
            raise ValidationError(f"remember() got an empty {type(data).__name__}; pass text, a path, or a list of them")
        items = list(data)
    else:
        items = [data]
    documents: list[Document] = []
    for item in items:
        documents.extend(_load_item(item, max_bytes))
    return documents


def _load_item(item: Any, max_bytes: int) -> Iterator[Document]:
    if isinstance(item, Path):
        yield from _load_path(item, max_bytes)
    elif isinstance(item, str):
        if item.startswith(FILE_URL_PREFIX):
            yield from _load_path(_path_from_url(item), max_bytes)
        else:
            yield _inline_document(item, max_bytes)
    else:
        raise ValidationError(
            f"cannot remember a {type(item).__name__} ({_preview(repr(item))}); pass a str, a pathlib.Path, "
            "a 'file://' path, or a list of them"
        )


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _PREVIEW_CHARS else flat[:_PREVIEW_CHARS] + "…")


def _normalise(text: str) -> str:
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").strip()


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _inline_document(item: str, max_bytes: int) -> Document:
    what = f"text {_preview(item)}"
    if "\x00" in item:
        raise ValidationError(f"{what} contains NUL bytes; binary data cannot be remembered")
    try:
        size = len(item.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{what} is not valid Unicode text ({exc.reason})") from None
    if size > max_bytes:
        raise ValidationError(f"{what} is {size} bytes, above the limit of {max_bytes} bytes")
    text = _normalise(item)
    if not text:
        raise ValidationError(f"{what} is empty or whitespace-only")
    digest = _hash(text)
    return Document(f"text_{digest[:8]}", text, None, INLINE_EXTENSION, digest, size)


def _path_from_url(url: str) -> Path:
    raw = unquote(url[len(FILE_URL_PREFIX) :])
    if raw.startswith("localhost/"):
        raw = raw[len("localhost") :]
    if _WINDOWS_DRIVE.match(raw):
        raw = raw[1:]
    if not raw:
        raise ValidationError(f"{url!r} names no file")
    return Path(raw)


def _load_path(path: Path, max_bytes: int) -> Iterator[Document]:
    try:
        resolved = path.expanduser().resolve()
        is_dir, is_file = resolved.is_dir(), resolved.is_file()
    except (OSError, RuntimeError) as exc:
        raise ValidationError(f"cannot read {str(path)!r}: {exc}") from None
    if is_dir:
        files = [
            candidate
            for candidate in sorted(resolved.rglob("*"))
            if candidate.is_file()
            and _extension(candidate) in SUPPORTED_EXTENSIONS
            and not any(part.startswith(".") for part in candidate.relative_to(resolved).parts)
        ]
        if not files:
            raise ValidationError(f"directory {str(resolved)!r} holds no supported file ({_supported()})")
        for file in files:
            yield _load_file(file, file.relative_to(resolved).as_posix(), max_bytes)
    elif is_file:
        yield _load_file(resolved, resolved.name, max_bytes)
    else:
        raise ValidationError(f"path {str(resolved)!r} does not exist")


def _extension(path: Path) -> str:
    return path.suffix.lower().lstrip(".")


def _supported() -> str:
    return "supported: " + ", ".join(f".{ext}" for ext in SUPPORTED_EXTENSIONS)


def _load_file(path: Path, name: str, max_bytes: int) -> Document:
    where = repr(str(path))
    extension = _extension(path)
    if extension not in SUPPORTED_EXTENSIONS:
        shown = f".{extension}" if extension else "no extension"
        raise ValidationError(f"file {where} has an unsupported extension ({shown}); {_supported()}")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ValidationError(f"file {where} is {size} bytes, above the limit of {max_bytes} bytes")
        raw = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read file {where}: {exc.strerror or exc}") from None
    if b"\x00" in raw:
        raise ValidationError(f"file {where} contains NUL bytes; binary files cannot be remembered")
    try:
        decoded = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"file {where} is not UTF-8 text (invalid byte at offset {exc.start})") from None
    text = _normalise(decoded)
    if extension == "json":
        text = _json_text(text, where)
    elif extension == "csv":
        text = _csv_text(text, where)
    if not text:
        raise ValidationError(f"file {where} is empty or whitespace-only")
    return Document(name, text, str(path), extension, _hash(text), len(raw))


def _json_text(text: str, where: str) -> str:
    too_deep = ValidationError(f"file {where} nests JSON arrays/objects deeper than the limit of {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"file {where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:  # deeper than the interpreter's stack: far above the limit
        raise too_deep from None
    if _json_depth(value) > MAX_JSON_DEPTH:
        raise too_deep
    return "\n".join(_json_lines(value, "")).strip()


def _json_depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _json_scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _json_lines(value: Any, key: str) -> Iterator[str]:
    """``key: value`` lines of a JSON value; nested keys joined by ``.``, list items as ``key[i]``."""
    if isinstance(value, dict) and value:
        for child, item in value.items():
            yield from _json_lines(item, f"{key}.{child}" if key else str(child))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _json_lines(item, f"{key}[{index}]")
    elif key:
        yield f"{key}: {_json_scalar(value)}"
    elif not isinstance(value, (dict, list)):
        yield _json_scalar(value)


def _csv_text(text: str, where: str) -> str:
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    except csv.Error as exc:
        raise ValidationError(f"file {where} is not valid CSV: {exc}") from None
    if len(rows) < 2:
        raise ValidationError(f"file {where} is not valid CSV: it needs a header row and at least one data row")
    header = [cell.strip() or f"column_{index}" for index, cell in enumerate(rows[0], start=1)]
    lines = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) > len(header):
            raise ValidationError(f"file {where} is not valid CSV: row {number} has {len(row)} fields, the header has {len(header)}")
        pairs = [f"{column}: {cell.strip()}" for column, cell in zip(header, row) if cell.strip()]
        if pairs:
            lines.append("; ".join(pairs))
    return "\n".join(lines)
