"""The four shipped workloads, each once on a tiny size on real stacks, through a Grid."""

from __future__ import annotations

import pandas as pd
import pytest

from memlab.config import CacheConfig, EmbeddingConfig, StackConfig
from memlab.exceptions import ValidationError
from memlab.experiments import (
    TIMING_UNITS,
    CacheWorkload,
    ConversationalBenchmark,
    Grid,
    MergeLanes,
    ModesConversation,
    is_timing,
)

BASE = StackConfig(embedding=EmbeddingConfig(model="memlab/hashing"), cache=CacheConfig(backend="memory"))

MODES_METRICS = [
    "turns", "answered", "gated", "fallbacks", "analysis_errors", "latency_p50_ms", "latency_p95_ms", "wall_s", "llm_calls",
    "answer_calls", "analysis_calls", "tokens_in", "tokens_out", "tokens_per_turn", "guidance_written", "hit_rate",
]


def _metrics(frame: pd.DataFrame, cell: int, seed: int = 0) -> dict[str, float]:
    rows = frame[(frame["cell"] == cell) & (frame["seed"] == seed)]
    assert (rows["status"] == "ok").all(), rows["error"].dropna().tolist()
    return {metric: (None if pd.isna(value) else value) for metric, value in zip(rows["metric"], rows["value"])}


