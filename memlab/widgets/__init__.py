"""Jupyter explorers of a stack's sessions, turns, deletions and experiment results (ipywidgets, optional).

``import memlab.widgets`` imports neither ipywidgets nor matplotlib: each class is
loaded on first access and imports them when constructed; without them
construction raises ``ImportError`` naming ``pip install 'memlab[widgets]'``
(check first with :func:`is_available`).

* :class:`SessionExplorer` ``(stack)``: users, sessions, turns, feedback, usage and cost;
* :class:`TurnInspector` ``(stack, session_id, qa_id)``: one turn's lanes, verdicts, phases;
* :class:`ModeComparison` ``(results)``: a Grid result frame's latency, tokens and hit rate;
* :class:`CleanupViewer` ``(forget_result)``: what a delete removed from the session cache.

Each explorer is a plain object with a root ``widget`` (it displays as that
widget). Those that read the stack load in ``async refresh()``; their controls'
callbacks schedule loads on the running loop, and ``await explorer.settle()``
waits for them (and re-raises a callback's error)::

    explorer = SessionExplorer(stack)
    await explorer.refresh()
    explorer
"""

from __future__ import annotations

import importlib.util

from memlab._imports import lazy_getattr as _lazy_getattr

_LAZY = {
    "CleanupViewer": "memlab.widgets._cleanup",
    "ModeComparison": "memlab.widgets._modes",
    "SessionExplorer": "memlab.widgets._session",
    "TurnInspector": "memlab.widgets._turn",
}

__all__ = sorted([*_LAZY, "is_available"])


def is_available() -> bool:
    """True when ipywidgets and matplotlib can be imported (the ``memlab[widgets]`` extra); imports neither."""
    return all(importlib.util.find_spec(name) is not None for name in ("ipywidgets", "matplotlib"))


__getattr__ = _lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
