"""``memlab/offline``: a deterministic litellm custom provider (no network, no randomness).

memlab registers it in ``litellm.custom_provider_map`` as provider ``"memlab"``
the first time an :class:`~memlab.llm.LLMClient` is used, so offline calls take
the same ``litellm.acompletion`` path as real providers.

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
context block of the system and user messages, in order. :func:`context_prompt`
builds such messages.

Answers
-------
* Plain completion: the context sentence with the most content words in common
  with the question (stop words dropped, a plural ``s`` folded); ties go to the
  denser sentence (more shared words per word), then to the earlier one. No
  shared word, no context or no question: ``"I don't know."``.
* Structured output (``response_format`` a pydantic model, a ``json_schema``
  response format or ``json_object``): a handler registered with
  :func:`register_structured_handler` under the schema's name, else a generic
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

import asyncio
import functools
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from memlab.exceptions import ConfigError
from memlab.llm._litellm import load_litellm
from memlab.llm._tokens import estimate_tokens
from memlab.text import I_DONT_KNOW, STOP_WORDS, content_words, message_text

__all__ = [
    "I_DONT_KNOW",
    "LATENCY_ENV",
    "LATENCY_PARAM",
    "OFFLINE_MODEL",
    "OfflineRequest",
    "PROVIDER",
    "StructuredHandler",
    "best_sentence",
    "content_words",
    "context_prompt",
    "ensure_registered",
    "extractive_answer",
    "fill_schema",
    "message_text",
    "offline_latency_ms",
    "parse_prompt",
    "prompt_text",
    "register_structured_handler",
    "split_sentences",
    "unregister_structured_handler",
]

PROVIDER = "memlab"
OFFLINE_MODEL = "memlab/offline"
#: the model names (after ``memlab/``) this provider serves
_SERVED = ("offline",)
#: per-call litellm kwarg carrying the simulated latency (ms); arrives in ``optional_params``
LATENCY_PARAM = "memlab_offline_latency_ms"
#: environment fallback for the simulated latency (ms)
LATENCY_ENV = "MEMLAB_OFFLINE_LATENCY_MS"

_MARKER = re.compile(r"^\s*(context|question)\s*:[ \t]?(.*)$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BULLET = re.compile(r"^(?:[-*\u2022]+|\d+[.)])\s+")


# --------------------------------------------------------------------------- prompt parsing




def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Every message's text joined by newlines: what the offline usage figures are estimated from."""
    return "\n".join(message_text(message) for message in messages)


def _blocks(text: str) -> tuple[list[str], list[str], list[str]]:
    """(context lines, question lines, other lines) of one message text."""
    context: list[str] = []
    question: list[str] = []
    other: list[str] = []
    target = other
    for line in text.splitlines():
        match = _MARKER.match(line)
        if match:
            target = context if match.group(1).lower() == "context" else question
            line = match.group(2)
        target.append(line)
    return context, question, other


