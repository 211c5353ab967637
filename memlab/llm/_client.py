"""``LLMClient``: every memlab LLM call, through ``litellm.acompletion``.

The model is a litellm model string. The default ``memlab/offline`` is memlab's
deterministic provider (:mod:`memlab.llm.offline`); a real provider is a
config change, not a code change::

    LLMClient()                                                   # memlab/offline, no network
    LLMClient("openai/gpt-4o-mini", api_key=os.environ["LLM_API_KEY"])
    LLMClient("anthropic/claude-3-5-haiku-20241022", api_key=..., temperature=0)
    LLMClient("ollama/llama3.1", api_base="http://localhost:11434")

Extra keyword arguments (``temperature``, ``api_base``, ``timeout``,
``num_retries``, litellm's own test hook ``mock_response``, ...) go to every
``litellm.acompletion`` call; per-call keywords of :meth:`LLMClient.complete`
override them.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pydantic
from pydantic import BaseModel

from memlab.exceptions import ValidationError
from memlab.llm._errors import LLMError, StructuredOutputError, preview
from memlab.llm._pricing import cost_usd
from memlab.llm._prompt import prompt_text
from memlab.llm._structured import StructuredHandlers
from memlab.llm._tokens import estimate_tokens
from memlab.llm._usage import CallUsage, UsageSource, record_usage
from memlab.llm.offline import HANDLERS_PARAM, LATENCY_PARAM, OFFLINE_MODEL, PROVIDER, ensure_registered
from memlab.llm.offline import offline_latency_ms as _resolve_latency

__all__ = ["LLMClient", "LLMResult"]

ModelT = TypeVar("ModelT", bound=BaseModel)

_FENCED = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class LLMResult(Generic[ModelT]):
    """One completed LLM call.

    ``text`` is the raw output (JSON for structured calls); ``structured`` the
    validated ``response_model`` instance, or None without one. ``model`` is the
    model string the call was made with. ``tokens_in``/``tokens_out`` are the
    provider's usage figures when it reported any (``usage_source="provider"``,
    ``exact_usage=True``), else litellm's ``token_counter`` for the model
    (``"tokenizer"``), else :func:`~memlab.llm.estimate_tokens` of the prompt text and
    the output (``"estimate"``). ``cost_usd`` is the cost from litellm's cost map
    (priced as the client's ``price_as`` model when it has one), None when unpriced.
    ``latency_s`` is the wall-clock time of the litellm call.
    """

    text: str
    structured: ModelT | None
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    exact_usage: bool
    response: Any = field(default=None, repr=False, compare=False)
    usage_source: UsageSource = "estimate"
    cost_usd: float | None = None


def _normalize_messages(messages: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        if not messages.strip():
            raise ValidationError("the prompt is empty")
        return [{"role": "user", "content": messages}]
    if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
        raise ValidationError(f"messages must be a prompt string or a list of chat messages, got {type(messages).__name__}")
    normalized: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ValidationError(f"message {index} must be a mapping with a 'role', got {message!r}")
        normalized.append(dict(message))
    if not normalized:
        raise ValidationError("messages is empty")
    return normalized


def _reported_usage(response: Any) -> tuple[int, int] | None:
    usage = getattr(response, "usage", None)
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None) or 0
    completion = getattr(usage, "completion_tokens", None) or 0
    if prompt <= 0 and completion <= 0:
        return None
    return int(prompt), int(completion)


def _counted_usage(model: str, chat: list[dict[str, Any]], text: str) -> tuple[int, int, UsageSource]:
    """Token counts from litellm's ``token_counter`` for ``model``; the estimate when it cannot count."""
    from memlab.llm._litellm import load_litellm

    try:
        counter = load_litellm().token_counter
        return int(counter(model=model, messages=chat)), int(counter(model=model, text=text)) if text else 0, "tokenizer"
    except Exception:  # a model or content the counter cannot tokenize
        return estimate_tokens(prompt_text(chat)), estimate_tokens(text), "estimate"


def _output_text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _validate(response_model: type[ModelT], text: str, model: str) -> ModelT:
    """``text`` as a ``response_model`` instance: the whole text, else a fenced block, else the outermost {...}."""
    candidates = [text]
    fenced = _FENCED.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    first_error: Exception | None = None
    for candidate in candidates:
        try:
            return response_model.model_validate_json(candidate)
        except pydantic.ValidationError as exc:
            first_error = first_error or exc
    detail = _describe(first_error)
    raise StructuredOutputError(
        f"{model} output does not fit {response_model.__name__}: {detail}; raw output: {preview(text)!r}",
        raw_text=text,
        response_model=response_model,
        model=model,
    ) from first_error


def _describe(exc: Exception | None) -> str:
    if isinstance(exc, pydantic.ValidationError):
        errors = exc.errors()
        shown = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'output'}: {err['msg']}" for err in errors[:3])
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        return f"{len(errors)} validation error{'s' if len(errors) != 1 else ''}: {shown}{more}"
    return "no output" if exc is None else str(exc)


