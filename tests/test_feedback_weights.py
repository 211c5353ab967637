"""Feedback that does something (issue 24, deliverable 6): rated turns move the feedback weights of the graph
elements they used, and a negatively rated element ranks lower on the next retrieval."""

from __future__ import annotations

import pytest

from memlab import MemoryStack, ValidationError
from memlab.config import AnalysisConfig, RecallConfig, SessionConfig
from memlab.flows.feedback import moved
from memlab.retrievers import NEUTRAL_WEIGHT, RetrievalScope, feedback_blend
from memlab.retrievers._graph_completion import relationship_triplets
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris. Marie Curie won the Nobel Prize."
QUESTION = "What did Marie Curie do?"


def _stack(tmp_path, influence: float, alpha: float = 1.0) -> MemoryStack:
    config = fast_config(
        tmp_path, recall=RecallConfig(feedback_influence=influence), session=SessionConfig(feedback_alpha=alpha),
        analysis=AnalysisConfig(search_mode="off"),
    )
    return MemoryStack.from_config(config, clock=FakeClock())


async def _ranking(stack: MemoryStack, dataset_id, influence: float) -> list[str]:
    scope = RetrievalScope(stack.memory, [dataset_id], 15, stack.llm, feedback_influence=influence,
                           feedback_weights=stack._relational.feedback.weights)
    return [item.id for item in await relationship_triplets(QUESTION, scope)]


def test_the_update_and_the_blend_follow_the_documented_formulas():
    assert moved(NEUTRAL_WEIGHT, 1, 0.1) == 0.45 and moved(NEUTRAL_WEIGHT, 5, 0.1) == 0.55 and moved(0.95, 5, 1.0) == 1.0
    assert feedback_blend(0.4, NEUTRAL_WEIGHT, 0.0) == pytest.approx(0.4)
    assert feedback_blend(0.4, 0.0, 0.5) == pytest.approx(0.2 + 1.0) and feedback_blend(0.4, 1.0, 0.5) == pytest.approx(0.2)


async def test_a_negatively_rated_element_ranks_lower_on_the_next_retrieval(tmp_path):
    async with _stack(tmp_path, influence=0.5) as stack:
        remembered = await stack.remember(CURIE)
        [answer] = await stack.recall(QUESTION, "GRAPH_COMPLETION", session_id="s", scope="graph", top_k=1)
        [rated] = answer.raw["context_ids"]
        await stack.improve(dataset=remembered.dataset_id, session_ids=["s"])  # bridge the turn now: the graph stays put below
        before = await _ranking(stack, remembered.dataset_id, 0.5)
        assert rated in before and before.index(rated) < len(before) - 1  # it has somewhere lower to go
        await stack.session.add_feedback("s", answer.raw["qa_id"], "wrong", feedback_score=1)
        turn = (await stack.session.get_session("s"))[0]
        assert turn.memify_metadata["feedback_weights_applied"] is False  # rated, not applied yet
        await stack.improve(dataset=remembered.dataset_id, session_ids=["s"])
        used = [*turn.used_graph_element_ids["node_ids"], *turn.used_graph_element_ids["edge_ids"]]
        weights = await stack._relational.feedback.weights(used)
        assert weights and set(weights.values()) == {0.0}  # alpha 1: straight to the rating 1 -> 0.0
        after = await _ranking(stack, remembered.dataset_id, 0.5)
        assert after.index(rated) > before.index(rated)
        unweighted = RetrievalScope(stack.memory, [remembered.dataset_id], 15, stack.llm)
        assert await _ranking(stack, remembered.dataset_id, 0.0) == [  # influence 0: the plain ranking
            item.id for item in await relationship_triplets(QUESTION, unweighted)
        ]
        [turn] = await stack.session.get_session("s")
        assert turn.memify_metadata["feedback_weights_applied"] is True
        await stack.improve(dataset=remembered.dataset_id, session_ids=["s"])  # applied once: nothing moves again
        assert await stack._relational.feedback.weights(used) == weights


async def test_with_influence_zero_ratings_move_nothing_as_upstream(tmp_path):
    async with _stack(tmp_path, influence=0.0) as stack:
        remembered = await stack.remember(CURIE)
        [answer] = await stack.recall(QUESTION, "GRAPH_COMPLETION", session_id="s", scope="graph")
        await stack.session.add_feedback("s", answer.raw["qa_id"], feedback_score=1)
        await stack.improve(dataset=remembered.dataset_id, session_ids=["s"])
        [turn] = await stack.session.get_session("s")
        used = [*turn.used_graph_element_ids["node_ids"], *turn.used_graph_element_ids["edge_ids"]]
        assert await stack._relational.feedback.weights(used) == {}
        assert turn.memify_metadata["feedback_weights_applied"] is False


@pytest.mark.parametrize("value", [-0.1, 1.5, "high", True])
async def test_a_bad_feedback_influence_is_refused_before_anything_runs(stack, value):
    with pytest.raises(ValidationError, match="feedback_influence must be None or a number from 0 to 1"):
        await stack.recall(QUESTION, session_id="s", feedback_influence=value)
