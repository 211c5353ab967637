"""The structured-output extension point: what a handler gets and each client's handler registry.

The offline provider (:mod:`memlab.llm.offline`) reads a call's
:class:`StructuredHandlers` and hands the matching handler an
:class:`OfflineRequest`; features and researchers see only these types, never the provider.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["OfflineRequest", "StructuredHandler", "StructuredHandlers"]


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


class StructuredHandlers:
    """The structured-output handlers of one :class:`~memlab.llm.LLMClient` (``client.handlers``).

    A handler fills the schema it is registered under in that client's
    ``memlab/offline`` calls; other clients never see it. Thread-safe.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, StructuredHandler] = {}
        self._lock = threading.Lock()

    def register(self, name: str, fn: StructuredHandler, *, replace: bool = True) -> StructuredHandler | None:
        """Fill the schema called ``name`` with ``fn``; returns the handler registered before.

        With ``replace=False`` a handler already registered under ``name`` is
        kept (checked and set atomically) and ``fn`` is registered only when
        there was none, so a non-None return means nothing changed.

        ``name`` is the schema name litellm sends, which for a pydantic
        ``response_model`` is its class name (``"SessionTurnAnalysis"``); a
        schema without a registered name falls back to its ``title``. ``fn``
        receives an :class:`OfflineRequest` and returns the output: a dict, list
        or pydantic model (serialised to JSON) or a str (used verbatim). It must
        be deterministic, and it runs inside the provider call, so an exception
        it raises reaches the caller as :class:`~memlab.llm.LLMError`.
        """
        if not isinstance(name, str) or not name.strip():
            raise ValueError("name must be a non-empty string")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        with self._lock:
            previous = self._handlers.get(name)
            if replace or previous is None:
                self._handlers[name] = fn
        return previous

    def unregister(self, name: str) -> StructuredHandler | None:
        """Remove the handler registered under ``name``; returns it (None when there was none)."""
        with self._lock:
            return self._handlers.pop(name, None)

    def lookup(self, name: str | None, schema: Mapping[str, Any] | None = None) -> StructuredHandler | None:
        """The handler for the schema called ``name``, else for ``schema``'s ``title``, else None."""
        with self._lock:
            if name and name in self._handlers:
                return self._handlers[name]
            title = schema.get("title") if schema else None
            return self._handlers.get(title) if isinstance(title, str) else None

    def __deepcopy__(self, memo: dict) -> StructuredHandlers:
        # a registry travels in a call's litellm kwargs: a copy of those kwargs still means this client's handlers
        return self

    def __repr__(self) -> str:
        with self._lock:
            return f"StructuredHandlers({sorted(self._handlers)!r})"
