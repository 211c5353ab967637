"""The LLM layer's errors (defined in :mod:`memlab.exceptions`, re-exported here) and message previews."""

from __future__ import annotations

from memlab.exceptions import LLMError, StructuredOutputError

__all__ = ["LLMError", "StructuredOutputError"]

#: how much of a raw model output an error message quotes
RAW_TEXT_PREVIEW_CHARS = 500


def preview(text: str, limit: int = RAW_TEXT_PREVIEW_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more chars]"
