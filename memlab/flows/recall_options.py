"""The ``recall()`` options of the seed / upstream signature beyond sources and datasets, checked before any I/O.

Implemented: ``system_prompt`` (replaces the answer call's instructions, for every
completion type and in session turns), ``context_profile`` (``"qa"`` or ``"agent"``:
the guidance profile the ``session_context`` source renders) and ``feedback_influence``
(0-1, None: ``recall.feedback_influence``; how much feedback weights move graph ranking,
:mod:`memlab.flows.feedback`). Refused, each with a
:class:`~memlab.exceptions.ValidationError` saying why, when given a value other
than its default (``docs/differences.md`` lists them): ``node_name`` /
``node_name_filter_operator`` (memlab's graph has no node sets to filter by) and
``include_references`` (answers carry their sources in ``raw`` instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memlab.exceptions import ValidationError
from memlab.validation import check_text

__all__ = ["CONTEXT_PROFILES", "RecallOptions"]

#: the guidance profiles a ``session_context`` recall can render
CONTEXT_PROFILES = ("qa", "agent")

_REFUSED = {
    "node_name": "memlab's graph has no node sets to filter by (tag documents with remember(tags=...) and search a dataset instead)",
    "node_name_filter_operator": "it only applies with node_name, which memlab does not implement",
    "include_references": "memlab answers carry their sources in raw (used_node_ids, used_edge_ids, context_ids) instead",
}


@dataclass(frozen=True)
class RecallOptions:
    """The checked options; build with :meth:`checked`."""

    system_prompt: str | None = None
    context_profile: str = "qa"
    #: None: the stack's ``recall.feedback_influence``
    feedback_influence: float | None = None

    @classmethod
    def checked(
        cls,
        *,
        system_prompt: Any = None,
        context_profile: Any = "qa",
        node_name: Any = None,
        node_name_filter_operator: Any = "OR",
        include_references: Any = False,
        feedback_influence: Any = None,
    ) -> "RecallOptions":
        """The options, or a ``ValidationError`` naming the first bad or unimplemented one."""
        if system_prompt is not None:
            check_text("system_prompt", system_prompt)
            if not system_prompt.strip():
                raise ValidationError(f"system_prompt must be None or non-blank text, got {system_prompt!r}")
        if context_profile not in CONTEXT_PROFILES:
            raise ValidationError(f"context_profile must be one of {', '.join(CONTEXT_PROFILES)}, got {context_profile!r}")
        for name, value, default in (
            ("node_name", node_name, None),
            ("node_name_filter_operator", node_name_filter_operator, "OR"),
            ("include_references", include_references, False),
        ):
            if type(value) is not type(default) or value != default:
                raise ValidationError(f"recall option {name}={value!r} is not implemented: {_REFUSED[name]}")
        if feedback_influence is not None and (
            isinstance(feedback_influence, bool) or not isinstance(feedback_influence, (int, float)) or not 0 <= feedback_influence <= 1
        ):
            raise ValidationError(f"feedback_influence must be None or a number from 0 to 1, got {feedback_influence!r}")
        return cls(
            system_prompt=system_prompt,
            context_profile=context_profile,
            feedback_influence=float(feedback_influence) if feedback_influence is not None else None,
        )
