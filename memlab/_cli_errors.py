"""The ``memlab`` command's own error: raised only while reading command-line arguments
(:mod:`memlab.cli`, :mod:`memlab._cli_env` and the argument parsing of
:mod:`memlab.bench`), never by the library.

Still a :class:`~memlab.exceptions.ValidationError`, drawn apart from the core tree::

    MemlabError
    └── ValidationError(ValueError)
        └── UsageError                       a command-line argument is wrong (the CLI exits with 2)
"""

from __future__ import annotations

from memlab.exceptions import ValidationError

__all__ = ["UsageError"]


class UsageError(ValidationError):
    """A command-line argument is wrong: the ``memlab`` command exits with status 2."""
