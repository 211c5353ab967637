"""``sequential``: analysis first; its effective query drives retrieval and the answer, and it may gate the turn."""

from __future__ import annotations

from typing import Any

from memlab.analysis._base import ACK, AnalysisMode, TurnPort, should_answer_turn

__all__ = ["SequentialMode"]


class SequentialMode(AnalysisMode):
    """Analyse → apply → (gate) → retrieve once with the effective query → answer with history and guidance.

    The analysis runs only with a session and ``auto_feedback``. A gated turn
    (:func:`~memlab.analysis.should_answer_turn` false) is stored with the
    analysis' reply or ``"Got it."`` as its answer, without retrieval or an answer
    call. Guidance written by this turn's analysis is served to this turn's answer.
    """

    name = "sequential"

    async def run(self, port: TurnPort) -> Any:
        state = await port.load()
        analysis = await self.analyze(port, state) if self.analyzes and port.session_available else None
        if analysis is not None:
            await port.apply(analysis, state)
            if not should_answer_turn(analysis, state.previous):
                return await port.acknowledge((analysis.response_to_user or "").strip() or ACK)
        effective = (analysis.query_to_answer if analysis is not None else None) or port.query
        port.note(effective_query=effective)
        guidance = await port.guidance(effective) if self.analyzes else None
        return await port.commit(await port.answer(effective, guidance), guidance)
