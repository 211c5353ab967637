"""docs/architecture.md, "Adding a strategy": each of the three ways, done exactly as the doc says, with a merge policy."""

from __future__ import annotations

import pytest

from memlab import MemoryStack
from memlab.config import AnalysisConfig, MergeConfig, StackConfig
from memlab.merge import DualLaneMerge, MergePolicy, identity
from memlab.testing import MergePolicySuite, check, fast_config


class InterleaveMerge(MergePolicy):
    """raw[0], rewrite[0], raw[1], ...: each identity once, at most ``limit`` items."""

    calls = 0

    def fingerprint(self):
        return {"version": 1}

    def _merge(self, raw, rewrite, limit, reserve):
        type(self).calls += 1
        lanes = [list(raw or []), list(rewrite or [])]
        merged, seen = [], set()
        for position in range(max(map(len, lanes))):
            for lane in lanes:
                if position < len(lane):
                    key = identity(lane[position])
                    if key is None or key not in seen:
                        seen.add(key)
                        merged.append(lane[position])
        return merged if limit is None else merged[:limit]


class TestInterleaveMerge(MergePolicySuite):
    """The family's suite, subclassed with the fixture it asks for (ways 1 and 2)."""

    @pytest.fixture
    def merge_policy(self):
        return InterleaveMerge()


async def _dual_query_turns(stack: MemoryStack) -> None:
    await stack.remember("Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris.")
    await stack.search("Who discovered Polonium?", session_id="s")
    await stack.search("And where did she work?", session_id="s")  # a follow-up: the rewrite lane runs, lanes are merged


async def test_way_1_an_object_passed_to_the_stack_is_the_policy_used(tmp_path):
    assert check(InterleaveMerge()).ok
    InterleaveMerge.calls = 0
    config = fast_config(tmp_path, analysis=AnalysisConfig(search_mode="concurrent"))
    async with MemoryStack(config, merge=InterleaveMerge()) as stack:
        assert isinstance(stack.merge, InterleaveMerge)
        await _dual_query_turns(stack)
    assert InterleaveMerge.calls > 0


async def test_way_2_one_map_line_makes_the_name_work(tmp_path, monkeypatch):
    from memlab import config as memlab_config

    monkeypatch.setitem(memlab_config.MERGE_POLICIES, "interleave", f"{__name__}:InterleaveMerge")
    InterleaveMerge.calls = 0
    config = fast_config(tmp_path, merge=MergeConfig(policy="interleave"), analysis=AnalysisConfig(search_mode="concurrent"))
    async with MemoryStack.from_config(config) as stack:
        assert isinstance(stack.merge, InterleaveMerge)
        await _dual_query_turns(stack)
    assert InterleaveMerge.calls > 0
    monkeypatch.setenv("MEMLAB_MERGE_POLICY", "interleave")
    assert StackConfig.from_env().merge.policy == "interleave"


def test_way_3_the_entry_point_recipe_is_the_one_the_plugin_test_installs():
    """Way 3 runs for real in tests/test_plugins.py (a distribution built, pip-installed, used by name); the doc's snippet is its form."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text()
    plugins = (Path(__file__).resolve().parent / "test_plugins.py").read_text()
    assert '[project.entry-points."memlab.merge_policies"]' in doc and '[project.entry-points."memlab.merge_policies"]' in plugins
    for group in ("cache_backends", "ttl_policies", "merge_policies", "session_retrievers", "session_rerankers", "analysis_modes", "embedders"):
        assert f"memlab.{group}" in doc and f'"memlab.{group}"' in plugins


def test_a_grid_varies_the_object_beside_a_built_in():
    from memlab.experiments import Grid, MergeLanes

    grid = Grid(base=fast_config("unused"), vary={"merge": [DualLaneMerge(), InterleaveMerge()]}, workload=MergeLanes(size="tiny"))
    assert [cell.label() for cell in grid.cells] == ["merge=DualLaneMerge()", "merge=InterleaveMerge(version=1)"]
