"""``off``: no analysis call, single-query retrieval, history-only answers (the baseline)."""

from __future__ import annotations

from typing import Any

from memlab.analysis._base import AnalysisMode, TurnPort

__all__ = ["OffMode"]


class OffMode(AnalysisMode):
    """Retrieve once with the raw message and answer with the session history; no analysis, no guidance."""

    name = "off"

    @property
    def analyzes(self) -> bool:
        return False

    async def run(self, port: TurnPort) -> Any:
        port.note(effective_query=port.query)
        return await port.commit(await port.answer(port.query, None), None)
