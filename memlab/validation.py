"""Input checks shared by every public entry point: text that can be stored, ids, counts.

Every check raises :class:`~memlab.exceptions.ValidationError` (or the subclass
the caller passes) naming the argument and its value, before any I/O.

* **Text** (session text, queries, feedback, names) must be a ``str`` that encodes
  as UTF-8: a lone surrogate such as ``"\\ud800"`` is refused, since no store
  (SQLite, PostgreSQL, Redis, files) can hold it.
* **Ids** (``user_id``, ``session_id``, ``qa_id``, context entry ids) must be a
  ``str`` of 1 to :data:`MAX_ID_CHARS` characters, not blank, encodable, and free
  of control characters (``\\x00``-``\\x1f``, ``\\x7f``-``\\x9f``). The same rule holds on
  every backend. A ``uuid.UUID`` is accepted where memlab itself produces one
  (user and dataset ids) and is used as its canonical string.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from memlab.exceptions import ValidationError

__all__ = ["MAX_ID_CHARS", "MAX_NAME_CHARS", "check_id", "check_name", "check_text", "is_encodable"]

#: longest id (characters) any backend stores: the SQL cache's ``String(255)`` columns
MAX_ID_CHARS = 255
#: longest user or dataset name (characters)
MAX_NAME_CHARS = 255

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def is_encodable(text: str) -> bool:
    """True when ``text`` encodes as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _position(text: str) -> int:
    for index, char in enumerate(text):
        if 0xD800 <= ord(char) <= 0xDFFF:
            return index
    return -1  # pragma: no cover - only called on text that failed to encode


def check_text(name: str, value: Any, *, error: type[ValidationError] = ValidationError, optional: bool = False) -> Any:
    """``value`` when it is a UTF-8-encodable str (or None with ``optional``); else ``error`` naming ``name``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise error(f"{name} must be a str, got {type(value).__name__} {value!r}"[:400])
    if not is_encodable(value):
        raise error(f"{name} contains a lone surrogate at index {_position(value)} and cannot be stored as UTF-8")
    return value


def check_id(name: str, value: Any, *, error: type[ValidationError] = ValidationError, allow_uuid: bool = False) -> str:
    """The id as a str, or ``error`` naming ``name``: see the module docstring for the rule."""
    if allow_uuid and isinstance(value, uuid.UUID):
        return str(value)
    if not isinstance(value, str):
        raise error(f"{name} must be a str, got {type(value).__name__} {value!r}"[:400])
    if not value.strip():
        raise error(f"{name} must not be blank, got {value!r}")
    if len(value) > MAX_ID_CHARS:
        raise error(f"{name} is {len(value)} characters long; the limit is {MAX_ID_CHARS}")
    if not is_encodable(value):
        raise error(f"{name} contains a lone surrogate at index {_position(value)} and cannot be stored as UTF-8")
    control = _CONTROL.search(value)
    if control:
        raise error(f"{name} contains the control character {control.group()!r} at index {control.start()}; ids may not")
    return value


def check_name(name: str, value: Any) -> str:
    """A user or dataset name: a non-blank encodable str of at most :data:`MAX_NAME_CHARS` characters after stripping, stripped."""
    check_text(name, value)
    stripped = value.strip()
    if not stripped:
        raise ValidationError(f"{name} must be a non-blank string, got {value!r}")
    if len(stripped) > MAX_NAME_CHARS:
        raise ValidationError(f"{name} is {len(stripped)} characters long; the limit is {MAX_NAME_CHARS}")
    if _CONTROL.search(stripped):
        raise ValidationError(f"{name} may not contain control characters, got {value!r}"[:400])
    return stripped


def check_flag(name: str, value: Any) -> bool:
    """``value`` when it is a bool; else ``ValidationError`` naming it (``1``, ``"yes"`` and None are refused)."""
    if not isinstance(value, bool):
        raise ValidationError(f"{name} must be True or False, got {value!r}")
    return value