def _deterministic(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[~frame["unit"].isin(TIMING_UNITS)].reset_index(drop=True)


async def test_modes_conversation_reports_its_metrics_per_mode_and_is_reproducible():
    workload = ModesConversation(turns=8, documents=8)
    grid = Grid(BASE, {"analysis.search_mode": ["concurrent", "sequential", "off"]}, workload, seeds=[0, 1])
    frame = await grid.run(progress=False)
    assert (frame["workload"] == "modes").all()
    for cell, mode in enumerate(["concurrent", "sequential", "off"]):
        for seed in (0, 1):
            metrics = _metrics(frame, cell, seed)
            assert list(metrics) == MODES_METRICS
            assert metrics["turns"] == 8 and metrics["answered"] + metrics["gated"] == 8
            assert metrics["llm_calls"] == metrics["answer_calls"] + metrics["analysis_calls"]
            assert metrics["answer_calls"] == metrics["answered"]
            assert metrics["tokens_per_turn"] == pytest.approx((metrics["tokens_in"] + metrics["tokens_out"]) / 8)
            assert 0.0 <= metrics["hit_rate"] <= 1.0
            assert metrics["latency_p50_ms"] <= metrics["latency_p95_ms"] and metrics["wall_s"] > 0
            if mode == "sequential":
                assert metrics["analysis_calls"] == 8
            if mode == "off":
                assert metrics["analysis_calls"] == 0 and metrics["gated"] == 0 and metrics["guidance_written"] == 0
    units = dict(zip(frame["metric"], frame["unit"]))
    assert {name for name, unit in units.items() if is_timing(unit)} == {"latency_p50_ms", "latency_p95_ms", "wall_s"}

    turns = grid.frame("turn")
    assert list(turns.columns)[4:] == ["turn", "kind", "wall_ms", "mode", "answered", "answer_calls", "analysis_calls", "tokens_in",
                                      "tokens_out", "hit"]
    assert len(turns) == 3 * 2 * 8
    asking = turns["kind"].isin(["question", "follow_up"])
    assert turns.loc[asking, "hit"].notna().all() and turns.loc[~asking, "hit"].isna().all()
    assert str(turns["hit"].dtype) == "boolean" and str(turns["tokens_in"].dtype) == "Int64"

    again = await Grid(BASE, {"analysis.search_mode": ["concurrent", "sequential", "off"]}, workload, seeds=[0, 1]).run(progress=False)
    pd.testing.assert_frame_equal(_deterministic(frame), _deterministic(again))


@pytest.mark.parametrize("operation", ["append", "read_last_10", "recall"])
async def test_cache_workload_on_each_backend(operation):
    grid = Grid(BASE, {"cache.backend": ["memory", "sqlite"], "session.retriever": ["keyword"]}, CacheWorkload(operation, n=30), seeds=[0])
    frame = await grid.run(progress=False)
    assert (frame["workload"] == "cache").all()
    for cell in (0, 1):
        metrics = _metrics(frame, cell)
        assert list(metrics) == ["ops_per_s", "p50_us", "p95_us", "n"]
        assert metrics["n"] == 30 and metrics["ops_per_s"] > 0 and 0 < metrics["p50_us"] <= metrics["p95_us"]
    assert dict(zip(frame["metric"], frame["unit"])) == {"ops_per_s": "ops/s", "p50_us": "us", "p95_us": "us", "n": "ops"}
    assert grid.frame("turn").empty


async def test_conversational_benchmark_reports_summary_metrics_and_per_category_ones():
    workload = ConversationalBenchmark(size="tiny", ks=(5, 10))
    grid = Grid(BASE, {"session.retriever": ["keyword", "bm25"]}, workload, seeds=[0])
    frame = await grid.run(progress=False)
    from memlab.bench.conversations import CATEGORIES

    for cell in (0, 1):
        metrics = _metrics(frame, cell)
        assert list(metrics) == workload.metric_names(list(CATEGORIES))
        assert {"session_recall_at_5", "turn_recall_at_10", "hit_at_5", "hit_at_10", "mrr", "p50_ms", "p95_ms"} <= set(metrics)
        assert metrics["questions"] == 12 and metrics["answerable"] == 10
        for name, value in metrics.items():
            if name.split("/")[0] in ("session_recall_at_5", "turn_recall_at_5", "hit_at_5", "hit_at_10", "mrr", "no_result_rate"):
                assert value is None or 0.0 <= value <= 1.0, name
        assert metrics["hit_at_5"] <= metrics["hit_at_10"]
        assert metrics["hit_at_5/abstention"] is None and metrics["no_result_rate/abstention"] is not None
        assert metrics["mrr_lo"] <= metrics["mrr"] <= metrics["mrr_hi"]  # each overall metric's bootstrap interval
        assert metrics["session_recall_at_5_lo"] <= metrics["session_recall_at_5"] <= metrics["session_recall_at_5_hi"]
    assert "mrr_lo" not in ConversationalBenchmark(size="tiny", resamples=0).metric_names(list(CATEGORIES))
    turns = grid.frame("turn")
    assert len(turns) == 24 and str(turns["abstention"].dtype) == "boolean" and str(turns["hit_at_5"].dtype) == "Float64"
    assert not any(dtype == object for dtype in turns.dtypes)
    limited = await Grid(BASE, {}, ConversationalBenchmark(size="tiny", limit=3, cache="stack"), seeds=[0]).run(progress=False)
    assert _metrics(limited, 0)["questions"] == 3
    with pytest.raises(ValidationError):
        ConversationalBenchmark(size="huge")
    with pytest.raises(ValidationError):
        ConversationalBenchmark(cache="nowhere")


async def test_merge_lanes_scores_each_lane_of_each_merge_policy():
    grid = Grid(BASE, {"merge.policy": ["dual_lane", "raw_only"]}, MergeLanes(size="tiny", limit=6, k=5), seeds=[0])
    frame = await grid.run(progress=False)
    assert (frame["workload"] == "merge_lanes").all()
    found = {}
    for cell in (0, 1):
        metrics = _metrics(frame, cell)
        assert list(metrics) == ["evidence_hit_at_5", "raw_hit_at_5", "rewrite_hit_at_5", "mrr", "questions", "rewrite_questions", "documents",
                                 "search_p50_ms", "search_p95_ms"]
        assert metrics["questions"] == 5  # one conversation's six questions, the abstention one not scored
        assert 1 <= metrics["rewrite_questions"] <= 4  # the first question has no rewrite lane
        assert metrics["documents"] > 0
        for name in ("evidence_hit_at_5", "raw_hit_at_5", "rewrite_hit_at_5", "mrr"):
            assert 0.0 <= metrics[name] <= 1.0
        found[cell] = metrics
    assert found[1]["evidence_hit_at_5"] == found[1]["raw_hit_at_5"]  # raw_only: the merged lane is the raw lane
    assert found[0]["raw_hit_at_5"] == found[1]["raw_hit_at_5"]  # the raw lane does not depend on the policy
    turns = grid.frame("turn")
    assert len(turns) == 12 and set(turns["mode"]) == {"concurrent"}
    assert turns.loc[turns["abstention"], ["hit", "raw_hit", "rewrite_hit"]].isna().all().all()
    assert turns.groupby("cell")["rewrite_hit"].apply(lambda column: column.iloc[0] is pd.NA).all()
    with pytest.raises(ValidationError):
        MergeLanes(mode="sometimes")
    with pytest.raises(ValidationError):
        MergeLanes(search_type="NOT_A_TYPE")
