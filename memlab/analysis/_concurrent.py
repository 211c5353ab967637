"""``concurrent``: the analysis runs alongside dual-query retrieval and the answer (one answer call of wall-clock)."""

from __future__ import annotations

import asyncio
from typing import Any

from memlab.analysis._base import AnalysisMode, TurnPort
from memlab.analysis._rewrite import build_conversational_query
from memlab.analysis._sequential import SequentialMode

__all__ = ["ConcurrentMode"]


class ConcurrentMode(AnalysisMode):
    """Analysis (bounded by ``timeout_seconds``) in parallel with retrieval and the answer for the raw message.

    Retrieval is dual-query: the raw message and, when it differs from the
    whitespace-normalised message, its deterministic rewrite over the last two
    turns (:func:`~memlab.analysis.build_conversational_query`), merged by the
    stack's merge policy. The analysis cannot steer or gate this turn (the seed's
    rule: every turn is retrieved and answered); its guidance is applied after the
    answer and so shapes the next turn. Guidance is served from what earlier turns
    wrote. With ``auto_feedback`` off there is no analysis and no guidance, but
    retrieval stays dual-query. Turns that cannot run concurrently run
    :meth:`fallback` (:class:`SequentialMode`).
    """

    name = "concurrent"

    def fallback(self) -> AnalysisMode:
        return SequentialMode(self.config)

    async def run(self, port: TurnPort) -> Any:
        state = await port.load()
        prior = [(turn.question, turn.answer) for turn in state.last_two]
        rewrite = build_conversational_query(port.query, prior)
        lane = rewrite if rewrite and rewrite != " ".join(port.query.split()) else None
        port.note(effective_query=port.query, rewrite=lane)
        analysis_task = asyncio.ensure_future(self.analyze(port, state)) if self.analyzes else None
        try:
            guidance = await port.guidance(port.query, state.guidance_entries) if self.analyzes else None
            completion = await port.answer(port.query, guidance, rewrite=lane)
        except BaseException:
            if analysis_task is not None:
                analysis_task.cancel()
            raise
        analysis = await analysis_task if analysis_task is not None else None
        if analysis is not None:
            await port.apply(analysis, state)
        return await port.commit(completion, guidance)
