"""Privacy helpers (SPEC §9.7): :func:`scrub_error_message` for error text that gets stored,
:func:`mask_url_passwords` for text that may hold a database or server URL
(:func:`url_passwords` and :func:`replace_url_passwords` for other replacements).

A research primitive (``from memlab.privacy import scrub_error_message``); the
module imports only :mod:`re`.
"""

from __future__ import annotations

import re

__all__ = ["MAX_INPUT_CHARS", "MAX_OUTPUT_CHARS", "mask_url_passwords", "replace_url_passwords", "scrub_error_message", "url_passwords"]

_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)([^@\s]*)@")


def url_passwords(text: str) -> list[str]:
    """The password of every ``scheme://user:password@host`` URL in ``text``, in order."""
    return [match[2] for match in _URL_PASSWORD.finditer(text)]


def replace_url_passwords(text: str, replacements: dict[str, str]) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` URL in it replaced: by its entry in
    ``replacements``, else by ``***``."""
    return _URL_PASSWORD.sub(lambda match: f"{match[1]}{replacements.get(match[2], '***')}@", text)


def mask_url_passwords(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` URL in it shown as ``***``."""
    return replace_url_passwords(text, {})

#: only this many leading characters of a message are scrubbed; the rest is dropped
MAX_INPUT_CHARS = 2048
#: a scrubbed message longer than this is cut to ``MAX_OUTPUT_CHARS - 1`` characters plus "…"
MAX_OUTPUT_CHARS = 512

_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9])"

# Applied in this order; each pattern sees the output of the previous ones.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"), "[email]"),
    (re.compile(_NOT_WORD_BEFORE + r"bearer\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE), "[secret]"),
    (re.compile(_NOT_WORD_BEFORE + r"(?:sk|pk|rk|api|key|token|secret)[-_][A-Za-z0-9._\-]{8,}", re.IGNORECASE), "[secret]"),
    (re.compile(r"[0-9A-Fa-f]{32,}"), "[secret]"),
    (re.compile(r"[A-Za-z0-9+/_\-]{40,}={0,2}"), "[secret]"),
    (re.compile(r"((?:/Users|/home)/)[^/\\\s\[\]]+"), r"\1[user]"),
    (re.compile(r"((?i:[A-Z]:\\Users\\))[^/\\\s\[\]]+"), r"\1[user]"),
    (re.compile(r"\d{6,}"), "[number]"),
)


def scrub_error_message(msg: str | None) -> str | None:
    """``msg`` with personal data and secrets replaced, for storing in an error column.

    None or ``""`` gives None. Only the first 2048 characters are kept, then, in
    order: email addresses become ``[email]``; ``Bearer <8+ chars>`` and
    ``sk-``/``pk-``/``rk-``/``api_``/``key-``/``token-``/``secret-`` style tokens
    (``-`` or ``_``, 8+ characters after it, case-insensitive) become ``[secret]``;
    runs of 32+ hex digits and of 40+ base64-ish characters (letters, digits,
    ``+/_-``, trailing ``=``) become ``[secret]``; the user name in ``/Users/<name>``,
    ``/home/<name>`` and ``C:\\Users\\<name>`` becomes ``[user]`` (the prefix is kept:
    ``/home/[user]/app``); runs of 6+ digits become ``[number]``. A result longer
    than 512 characters is cut to its first 511 plus ``"…"``. Scrubbing a scrubbed
    message returns it unchanged.
    """
    if not msg:
        return None
    text = str(msg)[:MAX_INPUT_CHARS]
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[: MAX_OUTPUT_CHARS - 1] + "…"
    return text
