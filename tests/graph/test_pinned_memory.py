"""``PermanentMemory.pinned()``: the view one search call reads through checks each dataset's snapshot once."""

from __future__ import annotations

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."


class _CountedTokens:
    def __init__(self, snapshots) -> None:
        self.calls = 0
        self._token = snapshots.token
        snapshots.token = self

    async def __call__(self, dataset_id):
        self.calls += 1
        return await self._token(dataset_id)


async def test_a_search_turn_checks_the_snapshot_once_per_dataset(stack) -> None:
    await stack.remember(CURIE)
    await stack.search("Who discovered Polonium?", session_id="warm")
    counted = _CountedTokens(stack.memory.snapshots)
    [result] = await stack.search("Who discovered Polonium?", session_id="s")
    assert result.raw["turn"]["lanes"]["merged"]  # it retrieved (two lanes, several graph and vector reads)
    assert counted.calls == 1


async def test_a_pinned_view_reads_one_snapshot_and_sees_this_process_s_writes(stack) -> None:
    dataset_id = (await stack.remember(CURIE)).dataset_id
    view = stack.memory.pinned()
    graph = await view.graph(dataset_id)
    before = graph.number_of_nodes()
    counted = _CountedTokens(stack.memory.snapshots)
    assert await view.graph(dataset_id) is graph and (await view.vectors(dataset_id)) is (await view.vectors(dataset_id))
    assert counted.calls == 0  # checked once, at the view's first read
    await stack.remember("Pierre Curie was born in Paris.")  # the same dataset, changed in this process
    assert (await view.graph(dataset_id)).number_of_nodes() > before
    assert view.root == stack.memory.root  # anything else is the memory's own
