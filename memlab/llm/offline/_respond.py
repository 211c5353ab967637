"""The offline output text of one call: the extractive answer, a registered handler's output, or the filled schema."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from memlab.llm._structured import OfflineRequest, StructuredHandlers
from memlab.llm.offline._parsing import best_sentence, extractive_answer, parse_prompt
from memlab.text import context_sentences
from memlab.llm.offline._schema import fill_schema
from memlab.text import I_DONT_KNOW

__all__ = ["respond"]


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


def respond(messages: Sequence[Mapping[str, Any]], response_format: Any = None, handlers: StructuredHandlers | None = None) -> str:
    """The offline output text for ``messages`` (JSON when ``response_format`` asks for structure).

    A structured call is filled by the handler ``handlers`` holds for its
    schema, else by :func:`~memlab.llm.offline.fill_schema`.
    """
    structured, name, schema = _structured_spec(response_format)
    if not structured:
        return extractive_answer(messages)
    question, context = parse_prompt(messages)
    sentences = tuple(context_sentences(context))
    answer = best_sentence(question, sentences) or I_DONT_KNOW
    handler = handlers.lookup(name, schema) if handlers is not None else None
    if handler is not None:
        request = OfflineRequest(tuple(messages), question, context, sentences, answer, schema, name)
        return _to_json_text(handler(request))
    text = "" if answer == I_DONT_KNOW else answer
    if schema is None:
        return json.dumps({"answer": text}, ensure_ascii=False)
    return _to_json_text(fill_schema(schema, text))