class LLMClient:
    """Async LLM client: every call is one ``litellm.acompletion``.

    ``model`` is a litellm model string (``LLM_MODEL``); ``api_key`` is passed to
    litellm when given (``LLM_API_KEY``). ``offline_latency_ms`` is the simulated
    latency of each ``memlab/offline`` call; None reads ``MEMLAB_OFFLINE_LATENCY_MS``
    (default 0) when the client is built. Other keyword arguments go to litellm.
    ``handlers`` holds this client's offline structured-output handlers
    (:class:`~memlab.llm.StructuredHandlers`); each offline call carries it.

    Errors: a bad argument raises :class:`~memlab.ValidationError`; an output that
    cannot fill ``response_model`` raises :class:`StructuredOutputError` (a
    ``ValidationError``) with ``raw_text``; anything litellm or the provider
    raises is wrapped in :class:`LLMError` (original as ``__cause__``).
    The client holds no connection; it is safe to share across tasks.
    """

    @classmethod
    def from_config(cls, config: Any) -> "LLMClient":
        """The client a :class:`~memlab.config.StackConfig` describes: ``llm.model``, ``api_key``, latency, ``price_as``."""
        llm = config.llm
        return cls(
            llm.model,
            api_key=llm.api_key.get_secret_value() if llm.api_key else None,
            offline_latency_ms=llm.offline_latency_ms,
            price_as=llm.price_as,
        )

    def __init__(
        self,
        model: str = OFFLINE_MODEL,
        api_key: str | None = None,
        offline_latency_ms: float | None = None,
        price_as: str | None = None,
        **litellm_kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"model must be a non-empty litellm model string, got {model!r}")
        if price_as is not None and (not isinstance(price_as, str) or not price_as.strip()):
            raise ValidationError(f"price_as must be a non-empty litellm model string or None, got {price_as!r}")
        self.model = model.strip()
        #: the model whose litellm price this client's calls are charged at (None: its own model)
        self.price_as = price_as.strip() if price_as else None
        self._api_key = api_key or None
        self.offline_latency_ms = _resolve_latency(offline_latency_ms)
        self.litellm_kwargs = dict(litellm_kwargs)
        self.handlers = StructuredHandlers()

    @property
    def is_offline(self) -> bool:
        """True when calls go to memlab's own offline provider."""
        return self.model.split("/", 1)[0] == PROVIDER

    def __repr__(self) -> str:
        key = ", api_key=***" if self._api_key else ""
        latency = f", offline_latency_ms={self.offline_latency_ms}" if self.is_offline else ""
        return f"LLMClient(model={self.model!r}{key}{latency})"

    async def prepare(self) -> None:
        """Import litellm and register the offline provider now (off the event loop); cheap once done.

        Lets a caller time the one-off import (~3 s cold) apart from steady-state calls.
        """
        await asyncio.to_thread(ensure_registered)

    async def complete(
        self,
        messages: str | Sequence[Mapping[str, Any]],
        *,
        response_model: type[ModelT] | None = None,
        **kwargs: Any,
    ) -> LLMResult[ModelT]:
        """Run one completion: a prompt string (one user message) or a list of chat messages.

        With ``response_model`` (a pydantic model class) the call asks for
        structured output (litellm ``response_format``) and the result's
        ``structured`` holds the validated instance.
        """
        chat = _normalize_messages(messages)
        if response_model is not None and not (isinstance(response_model, type) and issubclass(response_model, BaseModel)):
            raise ValidationError(f"response_model must be a pydantic model class, got {response_model!r}")
        call = self._call_kwargs(chat, response_model, kwargs)
        litellm = ensure_registered()
        started = time.perf_counter()
        try:
            response = await litellm.acompletion(**call)
        except Exception as exc:  # every litellm / provider failure becomes an LLMError
            record_usage(CallUsage(self.model, "llm", 0, 0, "estimate", None, error=True))
            raise self._wrap(exc) from exc
        latency_s = time.perf_counter() - started
        text = _output_text(response)
        usage = _reported_usage(response)
        source: UsageSource
        if usage is None:
            tokens_in, tokens_out, source = _counted_usage(self.price_as or self.model, chat, text)
        else:
            (tokens_in, tokens_out), source = usage, "provider"
        cost = cost_usd(self.price_as or self.model, tokens_in, tokens_out)
        try:
            structured = _validate(response_model, text, self.model) if response_model is not None else None
        except StructuredOutputError:
            record_usage(CallUsage(self.model, "llm", tokens_in, tokens_out, source, cost, error=True))
            raise
        record_usage(CallUsage(self.model, "llm", tokens_in, tokens_out, source, cost))
        return LLMResult(
            text=text,
            structured=structured,
            model=self.model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_s=latency_s,
            exact_usage=usage is not None,
            response=response,
            usage_source=source,
            cost_usd=cost,
        )

    def _call_kwargs(self, chat: list[dict[str, Any]], response_model: type[BaseModel] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        call: dict[str, Any] = {**self.litellm_kwargs, **kwargs}
        if "model" in call or "messages" in call:
            raise ValidationError("pass the model to LLMClient() and the messages as the first argument, not as keywords")
        call["model"] = self.model
        call["messages"] = chat
        if response_model is not None:
            call["response_format"] = response_model
        if self._api_key is not None and "api_key" not in call:
            call["api_key"] = self._api_key
        if self.is_offline:
            call.setdefault(LATENCY_PARAM, self.offline_latency_ms)
            call.setdefault(HANDLERS_PARAM, self.handlers)
        return call

    def _wrap(self, exc: Exception) -> LLMError:
        message = f"LLM call to {self.model} failed: {type(exc).__name__}: {exc}"
        if self._api_key:
            message = message.replace(self._api_key, "***")
        return LLMError(message, model=self.model, provider_error=type(exc).__name__)
