"""SPEC §8: the token estimate and the pricing table (longest prefix on the lowercased model key)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlab.llm import PRICING_PER_M_TOKENS, cost_usd, estimate_tokens
from memlab.llm._pricing import model_key, price_per_m_tokens


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


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("OpenAI/GPT-4o-Mini-2024-07-18", "gpt-4o-mini-2024-07-18"),
        ("azure/deployments/gpt-4o", "gpt-4o"),
        ("gpt-4o", "gpt-4o"),
        ("memlab/offline", "offline"),
        ("", ""),
        (None, ""),
    ],
)
def test_model_key_is_the_lowercased_part_after_the_last_slash(model, key) -> None:
    assert model_key(model) == key


@pytest.mark.parametrize(
    ("model", "prices"),
    [
        ("gpt-4o-mini", (0.15, 0.60)),
        ("gpt-4o-mini-2024-07-18", (0.15, 0.60)),
        ("openai/gpt-4o-mini-2024-07-18", (0.15, 0.60)),
        ("gpt-4o", (2.50, 10.00)),
        ("gpt-4o-2024-08-06", (2.50, 10.00)),
        ("gpt-4.1-mini", (0.40, 1.60)),
        ("gpt-4.1-mini-2025-04-14", (0.40, 1.60)),
        ("gpt-4.1", (2.00, 8.00)),
        ("o1-mini", (1.10, 4.40)),
        ("o1", (15.00, 60.00)),
        ("anthropic/claude-3-5-sonnet-20241022", (3.00, 15.00)),
        ("anthropic/claude-3-5-haiku-20241022", (0.80, 4.00)),
        ("memlab/offline", (0.0, 0.0)),
    ],
)
def test_longest_prefix_wins(model, prices) -> None:
    assert price_per_m_tokens(model) == prices


def test_required_entries_are_in_the_table() -> None:
    assert PRICING_PER_M_TOKENS["gpt-4o-mini"] == (0.15, 0.60)
    assert PRICING_PER_M_TOKENS["gpt-4o"] == (2.50, 10.00)
    for key in ("gpt-4.1-mini", "claude-3-5-sonnet", "claude-3-5-haiku", "offline"):
        assert key in PRICING_PER_M_TOKENS
    assert all(k == k.lower() and "/" not in k for k in PRICING_PER_M_TOKENS)


def test_cost_formula() -> None:
    assert cost_usd("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert cost_usd("openai/gpt-4o-mini-2024-07-18", 1000, 500) == pytest.approx(1000 / 1e6 * 0.15 + 500 / 1e6 * 0.60)
    assert cost_usd("gpt-4o", 2_000, 0) == pytest.approx(0.005)
    assert cost_usd("memlab/offline", 10_000, 10_000) == 0.0


@pytest.mark.parametrize("model", ["my-own-model", "ollama/llama3.1", "", None, "gpt"])
def test_unknown_model_costs_nothing(model) -> None:
    assert cost_usd(model, 123_456, 654_321) == 0.0


def test_cost_with_a_custom_table() -> None:
    table = {"llama3": (1.0, 2.0), "llama3.1": (3.0, 4.0)}
    assert cost_usd("ollama/Llama3.1-8b", 1_000_000, 1_000_000, pricing=table) == pytest.approx(7.0)
    assert cost_usd("ollama/llama3-70b", 1_000_000, 0, pricing=table) == pytest.approx(1.0)
    assert cost_usd("gpt-4o-mini", 1_000_000, 0, pricing=table) == 0.0
