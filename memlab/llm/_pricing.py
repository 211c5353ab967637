"""Model pricing (SPEC §8): USD per 1M tokens, longest-prefix match on the model key.

The model key is the part of a litellm model string after its last ``/``,
lowercased: ``"openai/gpt-4o-mini-2024-07-18"`` -> ``"gpt-4o-mini-2024-07-18"``,
which the longest matching prefix prices as ``gpt-4o-mini``. An unknown or
missing model costs 0.0.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PRICING_PER_M_TOKENS", "cost_usd", "model_key", "price_per_m_tokens"]

#: model key prefix -> (USD per 1M input tokens, USD per 1M output tokens)
PRICING_PER_M_TOKENS: Mapping[str, tuple[float, float]] = {
    # memlab's own deterministic provider (memlab/offline)
    "offline": (0.0, 0.0),
    # OpenAI
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
    "o1-mini": (1.10, 4.40),
    "o1": (15.00, 60.00),
    "o3-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o4-mini": (1.10, 4.40),
    # Anthropic
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-3-haiku": (0.25, 1.25),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    # Google
    "gemini-1.5-flash": (0.075, 0.30),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-pro": (1.25, 10.00),
}


def model_key(model: str | None) -> str:
    """The pricing key of a model string: the part after the last ``/``, stripped and lowercased."""
    if not model:
        return ""
    return model.rsplit("/", 1)[-1].strip().lower()


def price_per_m_tokens(
    model: str | None, pricing: Mapping[str, tuple[float, float]] | None = None
) -> tuple[float, float] | None:
    """``(input, output)`` USD per 1M tokens of the longest table prefix of ``model_key(model)``, or None."""
    key = model_key(model)
    if not key:
        return None
    table = PRICING_PER_M_TOKENS if pricing is None else pricing
    best: str | None = None
    for prefix in table:
        if key.startswith(prefix.lower()) and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else table[best]


def cost_usd(
    model: str | None,
    tokens_in: int,
    tokens_out: int,
    *,
    pricing: Mapping[str, tuple[float, float]] | None = None,
) -> float:
    """USD cost of a call: ``tokens_in/1e6 * price_in + tokens_out/1e6 * price_out``; unknown model -> 0.0.

    ``pricing`` replaces the built-in :data:`PRICING_PER_M_TOKENS` (same shape), for
    experiments that price models the table does not know.
    """
    prices = price_per_m_tokens(model, pricing)
    if prices is None:
        return 0.0
    price_in, price_out = prices
    return tokens_in / 1e6 * price_in + tokens_out / 1e6 * price_out
