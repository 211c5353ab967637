"""Widgets tests run headless: matplotlib on the Agg backend, a small chat session on a fast stack."""

from __future__ import annotations

import matplotlib
import pytest

from memlab import SearchType

matplotlib.use("Agg")

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
QUESTIONS = ("Always cite the source.", "Who discovered Polonium?", "And where did she work?")


@pytest.fixture
def questions() -> tuple[str, ...]:
    """The questions of the ``chat`` fixture's turns, in order."""
    return QUESTIONS


@pytest.fixture
def ask(stack):
    """``await ask(question, session_id="chat", user=None)``: one search turn; returns its qa id."""

    async def turn(question: str, session_id: str = "chat", user=None) -> str:
        await stack.search(question, SearchType.GRAPH_COMPLETION, session_id=session_id, user=user)
        return (await stack.session.get_session(session_id=session_id, user=user))[-1].qa_id

    return turn


@pytest.fixture
async def chat(stack, ask):
    """Two documents and three turns in session "chat": a rule (guidance), a question, a follow-up (rewrite lane)."""
    remembered = await stack.remember([CURIE, TURING])
    qa_ids = [await ask(question) for question in QUESTIONS]
    return stack, remembered, qa_ids