def parse_prompt(messages: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """``(question, context)`` of a chat following the module's prompt convention."""
    contexts: list[str] = []
    question: str | None = None
    last_user_other = ""
    for message in messages:
        role = message.get("role")
        if role not in ("system", "user", "developer"):
            continue
        context, asked, other = _blocks(message_text(message))
        if any(line.strip() for line in context):
            contexts.append("\n".join(context).strip())
        if role == "user":
            if any(line.strip() for line in asked):
                question = "\n".join(asked).strip()
            last_user_other = "\n".join(other).strip()
    return (question if question is not None else last_user_other), "\n".join(contexts)


def context_prompt(question: str, context: str | Sequence[str], *, instructions: str | None = None) -> list[dict[str, str]]:
    """Chat messages in the offline convention: optional system ``instructions``, then one user
    message with a ``Context:`` block (a sequence is joined one item per line) and a ``Question:`` line.

    Real providers read the same messages as an ordinary grounded prompt.
    """
    body = context if isinstance(context, str) else "\n".join(context)
    messages = [{"role": "system", "content": instructions}] if instructions else []
    messages.append({"role": "user", "content": f"Context:\n{body}\nQuestion: {question}"})
    return messages


def split_sentences(context: str) -> list[str]:
    """The sentences of a context block: split at line breaks and after ``.``, ``!`` or ``?``;
    list bullets stripped; lines without a letter or digit (``---`` separators) dropped."""
    sentences: list[str] = []
    for line in context.splitlines():
        line = _BULLET.sub("", line.strip())
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if piece and any(ch.isalnum() for ch in piece):
                sentences.append(piece)
    return sentences




def best_sentence(question: str, sentences: Sequence[str]) -> str | None:
    """The sentence sharing the most content words with ``question`` (ties: denser, then earlier), or None."""
    asked = content_words(question)
    if not asked:
        return None
    best: tuple[int, float, int] | None = None
    chosen: str | None = None
    for index, sentence in enumerate(sentences):
        words = content_words(sentence)
        shared = len(asked & words)
        if not shared:
            continue
        rank = (shared, shared / len(words), -index)
        if best is None or rank > best:
            best, chosen = rank, sentence
    return chosen


def extractive_answer(messages: Sequence[Mapping[str, Any]]) -> str:
    """The offline plain-completion answer for ``messages`` (see the module docstring)."""
    question, context = parse_prompt(messages)
    return best_sentence(question, split_sentences(context)) or I_DONT_KNOW


# --------------------------------------------------------------------------- structured output


@dataclass(frozen=True)
class OfflineRequest:
    """What a structured-output handler gets about one offline call.

    ``schema`` is the JSON schema litellm derived from the ``response_format``
    (``None`` for ``json_object``), ``schema_name`` its name (a pydantic model's
    class name). ``answer`` is the extractive answer, ``"I don't know."`` when
    none.
    """

    messages: tuple[Mapping[str, Any], ...]
    question: str
    context: str
    sentences: tuple[str, ...]
    answer: str
    schema: Mapping[str, Any] | None
    schema_name: str | None


#: ``fn(request) -> dict | list | pydantic model | str``; a str is returned verbatim as the output text
StructuredHandler = Callable[[OfflineRequest], Any]

_HANDLERS: dict[str, StructuredHandler] = {}
_HANDLERS_LOCK = threading.Lock()


def register_structured_handler(model_name: str, fn: StructuredHandler, *, replace: bool = True) -> StructuredHandler | None:
    """Make the offline provider fill the schema named ``model_name`` with ``fn``; returns the handler registered before.

    With ``replace=False`` a handler already registered under ``model_name`` is
    kept (checked and set atomically) and ``fn`` is registered only when there
    was none, so a non-None return means nothing changed.

    ``model_name`` is the schema name litellm sends, which for a pydantic
    ``response_model`` is its class name (``"SessionTurnAnalysis"``); a schema
    without a registered name falls back to its ``title``. ``fn`` receives an
    :class:`OfflineRequest` and returns the output: a dict, list or pydantic
    model (serialised to JSON) or a str (used verbatim). It must be
    deterministic, and it runs inside the provider call, so an exception it
    raises reaches the caller as :class:`~memlab.llm.LLMError`. The registry
    is process-wide; :func:`unregister_structured_handler` removes an entry.
    """
    if not isinstance(model_name, str) or not model_name.strip():
        raise ValueError("model_name must be a non-empty string")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    with _HANDLERS_LOCK:
        previous = _HANDLERS.get(model_name)
        if replace or previous is None:
            _HANDLERS[model_name] = fn
    return previous


def unregister_structured_handler(model_name: str) -> StructuredHandler | None:
    """Remove the handler registered under ``model_name``; returns it (None when there was none)."""
    with _HANDLERS_LOCK:
        return _HANDLERS.pop(model_name, None)


def _structured_handler(name: str | None, schema: Mapping[str, Any] | None) -> StructuredHandler | None:
    with _HANDLERS_LOCK:
        if name and name in _HANDLERS:
            return _HANDLERS[name]
        title = schema.get("title") if schema else None
        return _HANDLERS.get(title) if isinstance(title, str) else None


_MAX_DEPTH = 12


def fill_schema(schema: Mapping[str, Any], text: str = "") -> Any:
    """A deterministic value valid for the JSON ``schema`` (see the module docstring); strings get ``text``."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    title = schema.get("title")
    root = frozenset({f"#/$defs/{title}", f"#/definitions/{title}"}) if title in defs else frozenset()
    return _fill(schema, defs, text, 0, root)


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return node
    name = ref.rsplit("/", 1)[-1]
    target = defs.get(name, {})
    return {**target, **{key: value for key, value in node.items() if key != "$ref"}}


def _fill(node: Any, defs: Mapping[str, Any], text: str, depth: int, path: frozenset[str] = frozenset()) -> Any:
    """Fill one schema node; ``path`` holds the ``$ref`` names being expanded (recursion guard)."""
    if not isinstance(node, Mapping):
        return None
    ref = node.get("$ref")
    if isinstance(ref, str):
        path = path | {ref}
    node = _resolve(node, defs)
    if "const" in node:
        return node["const"]
    if "default" in node:
        return node["default"]
    if node.get("enum"):
        return node["enum"][0]
    if depth > _MAX_DEPTH:
        return None
    for combinator in ("anyOf", "oneOf"):
        branches = node.get(combinator)
        if branches:
            nullable = any(isinstance(b, Mapping) and b.get("type") == "null" for b in branches)
            concrete = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if nullable and (not concrete or (isinstance(concrete[0], Mapping) and concrete[0].get("$ref") in path)):
                return None  # an optional self-reference ends the recursion
            return _fill((concrete or branches)[0], defs, text, depth + 1, path)
    if node.get("allOf"):
        merged: dict[str, Any] = {}
        for part in node["allOf"]:
            merged.update(_resolve(part, defs) if isinstance(part, Mapping) else {})
        return _fill(merged, defs, text, depth + 1, path)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in node else "array" if ("items" in node or "prefixItems" in node) else None
    if kind == "object":
        return {name: _fill(sub, defs, text, depth + 1, path) for name, sub in node.get("properties", {}).items()}
    if kind == "array":
        prefix = node.get("prefixItems")
        if prefix:
            return [_fill(sub, defs, text, depth + 1, path) for sub in prefix]
        count = int(node.get("minItems", 0))
        return [_fill(node.get("items", {}), defs, text, depth + 1, path) for _ in range(count)]
    if kind == "string":
        return _fill_string(node, text)
    if kind in ("integer", "number"):
        return _fill_number(node, integer=kind == "integer")
    if kind == "boolean":
        return False
    return None


_FORMATTED = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00",
    "duration": "PT0S",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "offline@example.com",
    "uri": "https://example.com/",
}


def _fill_string(node: Mapping[str, Any], text: str) -> str:
    value = _FORMATTED.get(node.get("format", ""), text)
    max_length = node.get("maxLength")
    if isinstance(max_length, int) and len(value) > max_length:
        value = value[:max_length]
    min_length = node.get("minLength")
    if isinstance(min_length, int) and len(value) < min_length:
        value += "x" * (min_length - len(value))
    return value


def _fill_number(node: Mapping[str, Any], *, integer: bool) -> int | float:
    low = node.get("minimum")
    low_open = node.get("exclusiveMinimum")
    high = node.get("maximum")
    high_open = node.get("exclusiveMaximum")
    value: float = 0
    if low is not None and value < low:
        value = low
    if low_open is not None and value <= low_open:
        if integer:
            value = math.floor(low_open) + 1
        else:
            ceiling = min(x for x in (high, high_open, low_open + 2) if x is not None)
            value = (low_open + ceiling) / 2
    if high is not None and value > high:
        value = high
    if high_open is not None and value >= high_open:
        value = math.ceil(high_open) - 1 if integer else high_open - 1
    return int(value) if integer else float(value)


def _structured_spec(response_format: Any) -> tuple[bool, str | None, Mapping[str, Any] | None]:
    """(structured?, schema name, JSON schema) of a litellm ``response_format``."""
    if response_format is None:
        return False, None, None
    if isinstance(response_format, type) and issubclass(response_format, BaseModel):
        return True, response_format.__name__, response_format.model_json_schema()
    if isinstance(response_format, Mapping):
        kind = response_format.get("type")
        if kind == "json_schema":
            spec = response_format.get("json_schema") or {}
            schema = spec.get("schema") or {}
            return True, spec.get("name") or schema.get("title"), schema
        if kind == "json_object":
            return True, None, None
        if kind == "text":
            return False, None, None
        if "properties" in response_format or kind == "object":
            return True, response_format.get("title"), response_format
    raise ValueError(f"memlab/offline cannot read response_format {response_format!r}")


def _to_json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, ensure_ascii=False)


def respond(messages: Sequence[Mapping[str, Any]], response_format: Any = None) -> str:
    """The offline output text for ``messages`` (JSON when ``response_format`` asks for structure)."""
    structured, name, schema = _structured_spec(response_format)
    if not structured:
        return extractive_answer(messages)
    question, context = parse_prompt(messages)
    sentences = tuple(split_sentences(context))
    answer = best_sentence(question, sentences) or I_DONT_KNOW
    handler = _structured_handler(name, schema)
    if handler is not None:
        request = OfflineRequest(tuple(messages), question, context, sentences, answer, schema, name)
        return _to_json_text(handler(request))
    text = "" if answer == I_DONT_KNOW else answer
    if schema is None:
        return json.dumps({"answer": text}, ensure_ascii=False)
    return _to_json_text(fill_schema(schema, text))


# --------------------------------------------------------------------------- latency


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


# --------------------------------------------------------------------------- the litellm provider


def _prepare(model: str, messages: Sequence[Mapping[str, Any]], optional_params: Mapping[str, Any] | None) -> tuple[float, str]:
    """(latency seconds, output text) of one call; raises for a model this provider does not serve."""
    if model not in _SERVED:
        served = ", ".join(f"{PROVIDER}/{name}" for name in _SERVED)
        raise ValueError(f"unknown memlab model {PROVIDER}/{model}; the memlab provider serves {served}")
    params = optional_params or {}
    latency_ms = offline_latency_ms(params.get(LATENCY_PARAM))
    return latency_ms / 1000.0, respond(messages, params.get("response_format"))


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
def _handler_class() -> type:
    litellm = load_litellm()

    class OfflineLLM(litellm.CustomLLM):
        """The ``memlab`` litellm provider (see :mod:`memlab.llm._offline`)."""

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
def offline_handler() -> Any:
    """The process-wide offline provider instance."""
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
