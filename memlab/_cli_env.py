"""The dotenv file of the ``memlab`` command: ``./.env``, or the file ``--env-file`` names.

The file is parsed by python-dotenv's ``dotenv_values``, the reader pydantic-settings'
own ``env_file`` support calls (python-dotenv is a dependency of pydantic-settings), with
pydantic-settings' precedence: a variable the environment sets to a non-empty value wins
over the file (names compared case-insensitively, as :meth:`StackConfig.from_env` reads
them), and empty values count as unset. The variables the file adds are put in
``os.environ`` for the command's run, not only handed to ``StackConfig.from_env``: so
everything the command reaches reads them, the settings read from ``os.environ``
directly (``DB_*``, ``MEMLAB_TEST_REDIS_URL``, ``MEMLAB_OFFLINE_LATENCY_MS``, ...) and the
processes it starts (the workers of ``memlab serve --workers N``, the server of ``memlab
bench serve``). When the run ends they are removed again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memlab._cli_errors import UsageError
from memlab.exceptions import ConfigError

#: the file read when ``--env-file`` is not given (absent is fine), relative to the working directory
DEFAULT_ENV_FILE = Path(".env")


def _variables(path: Path) -> dict[str, str]:
    """The non-empty variables of the dotenv file ``path``."""
    from dotenv import dotenv_values

    try:
        values = dotenv_values(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the env file {path}: {exc}") from None
    return {name: value for name, value in values.items() if value}


@contextmanager
def env_file_applied(path: Path | None) -> Iterator[dict[str, str]]:
    """Set the variables of the dotenv file ``path`` that the environment leaves unset, for the block.

    ``path`` None reads :data:`DEFAULT_ENV_FILE` when it is a file. A ``path`` given that
    is not a file raises :class:`UsageError`; one that cannot be read or decoded,
    :class:`ConfigError`. Yields the variables set; on exit each gets its former state
    back (unset, or empty) unless something changed its value meanwhile.
    """
    if path is not None and not path.is_file():
        raise UsageError(f"--env-file {path}: {'not a file' if path.exists() else 'no such file'}")
    chosen = path if path is not None else DEFAULT_ENV_FILE
    found = _variables(chosen) if chosen.is_file() else {}
    present = {name.upper() for name, value in os.environ.items() if value}
    added = {name: value for name, value in found.items() if name.upper() not in present}
    before = {name: os.environ.get(name) for name in added}  # None, or an empty value
    os.environ.update(added)
    try:
        yield added
    finally:
        for name, value in added.items():
            former = before[name]
            if os.environ.get(name) != value:
                continue
            if former is None:
                del os.environ[name]
            else:
                os.environ[name] = former
