"""Fixtures shared by the retriever tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def graph_reads(stack, monkeypatch) -> list:
    """The dataset ids of every ``stack.memory.graph`` call from now on, in order."""
    reads = []
    graph = stack.memory.graph

    async def counted(dataset_id):
        reads.append(dataset_id)
        return await graph(dataset_id)

    monkeypatch.setattr(stack.memory, "graph", counted)
    return reads
