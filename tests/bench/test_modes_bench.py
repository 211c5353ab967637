"""``memlab bench modes`` at toy size: the conversation, rows per mode, ratio fields, the table, the CLI.

No timing assertions beyond sanity: the speed goals live in the benchmark itself.
"""

from __future__ import annotations

import json
from collections import Counter

from memlab.bench.corpus import synthetic_conversation, synthetic_qa
from memlab.bench.modes import ModesBenchSpec, compare, format_modes_table, run_bench_modes, summary_row
from memlab.cli import main

SPEC = ModesBenchSpec(turns=8, latency_ms=5, documents=10)


def test_conversation_is_seeded_and_mixed() -> None:
    questions = [item.question for item in synthetic_qa(20, seed=0).questions]
    turns = synthetic_conversation(200, questions, seed=0)
    assert turns == synthetic_conversation(200, questions, seed=0) != synthetic_conversation(200, questions, seed=1)
    kinds = Counter(turn.kind for turn in turns)
    assert set(kinds) == {"question", "follow_up", "guidance", "thanks", "correction"} and len(turns) == 200
    assert turns[0].kind == "question" and kinds["question"] >= 60 and kinds["follow_up"] >= 20
    assert all(turn.text in questions for turn in turns if turn.kind == "question")
    assert all(before.kind in ("question", "follow_up") for before, turn in zip(turns, turns[1:]) if turn.kind == "follow_up")
    assert synthetic_conversation(0, questions) == []


async def test_bench_modes_rows_ratios_and_table() -> None:
    rows, turns = await run_bench_modes(SPEC)
    by_mode = {row["mode"]: row for row in rows}
    assert list(by_mode) == ["concurrent", "sequential", "off", "baseline"]
    assert {mode: len(found) for mode, found in turns.items()} == {"concurrent": 8, "sequential": 8, "off": 8}
    for row in rows:
        assert row["turns"] == 8 and row["fallbacks"] == 0 and row["analysis_errors"] == 0
        assert row["median_ms"] >= SPEC.latency_ms and row["p95_ms"] >= row["median_ms"]
        assert row["tokens_in_per_turn"] > 0 and row["tokens_out_per_turn"] > 0
    concurrent, sequential, off, baseline = (by_mode[name] for name in ("concurrent", "sequential", "off", "baseline"))
    assert concurrent["gated"] == off["gated"] == 0 and concurrent["answered"] == 8
    assert concurrent["answer_calls"] == concurrent["analysis_calls"] == sequential["analysis_calls"] == 8
    assert sequential["answer_calls"] == sequential["answered"] == 8 - sequential["gated"]
    assert off["analysis_calls"] == baseline["analysis_calls"] == 0 and off["answer_calls"] == baseline["answer_calls"] == 8
    assert [row["kind"] for row in turns["off"]] == [row["kind"] for row in turns["concurrent"]]  # the same conversation
    assert all("baseline_ms" in row for row in turns["off"]) and not any("baseline_ms" in row for row in turns["concurrent"])
    assert (concurrent["vs"], off["vs"], sequential["vs"], baseline["vs"]) == ("sequential", "baseline", None, None)
    assert concurrent["ratio"] == concurrent["median_ms"] / sequential["median_ms"] and concurrent["target"] == 0.55
    assert off["ratio"] == off["median_ms"] / baseline["median_ms"] and off["passed"] == (off["ratio"] <= off["target"])
    table = format_modes_table(rows, SPEC)
    assert "× sequential" in table and "over baseline" in table and ("PASS" in table or "MISS" in table)
    assert "8 turns" in table and "5 ms per call" in table


def test_compare_needs_both_sides() -> None:
    turn = {"wall_ms": 10.0, "answered": True, "answer_calls": 1, "analysis_calls": 1, "tokens_in": 5, "tokens_out": 2,
            "mode": "concurrent", "requested_mode": "concurrent", "analysis_error": None}
    [row] = compare([summary_row("concurrent", [turn])])
    assert row["ratio"] is None and row["passed"] is None and row["median_ms"] == 10.0


def test_cli_bench_modes(tmp_path, capsys) -> None:
    out = tmp_path / "modes.json"
    code = main(["bench", "modes", "--turns", "3", "--latency-ms", "0", "--modes", "concurrent,off", "--quiet", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "concurrent" in printed and "baseline" in printed and "over baseline" in printed
    document = json.loads(out.read_text())
    assert [row["mode"] for row in document["rows"]] == ["concurrent", "off", "baseline"]
    assert set(document["turns"]) == {"concurrent", "off"} and len(document["turns"]["off"]) == 3
    assert main(["bench", "modes", "--modes", "eager", "--quiet"]) == 2
    assert main(["bench", "modes", "--latency-ms", "-1", "--quiet"]) == 2
