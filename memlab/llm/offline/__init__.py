"""``memlab/offline``: a deterministic litellm custom provider (no network, no randomness).

memlab registers it in ``litellm.custom_provider_map`` as provider ``"memlab"``
the first time an :class:`~memlab.llm.LLMClient` is used, so offline calls take
the same ``litellm.acompletion`` path as real providers. Only :mod:`memlab.llm`
imports this package; features reach it through ``client.handlers``.

Modules: :mod:`._parsing` (the prompt convention, the extractive answer),
:mod:`._schema` (the generic schema filler), :mod:`._respond` (one call's
output), :mod:`._provider` (the litellm provider, latency, registration).

Prompt convention
-----------------
In system and user messages, a line starting with ``Context:`` opens a context
block and a line starting with ``Question:`` opens a question block; a block
runs until the next marker or the end of the message (markers are
case-insensitive, text after the colon on the marker line belongs to the
block)::

    Context:
    Alice lives in Paris. Bob works at Acme.
    Question: Where does Alice live?

The question is the last question block of the user messages; without one, the
text of the last user message outside its context blocks. The context is every
context block of the system and user messages, in order.
:func:`~memlab.llm.context_prompt` builds such messages.

Answers
-------
* Plain completion: the context sentence with the most content words in common
  with the question (stop words dropped, a plural ``s`` folded); ties go to the
  denser sentence (more shared words per word), then to the earlier one. No
  shared word, no context or no question: ``"I don't know."``.
* Structured output (``response_format`` a pydantic model, a ``json_schema``
  response format or ``json_object``): the handler the calling client's
  :class:`~memlab.llm.StructuredHandlers` holds for the schema's name (the
  per-call litellm kwarg ``memlab_offline_handlers``, which
  :class:`~memlab.llm.LLMClient` sets to ``client.handlers``), else a generic
  filler that produces valid JSON for any schema: the schema's default where it
  has one; strings get the extractive answer (``""`` when it is "I don't
  know."); numbers 0 moved into ``minimum``/``maximum``; booleans false; arrays
  ``minItems`` items (usually none); nested objects recursed; enums and
  literals their first value; optional (``anyOf`` with null) their first
  non-null branch, or null where that branch would recurse into a model being
  filled. ``json_object`` without a schema gives ``{"answer": ...}``.
* Usage: ``prompt_tokens = estimate_tokens(prompt_text(messages))``,
  ``completion_tokens = estimate_tokens(output)``.
* Latency: each call sleeps ``memlab_offline_latency_ms`` (a per-call litellm
  kwarg, which :class:`~memlab.llm.LLMClient` sets) or else
  ``MEMLAB_OFFLINE_LATENCY_MS`` (default 0) milliseconds, ``asyncio.sleep`` in
  ``acompletion`` and ``time.sleep`` in ``completion``.
"""

from __future__ import annotations

from memlab.llm.offline._parsing import best_sentence, extractive_answer, parse_prompt
from memlab.llm.offline._provider import (
    HANDLERS_PARAM,
    LATENCY_ENV,
    LATENCY_PARAM,
    OFFLINE_MODEL,
    PROVIDER,
    ensure_registered,
    offline_latency_ms,
)
from memlab.llm.offline._respond import respond
from memlab.llm.offline._schema import fill_schema

__all__ = [
    "HANDLERS_PARAM",
    "LATENCY_ENV",
    "LATENCY_PARAM",
    "OFFLINE_MODEL",
    "PROVIDER",
    "best_sentence",
    "ensure_registered",
    "extractive_answer",
    "fill_schema",
    "offline_latency_ms",
    "parse_prompt",
    "respond",
]
