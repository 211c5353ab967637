"""The LLM layer: every memlab LLM call goes through litellm.

``LLM_MODEL`` picks the model (a litellm model string, default ``memlab/offline``:
memlab's deterministic, network-free provider), ``LLM_API_KEY`` its key. A real
provider is a config change, not a code change::

    from memlab.llm import LLMClient
    client = LLMClient()                                           # memlab/offline
    client = LLMClient("openai/gpt-4o-mini", api_key="sk-...")     # the same litellm.acompletion call
    result = await client.complete("Context:\\nAlice lives in Paris.\\nQuestion: Where does Alice live?")
    result.text, result.tokens_in, result.tokens_out, result.exact_usage, result.cost_usd

Research primitives: :func:`estimate_tokens` (SPEC §8) and :func:`cost_usd`.
:func:`register_structured_handler` plugs task-specific deterministic fillers
into the offline provider's structured output. ``import memlab.llm`` does not
import litellm; the first call does.
"""

from __future__ import annotations

from memlab.llm._client import LLMClient, LLMResult
from memlab.llm._errors import LLMError, StructuredOutputError
from memlab.llm._litellm import load_litellm
from memlab.llm._offline import (
    OFFLINE_MODEL,
    OfflineRequest,
    context_prompt,
    register_structured_handler,
    unregister_structured_handler,
)
from memlab.llm._pricing import PRICING_PER_M_TOKENS, cost_usd
from memlab.llm._tokens import estimate_tokens
from memlab.text import I_DONT_KNOW

__all__ = [
    "I_DONT_KNOW",
    "LLMClient",
    "LLMError",
    "LLMResult",
    "OFFLINE_MODEL",
    "OfflineRequest",
    "PRICING_PER_M_TOKENS",
    "StructuredOutputError",
    "context_prompt",
    "cost_usd",
    "estimate_tokens",
    "load_litellm",
    "register_structured_handler",
    "unregister_structured_handler",
]
