"""The LLM layer: every memlab LLM call goes through litellm.

``LLM_MODEL`` picks the model (a litellm model string, default ``memlab/offline``:
memlab's deterministic, network-free provider, :mod:`memlab.llm.offline`),
``LLM_API_KEY`` its key. A real provider is a config change, not a code change::

    from memlab.llm import LLMClient
    client = LLMClient()                                           # memlab/offline
    client = LLMClient("openai/gpt-4o-mini", api_key="sk-...")     # the same litellm.acompletion call
    result = await client.complete("Context:\\nAlice lives in Paris.\\nQuestion: Where does Alice live?")
    result.text, result.tokens_in, result.tokens_out, result.usage_source, result.cost_usd  # cost None: unpriced

Research primitives: :func:`estimate_tokens` (SPEC §8) and :func:`cost_usd` (litellm's
cost map; None for an unpriced model). Usage metering: ``with metering() as meter:``
collects a :class:`CallUsage` per LLM and embedding call made inside (see
:mod:`memlab.llm._usage`).
``import memlab.llm`` does not import litellm; the first call does.

Extension point: structured-output handlers
-------------------------------------------
``client.handlers`` (a :class:`StructuredHandlers`, one per client) plugs
task-specific deterministic fillers into that client's ``memlab/offline``
structured calls; real providers ignore it, and no other client sees it::

    previous = client.handlers.register("MyModel", fn)        # fn(OfflineRequest) -> dict | list | model | str
    client.handlers.register("MyModel", fn, replace=False)    # only if none is there; returns the kept one
    client.handlers.lookup("MyModel")                         # the handler, or None
    client.handlers.unregister("MyModel")                     # returns the removed handler

The name is the schema name (a pydantic ``response_model``'s class name).
memlab's own features register their defaults with ``replace=False`` on the
client they are given (the stack's ``stack.llm``), so a handler a researcher
registered first is kept. Nothing outside this package imports
:mod:`memlab.llm.offline`.
"""

from __future__ import annotations

from memlab.llm._client import LLMClient, LLMResult
from memlab.llm._errors import LLMError, StructuredOutputError
from memlab.llm._litellm import load_litellm
from memlab.llm._pricing import cost_usd, is_priced
from memlab.llm._prompt import context_prompt
from memlab.llm._structured import OfflineRequest, StructuredHandler, StructuredHandlers
from memlab.llm._tokens import estimate_tokens
from memlab.llm._usage import CallUsage, UsageMeter, metering, metering_active, record_usage
from memlab.llm.offline import OFFLINE_MODEL
from memlab.text import I_DONT_KNOW

__all__ = [
    "CallUsage",
    "I_DONT_KNOW",
    "LLMClient",
    "LLMError",
    "LLMResult",
    "OFFLINE_MODEL",
    "OfflineRequest",
    "StructuredHandler",
    "StructuredHandlers",
    "StructuredOutputError",
    "UsageMeter",
    "context_prompt",
    "cost_usd",
    "estimate_tokens",
    "is_priced",
    "load_litellm",
    "metering",
    "metering_active",
    "record_usage",
]
