"""SPEC §8: the token estimate; cost from litellm's bundled cost map (unknown models are unpriced, not free)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlab.llm import cost_usd, estimate_tokens, is_priced


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), (None, 0), ("a", 1), ("abc", 1), ("abcd", 1), ("abcdefg", 1), ("abcdefgh", 2), ("x" * 401, 100)],
)
def test_estimate_tokens_table(text, expected) -> None:
    assert estimate_tokens(text) == expected


@given(st.text())
def test_estimate_tokens_is_zero_iff_empty_else_quarter_length_at_least_one(text: str) -> None:
    tokens = estimate_tokens(text)
    assert (tokens == 0) == (text == "")
    if text:
        assert tokens == max(1, len(text) // 4)


def test_estimate_tokens_rejects_non_text() -> None:
    with pytest.raises(TypeError):
        estimate_tokens(b"bytes")  # type: ignore[arg-type]


def _litellm_cost(model: str, tokens_in: int, tokens_out: int, call_type: str = "completion") -> float:
    from memlab.llm import load_litellm

    prompt, completion = load_litellm().cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out, call_type=call_type)
    return prompt + completion


@pytest.mark.parametrize(
    "model", ["gpt-4o-mini", "openai/gpt-4o-mini", "gpt-4o", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"]
)
def test_known_models_cost_what_litellms_cost_map_says(model) -> None:
    assert is_priced(model)
    assert cost_usd(model, 1_000, 500) == pytest.approx(_litellm_cost(model, 1_000, 500))
    assert cost_usd(model, 1_000, 500) > 0


def test_gpt_4o_mini_prices_match_the_published_rates() -> None:
    assert cost_usd("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.15 + 0.60)


def test_embedding_models_are_priced_per_input_token() -> None:
    assert cost_usd("text-embedding-3-small", 1_000_000, 0, kind="embedding") == pytest.approx(_litellm_cost("text-embedding-3-small", 1_000_000, 0, "embedding"))


@pytest.mark.parametrize("model", ["memlab/offline", "my-own-model", "", None, "memlab/minilm"])
def test_unknown_models_are_unpriced_not_free(model) -> None:
    assert not is_priced(model)
    assert cost_usd(model, 123_456, 654_321) is None
