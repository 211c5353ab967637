"""``memlab bench quality --tune``: the rule on a tiny size (hashing embedder), the held-out report, the memo embedder, the bootstrap."""

from __future__ import annotations

import json

import pytest

from memlab.bench.conversations import overlap, synthetic
from memlab.bench.quality import load_dataset, overlap_row
from memlab.bench.quality_tune import (
    HELDOUT_RETRIEVERS,
    HYBRID_GRID,
    MemoEmbedder,
    default_benchmarks,
    format_tune_table,
    hybrid_label,
    tune,
)
from memlab.cli import main
from memlab.embeddings import HashingEmbedder
from memlab.exceptions import ValidationError
from memlab.session.retrievers import HYBRID_V1

#: small enough to be quick, large enough that both splits of both benchmarks have questions
SIZE = 60


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts):
        self.texts.extend(texts)
        return await super().embed(texts)


@pytest.fixture(scope="module")
def benches():
    return default_benchmarks(size=SIZE)


async def test_the_pick_follows_the_rule_and_the_baseline_gains_nothing(benches) -> None:
    grid = [HYBRID_GRID[0], dict(HYBRID_V1), HYBRID_GRID[-1], {**HYBRID_V1, "vectors": "user+turn", "candidates": "all"}]
    result = await tune(benches, grid=grid, embedder=HashingEmbedder(), resamples=200)
    assert result.baseline == HYBRID_V1 and [row["params"] for row in result.dev] == grid
    names = [bench.name for bench in benches]
    baseline_row = result.dev[1]
    assert all(baseline_row["gain"][name] == 0.0 for name in names)  # the evaluation is deterministic
    for row in result.dev:
        assert row["min_gain"] == min(row["gain"][name] for name in names)
    best = max(row["min_gain"] for row in result.dev)
    picked = [row for row in result.dev if row.get("picked")]
    assert len(picked) == 1 and picked[0]["min_gain"] == best and result.pick == picked[0]["params"]
    # held-out: every retriever on every benchmark, intervals around their means
    assert [(row["dataset"], row["retriever"]) for row in result.heldout] == [
        (f"{name}/heldout", label) for name in names for label in (*HELDOUT_RETRIEVERS, "hybrid v1 (baseline)", "hybrid (pick)")
    ]
    for row in result.heldout:
        mean, low, high = row["session_recall_at_5"]
        assert low <= mean <= high and row["questions"] > 0
    assert [row["dataset"] for row in result.paired] == [f"{name}/heldout" for name in names]
    table = format_tune_table(result)
    assert "pick: " + hybrid_label(result.pick) in table and "hybrid (pick)" in table and " *" in table
    assert json.loads(json.dumps(result.to_dict()))["pick"] == result.pick


async def test_ties_go_to_the_larger_mean_gain_then_to_grid_order(benches) -> None:
    twins = [dict(HYBRID_V1), dict(HYBRID_V1)]  # equal on every benchmark
    result = await tune(benches, grid=twins, embedder=HashingEmbedder(), resamples=50)
    assert [bool(row.get("picked")) for row in result.dev] == [True, False]


async def test_only_the_dev_splits_decide_and_every_text_is_embedded_once() -> None:
    from memlab.bench.conversations import Benchmark, split_of

    ours, other = synthetic(0, SIZE), synthetic(1, SIZE)  # the same conversation ids, other contents
    mixed = Benchmark(ours.name, [a if split_of(a.conversation_id) == "dev" else b for a, b in zip(ours.conversations, other.conversations)])
    embedder = CountingEmbedder()
    first = await tune([ours], grid=HYBRID_GRID[:3], embedder=embedder, resamples=50)
    second = await tune([mixed], grid=HYBRID_GRID[:3], embedder=HashingEmbedder(), resamples=50)
    assert first.dev == second.dev and first.pick == second.pick  # another held-out part changes nothing before the pick
    assert first.heldout != second.heldout
    assert len(embedder.texts) == len(set(embedder.texts)) == first.embedded_texts  # the memo asks for each text once


async def test_a_benchmark_with_an_empty_split_is_refused() -> None:
    with pytest.raises(ValidationError, match="splits both need questions"):
        await tune([synthetic(size=6)], grid=HYBRID_GRID[:1], embedder=HashingEmbedder())
    with pytest.raises(ValidationError, match="k = 5"):
        await tune([synthetic(size=SIZE)], grid=HYBRID_GRID[:1], embedder=HashingEmbedder(), ks=(1, 10))


async def test_memo_embedder_returns_the_wrapped_vectors() -> None:
    inner = CountingEmbedder()
    memo = MemoEmbedder(inner)
    first = await memo.embed(["a b", "c d", "a b"])
    second = await memo.embed(["c d"])
    assert inner.texts == ["a b", "c d"] and memo.embedded == 2 and (memo.name, memo.dim) == (inner.name, inner.dim)
    assert (first[0] == first[2]).all() and (second[0] == first[1]).all() and (first == await inner.embed(["a b", "c d", "a b"])).all()
    assert (await memo.embed([])).shape == (0, inner.dim)


def test_cli_tune_on_a_tiny_size(tmp_path, capsys) -> None:
    out = tmp_path / "tune.json"
    argv = ["bench", "quality", "--tune", "--dataset", f"synthetic:0:{SIZE}", "--dataset", f"overlap:0:{SIZE}", "--embedder", "memlab/hashing"]
    assert main([*argv, "--resamples", "100", "--quiet", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "rule: pick = argmax" in table and "held-out" in table and "pick - baseline (paired)" in table and "lexical overlap" in table
    document = json.loads(out.read_text())
    assert len(document["dev"]) == len(HYBRID_GRID) and document["pick"] in [row["params"] for row in document["dev"]]
    assert [row["dataset"] for row in document["overlap"]] == [f"synthetic-seed0-{SIZE}", f"overlap-seed0-{SIZE}"]


@pytest.mark.parametrize(
    "argv",
    [["--split", "dev"], ["--retrievers", "bm25"], ["--dataset", "synthetic:0:6"], ["--dataset", "synthetic:x"]],
    ids=["split", "retrievers", "empty-split", "bad-seed"],
)
def test_cli_tune_usage_errors(argv, capsys) -> None:
    assert main(["bench", "quality", "--tune", *argv, "--embedder", "memlab/hashing", "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("memlab: error:")


def test_cli_one_dataset_without_tune(capsys) -> None:
    assert main(["bench", "quality", "--dataset", "synthetic", "--dataset", "overlap", "--scale", "0", "--quiet"]) == 2
    assert "unless --tune" in capsys.readouterr().err


def test_load_dataset_sizes_and_the_overlap_row() -> None:
    assert load_dataset("overlap:3:12").name == "overlap-seed3-12" and load_dataset("overlap").name == "overlap-seed0-600"
    row = overlap_row(overlap(size=60))
    assert row["questions"] == 50 and 0 < row["mean"] < 1 and row["p10"] <= row["p50"] <= row["p90"]
    assert row["echo_mean"] > row["paraphrase_mean"]
    assert overlap_row(synthetic(size=60))["echo_mean"] is None  # the synthetic questions are all paraphrases
