"""Widgets tests run headless: matplotlib on the Agg backend, a small chat session on a fast stack."""

from __future__ import annotations

import matplotlib
import pandas as pd
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


@pytest.fixture
async def two_users(chat, ask):
    """``chat`` plus session "other" of the default user and "agent-chat" of a child user "agent": (stack, qa_ids, other_qa, agent, agent_qa)."""
    stack, _, qa_ids = chat
    other_qa = await ask("Who described the Turing machine?", session_id="other")
    agent = await stack.users.create("agent", parent_user_id=(await stack.users.default()).id)
    agent_qa = await ask("Where did Alan Turing work?", session_id="agent-chat", user=agent)
    return stack, qa_ids, other_qa, agent, agent_qa


MODES = ("concurrent", "sequential", "off")


def turn_rows(n: int = 60) -> pd.DataFrame:
    """A turns-like frame: latency grows with the turn, modes cycle, every 7th turn unanswered, lanes as lists."""
    return pd.DataFrame({
        "qa_id": pd.array([f"qa-{index:03d}" for index in range(n)], dtype="string"),
        "question": pd.array([f"question {index} about {'Polonium' if index % 3 == 0 else 'Turing'}" for index in range(n)], dtype="string"),
        "mode": pd.array([MODES[index % 3] for index in range(n)], dtype="string"),
        "answered": pd.array([index % 7 != 0 for index in range(n)], dtype="boolean"),
        "latency_ms": pd.array([10.0 * index + 0.25 for index in range(n)], dtype="Float64"),
        "tokens_in": pd.array([1000 + index if index != 5 else None for index in range(n)], dtype="Int64"),
        "hit_rate": pd.array([index / n for index in range(n)], dtype="Float64"),
        "lane_merged": [[f"e{j}" for j in range(index % 4)] for index in range(n)],
        "used_graph_element_ids": [{"node_ids": ["n"] * (index % 2), "edge_ids": ["e", "f"]} for index in range(n)],
    })


@pytest.fixture
def turns():
    """``turns(n=60)``: a turns-like frame for the grid tests (see :func:`turn_rows`)."""
    return turn_rows
