"""Errors of the LLM layer (to be folded into :mod:`memlab.exceptions`)::

    MemlabError
    ├── ValidationError(ValueError)
    │   └── StructuredOutputError         the model's output does not fill the requested response_model
    └── LLMError(RuntimeError)            litellm or the provider failed; the original error is __cause__
"""

from __future__ import annotations

from memlab.exceptions import MemlabError, ValidationError

__all__ = ["LLMError", "StructuredOutputError"]

#: how much of a raw model output an error message quotes
RAW_TEXT_PREVIEW_CHARS = 500


class LLMError(MemlabError, RuntimeError):
    """An LLM call failed in litellm or at the provider. The original error is chained as ``__cause__``.

    ``model`` is the litellm model string of the call; ``provider_error`` the class
    name of the original exception (``"RateLimitError"``, ``"AuthenticationError"``, ...).
    The message never contains the API key.
    """

    def __init__(self, message: str, *, model: str | None = None, provider_error: str | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.provider_error = provider_error


class StructuredOutputError(ValidationError):
    """The model's output could not be validated as the requested ``response_model``.

    ``raw_text`` holds the full output (the message quotes at most
    :data:`RAW_TEXT_PREVIEW_CHARS` characters of it); ``response_model`` is the
    pydantic class; the pydantic or JSON error is chained as ``__cause__``.
    """

    def __init__(self, message: str, *, raw_text: str, response_model: type | None = None, model: str | None = None) -> None:
        super().__init__(message)
        self.raw_text = raw_text
        self.response_model = response_model
        self.model = model


def preview(text: str, limit: int = RAW_TEXT_PREVIEW_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more chars]"
