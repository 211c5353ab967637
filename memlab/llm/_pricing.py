"""Cost of a call from litellm's bundled model cost map (thousands of models, read offline).

:func:`cost_usd` asks ``litellm.cost_per_token`` for the model; a model the map does
not know (``memlab/offline`` included) is **unpriced**: the result is None, never a
silent 0.0, and callers keep its tokens in an ``unpriced`` bucket. With
``LITELLM_LOCAL_MODEL_COST_MAP=True`` (memlab's tests, offline machines) the map
bundled with litellm is used and nothing is fetched.
"""

from __future__ import annotations

import functools
from typing import Literal

__all__ = ["cost_usd", "is_priced"]


_Kind = Literal["llm", "embedding"]


def _cost_per_token(model: str, tokens_in: int, tokens_out: int, kind: _Kind) -> tuple[float, float]:
    """litellm's ``(prompt cost, completion cost)``; raises for a model it cannot map to a price."""
    from memlab.llm._litellm import load_litellm

    return load_litellm().cost_per_token(
        model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out, call_type="embedding" if kind == "embedding" else "completion"
    )


@functools.lru_cache(maxsize=1024)
def is_priced(model: str | None, kind: _Kind = "llm") -> bool:
    """Whether litellm's cost map prices ``model`` (cached per model)."""
    if not model:
        return False
    try:
        _cost_per_token(model, 1, 1, kind)
    except Exception:  # litellm raises for a model it cannot map to a price
        return False
    return True


def cost_usd(model: str | None, tokens_in: int, tokens_out: int, *, kind: _Kind = "llm") -> float | None:
    """USD cost of ``tokens_in`` prompt and ``tokens_out`` completion tokens of ``model``; None when it is unpriced."""
    if not model or not is_priced(model, kind):
        return None
    prompt, completion = _cost_per_token(model, tokens_in, tokens_out, kind)
    return float(prompt) + float(completion)
