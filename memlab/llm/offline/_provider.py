"""The ``memlab`` litellm custom provider: simulated latency, usage, and its entry in ``litellm.custom_provider_map``."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlab.exceptions import ConfigError
from memlab.llm._litellm import load_litellm
from memlab.llm._prompt import prompt_text
from memlab.llm._structured import StructuredHandlers
from memlab.llm._tokens import estimate_tokens
from memlab.llm.offline._respond import respond

if TYPE_CHECKING:  # litellm itself is imported lazily, by load_litellm()
    from litellm import CustomLLM

__all__ = [
    "HANDLERS_PARAM",
    "LATENCY_ENV",
    "LATENCY_PARAM",
    "OFFLINE_MODEL",
    "PROVIDER",
    "ensure_registered",
    "offline_handler",
    "offline_latency_ms",
]

PROVIDER = "memlab"
OFFLINE_MODEL = "memlab/offline"
#: the model names (after ``memlab/``) this provider serves
_SERVED = ("offline",)
#: per-call litellm kwarg carrying the simulated latency (ms); arrives in ``optional_params``
LATENCY_PARAM = "memlab_offline_latency_ms"
#: per-call litellm kwarg carrying the calling client's :class:`~memlab.llm.StructuredHandlers`; arrives in ``optional_params``
HANDLERS_PARAM = "memlab_offline_handlers"
#: environment fallback for the simulated latency (ms)
LATENCY_ENV = "MEMLAB_OFFLINE_LATENCY_MS"


def _parse_latency(raw: Any, source: str) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{source} must be a number of milliseconds, got {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{source} must be a finite number of milliseconds >= 0, got {raw!r}")
    return value


def offline_latency_ms(value: float | None = None, environ: Mapping[str, str] | None = None) -> float:
    """The simulated latency (ms): ``value`` when given, else ``MEMLAB_OFFLINE_LATENCY_MS``, else 0.

    A negative, non-finite or non-numeric value raises :class:`~memlab.ConfigError`.
    """
    if value is not None:
        return _parse_latency(value, "offline_latency_ms")
    raw = (os.environ if environ is None else environ).get(LATENCY_ENV, "")
    return _parse_latency(raw, LATENCY_ENV) if raw.strip() else 0.0


def _prepare(model: str, messages: Sequence[Mapping[str, Any]], optional_params: Mapping[str, Any] | None) -> tuple[float, str]:
    """(latency seconds, output text) of one call; raises for a model this provider does not serve."""
    if model not in _SERVED:
        served = ", ".join(f"{PROVIDER}/{name}" for name in _SERVED)
        raise ValueError(f"unknown memlab model {PROVIDER}/{model}; the memlab provider serves {served}")
    params = optional_params or {}
    handlers = params.get(HANDLERS_PARAM)
    if handlers is not None and not isinstance(handlers, StructuredHandlers):
        raise TypeError(f"{HANDLERS_PARAM} must be a StructuredHandlers, got {type(handlers).__name__}")
    latency_ms = offline_latency_ms(params.get(LATENCY_PARAM))
    return latency_ms / 1000.0, respond(messages, params.get("response_format"), handlers)


def _finish(model: str, messages: Sequence[Mapping[str, Any]], text: str, model_response: Any) -> Any:
    from litellm.types.utils import Usage

    prompt_tokens = estimate_tokens(prompt_text(messages))
    completion_tokens = estimate_tokens(text)
    model_response.choices[0].message.content = text
    model_response.choices[0].finish_reason = "stop"
    model_response.model = f"{PROVIDER}/{model}"
    model_response.usage = Usage(
        prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens
    )
    return model_response


@functools.cache
def _handler_class() -> type[CustomLLM]:
    litellm = load_litellm()
    if TYPE_CHECKING:
        from litellm import CustomLLM as Base
    else:
        Base = litellm.CustomLLM  # the same class, from the litellm that load_litellm() set up

    class OfflineLLM(Base):
        """The ``memlab`` litellm provider (see :mod:`memlab.llm.offline`)."""

        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            delay, text = _prepare(model, messages, kwargs.get("optional_params"))
            if delay:
                time.sleep(delay)
            return _finish(model, messages, text, kwargs["model_response"])

        async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:
            delay, text = _prepare(model, messages, kwargs.get("optional_params"))
            if delay:
                await asyncio.sleep(delay)
            return _finish(model, messages, text, kwargs["model_response"])

    return OfflineLLM


@functools.cache
def offline_handler() -> CustomLLM:
    """The process-wide provider instance; it holds no state (each call brings its client's handlers)."""
    return _handler_class()()


_REGISTER_LOCK = threading.Lock()


def ensure_registered() -> Any:
    """Register the ``memlab`` provider in ``litellm.custom_provider_map`` unless it is there; returns litellm.

    Idempotent and cheap, so the client calls it before every call (a notebook
    that reassigns ``litellm.custom_provider_map`` gets the provider back). A
    handler someone else registered under ``"memlab"`` is left in place.
    """
    litellm = load_litellm()
    with _REGISTER_LOCK:
        if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            litellm.custom_provider_map.append({"provider": PROVIDER, "custom_handler": offline_handler()})
            setup = getattr(getattr(litellm, "utils", None), "custom_llm_setup", None)
            if setup is not None:
                setup()
    return litellm
