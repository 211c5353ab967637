"""The token estimate (SPEC §8): ``0`` for empty text, else ``max(1, len(text) // 4)``."""

from __future__ import annotations

__all__ = ["estimate_tokens"]


def estimate_tokens(text: str | None) -> int:
    """Estimated token count of ``text``: 0 when empty or None, else ``max(1, len(text) // 4)``.

    Never 0 for non-empty text (a one-character message still costs a token).
    Exact provider counts override this estimate wherever a provider reports them.
    """
    if not text:
        return 0
    if not isinstance(text, str):
        raise TypeError(f"estimate_tokens expects str or None, got {type(text).__name__}")
    return max(1, len(text) // 4)
