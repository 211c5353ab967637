"""Chat-message helpers the client, the features and the offline provider share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlab.text import message_text

__all__ = ["context_prompt", "prompt_text"]


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Every message's text joined by newlines: what usage is estimated from when a provider reports none."""
    return "\n".join(message_text(message) for message in messages)


def context_prompt(question: str, context: str | Sequence[str], *, instructions: str | None = None) -> list[dict[str, str]]:
    """Chat messages in the offline provider's convention (:mod:`memlab.llm.offline`): optional system
    ``instructions``, then one user message with a ``Context:`` block (a sequence is joined one item
    per line) and a ``Question:`` line.

    Real providers read the same messages as an ordinary grounded prompt.
    """
    body = context if isinstance(context, str) else "\n".join(context)
    messages = [{"role": "system", "content": instructions}] if instructions else []
    messages.append({"role": "user", "content": f"Context:\n{body}\nQuestion: {question}"})
    return messages
