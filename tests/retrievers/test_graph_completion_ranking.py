"""Graph-completion context: the ranking that builds only the kept items equals the one that builds every candidate.

``relationship_triplets`` ranks vector-hit triplets and the relationship edges of the nearest entities
(best score per id, ties in first-appearance order) and, without feedback weights, builds items only for
the ``top_k`` it keeps; here it is compared with the reference that builds every candidate first.
"""

from __future__ import annotations

import pytest

from memlab.bench.corpus import synthetic_qa
from memlab.retrievers import RetrievalScope
from memlab.retrievers._base import best_per_id
from memlab.retrievers._graph_completion import candidate_triplets, relationship_triplets


async def _reference(query: str, scope: RetrievalScope) -> list:
    return best_per_id(await candidate_triplets(query, scope))[: scope.top_k]  # builds every candidate, then ranks


@pytest.mark.parametrize("top_k", [1, 3, 15, 60])
async def test_kept_items_equal_the_reference_ranking(stack, top_k) -> None:
    corpus = synthetic_qa(12, seed=3)
    dataset_id = (await stack.remember(list(corpus.documents))).dataset_id
    for question in [item.question for item in corpus.questions][:8] + ["", "zzz nothing matches", "and what about it?"]:
        scope = RetrievalScope(stack.memory, [dataset_id], top_k, stack.llm)
        got = await relationship_triplets(question, scope)
        want = await _reference(question, RetrievalScope(stack.memory, [dataset_id], top_k, stack.llm))
        assert [item.model_dump() for item in got] == [item.model_dump() for item in want]


async def test_memoised_element_fields_follow_graph_changes(stack) -> None:
    corpus = synthetic_qa(6, seed=1)
    first = await stack.remember(list(corpus.documents[:3]))
    question = corpus.questions[0].question
    before = await relationship_triplets(question, RetrievalScope(stack.memory, [first.dataset_id], 15, stack.llm))
    await stack.remember(list(corpus.documents[3:]))  # the same dataset grows: new supporters, new edges
    scope = RetrievalScope(stack.memory, [first.dataset_id], 15, stack.llm)
    assert [item.model_dump() for item in await relationship_triplets(question, scope)] == [
        item.model_dump() for item in await _reference(question, RetrievalScope(stack.memory, [first.dataset_id], 15, stack.llm))
    ]
    assert before  # the first ranking found something to compare against
