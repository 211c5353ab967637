"""Jupyter explorers of a stack's sessions, turns, deletions and experiment results (ipywidgets, optional).

``import memlab.widgets`` imports none of ipywidgets, anywidget, matplotlib or plotly:
each class is loaded on first access and imports them when constructed; without them
construction raises ``ImportError`` naming ``pip install 'memlab[widgets]'``
(check first with :func:`is_available`).

* :class:`SessionExplorer` ``(stack)``: users, sessions, a grid of the turns, feedback,
  usage and cost; a selected turn opens in a :class:`TurnInspector`;
* :class:`UsageExplorer` ``(stack)``: the usage view: grids of every visible session and
  of usage per model, cost by model; a selected session opens in a :class:`SessionExplorer`;
* :class:`TurnInspector` ``(stack, session_id, qa_id)``: one turn's lanes, verdicts, phases;
* :class:`ModeComparison` ``(results)``: a Grid result frame's latency, tokens and hit rate
  (interactive plotly charts when plotly is installed), its summary and a grid of the frame;
* :class:`CleanupViewer` ``(forget_result)``: what a delete removed from the session cache;
* :class:`ExplorerPage` ``(stack)``: the usage view and the open session laid out as a page
  to keep open, with Refresh and auto-refresh (what ``memlab ui`` serves);
* :class:`FrameGrid` ``(frame)``: the data grid the others use, for any DataFrame
  (``stack.frames.turns()``, ``.sessions()``, ``.usage()``, a Grid's results): paging,
  sorting and filtering in the kernel, the page on screen sent to the browser.

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
    "ExplorerPage": "memlab.widgets._page",
    "FrameGrid": "memlab.widgets._grid",
    "ModeComparison": "memlab.widgets._modes",
    "SessionExplorer": "memlab.widgets._session",
    "TurnInspector": "memlab.widgets._turn",
    "UsageExplorer": "memlab.widgets._usage",
}
#: what the explorers import (the ``memlab[widgets]`` extra); plotly is optional within it (PNG charts without)
REQUIRED = ("ipywidgets", "anywidget", "matplotlib")

__all__ = sorted([*_LAZY, "is_available"])


def is_available() -> bool:
    """True when ipywidgets, anywidget and matplotlib can be imported (the ``memlab[widgets]`` extra); imports none of them."""
    return all(importlib.util.find_spec(name) is not None for name in REQUIRED)


__getattr__ = _lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
