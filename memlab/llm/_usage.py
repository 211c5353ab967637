"""Per-call usage, and the meter that collects it for one session-scoped operation.

Every LLM call (:meth:`memlab.llm.LLMClient.complete`) and every embedding call
(:meth:`memlab.embeddings.Embedder.embed`) reports a :class:`CallUsage` to the
meter of the running context, if any: ``with metering() as meter: ...`` collects
what the code inside does, including asyncio tasks it starts (context variables
are copied into new tasks). Outside a meter nothing is collected, and the cost is
one context-variable read per call.

Token figures, best first (``usage_source``):

* ``provider``: the counts the provider reported (``memlab/offline`` reports its own);
* ``tokenizer``: litellm's offline ``token_counter`` for the model;
* ``estimate``: ``max(1, len(text) // 4)`` (:func:`memlab.llm.estimate_tokens`), only
  when neither applies.

Cost comes from litellm's cost map (:func:`memlab.llm.cost_usd`); None means unpriced.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CallUsage", "UsageMeter", "metering", "metering_active", "record_usage"]

UsageSource = Literal["provider", "tokenizer", "estimate"]


@dataclass(frozen=True)
class CallUsage:
    """One model call: ``kind`` ``llm`` | ``embedding``; ``cost_usd`` None when the model is unpriced; ``error`` for a failed call."""

    model: str
    kind: Literal["llm", "embedding"]
    tokens_in: int
    tokens_out: int
    source: UsageSource
    cost_usd: float | None
    error: bool = False


@dataclass
class UsageMeter:
    """The calls reported while this meter was active, in order."""

    calls: list[CallUsage] = field(default_factory=list)


_current: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar("memlab_usage_meter", default=None)


@contextmanager
def metering() -> Iterator[UsageMeter]:
    """Collect the calls made inside the block (and in tasks it starts) into a fresh :class:`UsageMeter`."""
    meter = UsageMeter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def record_usage(call: CallUsage) -> None:
    """Report one call to the active meter (nothing happens outside a meter)."""
    meter = _current.get()
    if meter is not None:
        meter.calls.append(call)


def metering_active() -> bool:
    """Whether a meter collects calls here (lets a caller skip counting and pricing when none does)."""
    return _current.get() is not None
