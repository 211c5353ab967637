"""The :class:`AnalysisMode` contract: how one session turn sequences analysis, retrieval and answer (SPEC §6).

A mode is a strategy over a :class:`TurnPort`, the I/O of one turn (the stack's
turn runner, :mod:`memlab.flows.turn`, implements it: session reads and writes,
retrieval, the answer call, guidance). Modes hold no state between turns and are
safe to share; the runner serialises the turns of one (user, session) with a lock.

* :class:`~memlab.analysis.ConcurrentMode` (``concurrent``): analysis alongside
  dual-query retrieval and the answer; its guidance applies from the next turn.
* :class:`~memlab.analysis.SequentialMode` (``sequential``): analysis first; its
  effective query drives retrieval and the answer; it may gate the turn.
* :class:`~memlab.analysis.OffMode` (``off``): no analysis, single-query retrieval,
  history only (the baseline).

The analysis fails open in every mode (:meth:`AnalysisMode.analyze`): an error, a
malformed output or a timeout (``timeout_seconds``) gives no analysis, the turn is
answered with the raw query, and the failure is noted on the turn (``analysis_error``).
"""

from __future__ import annotations

import abc
import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = ["ACK", "AnalysisMode", "TurnPort", "TurnState", "should_answer_turn"]

logger = logging.getLogger("memlab.analysis")

#: the acknowledgement of a gated turn when the analysis gives no reply
ACK = "Got it."


@dataclass
class TurnState:
    """What a turn reads before it runs.

    ``last_two``: the last two turns, oldest first; ``served``: the guidance served
    to the previous answer; ``guidance_entries``: all the session's guidance
    entries when they were read (to find ``served``), None when they were not.
    """

    last_two: list[Any] = field(default_factory=list)
    served: list[Any] = field(default_factory=list)
    guidance_entries: list[Any] | None = None

    @property
    def previous(self) -> Any:
        """The previous turn (the last of ``last_two``), None when there is none."""
        return self.last_two[-1] if self.last_two else None


def should_answer_turn(analysis: Any, previous: Any) -> bool:
    """Answer iff the analysis has a query to answer, or no signal at all, or there is no previous turn (SPEC §6.2)."""
    return bool(analysis.query_to_answer) or not analysis.has_signal or previous is None


class TurnPort(abc.ABC):
    """The I/O of one turn, as a mode sees it.

    ``query`` is the raw message; ``session_available`` False when the turn has no
    session (caching off), in which case :meth:`load` gives an empty state and
    writes are no-ops. :meth:`note` records facts about the turn (``effective_query``,
    ``rewrite``, ``analysis_error``) that the runner stores with it.
    """

    query: str
    session_available: bool

    @abc.abstractmethod
    async def load(self) -> TurnState:
        """Read the previous turns and the guidance served to the previous answer (fails open to an empty state)."""

    @abc.abstractmethod
    async def analyze(self, state: TurnState) -> Any:
        """One analysis call (a :class:`~memlab.analysis.SessionTurnAnalysis`); raises on failure."""

    @abc.abstractmethod
    async def apply(self, analysis: Any, state: TurnState) -> None:
        """Write the analysis' feedback, guidance updates and ratings."""

    @abc.abstractmethod
    async def guidance(self, query: str, entries: list[Any] | None = None) -> Any:
        """The guidance to serve an answer to ``query`` (rendered block + ids), stamped as served.

        ``entries``: the session's guidance entries when the caller read them with
        nothing written since (None: read them).
        """

    @abc.abstractmethod
    async def answer(self, query: str, guidance: Any, *, rewrite: str | None = None) -> Any:
        """Retrieve and answer ``query`` with history (+ ``guidance`` when not None).

        With ``rewrite``: dual-query retrieval (``query`` and ``rewrite`` lanes, merged
        by the merge policy), answered for ``query``. Returns a ``Completion``.
        """

    @abc.abstractmethod
    async def commit(self, completion: Any, guidance: Any) -> Any:
        """Store the answered turn (question = the raw query); returns the runner's result."""

    @abc.abstractmethod
    async def acknowledge(self, text: str) -> Any:
        """Store a feedback-only turn answered ``text`` without retrieval; returns the runner's result."""

    @abc.abstractmethod
    def note(self, **facts: Any) -> None:
        """Record facts about the turn (see the class docstring)."""


class AnalysisMode(abc.ABC):
    """How one session turn runs (see the module docstring). Built from an ``AnalysisConfig``.

    :meth:`run` returns what the port's :meth:`~TurnPort.commit` or
    :meth:`~TurnPort.acknowledge` returns. Errors of retrieval and answering
    propagate; analysis errors never do.
    """

    name: ClassVar[str]

    def __init__(self, config: Any) -> None:
        self.config = config

    @classmethod
    def from_config(cls, config: Any) -> "AnalysisMode":
        """This mode as a :class:`~memlab.config.StackConfig` describes it: built from ``config.analysis``."""
        return cls(config.analysis)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(auto_feedback={self.config.auto_feedback}, timeout_seconds={self.config.timeout_seconds})"

    @property
    def analyzes(self) -> bool:
        """True when this mode makes the analysis call (``auto_feedback`` on, and not ``off``)."""
        return bool(self.config.auto_feedback)

    def fallback(self) -> "AnalysisMode":
        """The mode a turn that cannot run this mode runs instead (SPEC §6.1); itself by default."""
        return self

    async def analyze(self, port: TurnPort, state: TurnState) -> Any | None:
        """The port's analysis bounded by ``timeout_seconds``; None (noted as ``analysis_error``) on any failure."""
        try:
            return await asyncio.wait_for(port.analyze(state), self.config.timeout_seconds)
        except asyncio.TimeoutError:
            error = f"timeout after {self.config.timeout_seconds:g} s"
        except Exception as exc:  # fail open: the turn is answered without analysis
            error = f"{type(exc).__name__}: {exc}"
        logger.warning("turn analysis failed open: %s", error)
        port.note(analysis_error=error)
        return None

    @abc.abstractmethod
    async def run(self, port: TurnPort) -> Any:
        """Run one turn through ``port``."""
