"""``memlab bench turn`` at toy size: the table's shape, phases that partition each turn, the CLI.

No timing thresholds: the speed goals live in the benchmark itself.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from memlab.bench.turn import EXTERNAL, PHASES, PhaseClock, TurnBenchSpec, format_turn_table, run_bench_turn
from memlab.cli import main
from memlab.testing.suppliers import server_url

TINY = TurnBenchSpec(turns=6, documents=8, block=2, warm_up=2, cold=False)
NAMES = [name for name, _ in PHASES]
SUMMARY = ["total", "total (uninstrumented)", "llm + embedder", "memlab own overhead"]


def _check_setup(setup: dict, spec: TurnBenchSpec) -> None:
    rows = setup["rows"]
    assert [row["name"] for row in rows] == SUMMARY + NAMES
    assert setup["turns"] == setup["plain_turns"] == spec.turns
    by_name = {row["name"]: row for row in rows}
    for row in rows:
        assert row["median_us"] >= 0 and row["p90_us"] >= row["median_us"] * 0.999 and row["mean_us"] >= 0
    assert by_name["total"]["median_us"] > 0 and by_name["total (uninstrumented)"]["median_us"] > 0
    assert by_name["llm"]["median_us"] > 0 and by_name["embedder"]["median_us"] > 0  # both were timed in every turn
    assert by_name["retrieval"]["median_us"] > 0 and by_name["store turn"]["median_us"] > 0 and by_name["history load"]["median_us"] > 0
    # the phases partition each turn: their sum is the turn's wall-clock (to rounding), so the means add up too
    per_turn = setup["per_turn"]
    for charged, total in zip(per_turn["phased"], per_turn["totals"]):
        assert set(charged) <= set(NAMES) | {None}
        assert sum(charged.values()) == pytest.approx(total, rel=0.01)
    mean_of_phases = sum(by_name[name]["mean_us"] for name in NAMES)
    assert mean_of_phases == pytest.approx(by_name["total"]["mean_us"], rel=0.01)
    external = sum(by_name[name]["mean_us"] for name in EXTERNAL)
    assert by_name["memlab own overhead"]["mean_us"] == pytest.approx(by_name["total"]["mean_us"] - external, rel=0.01)


async def test_bench_turn_rows_add_up_and_the_table_shows_every_phase() -> None:
    result = await run_bench_turn(TINY)
    assert [setup["metadata"] for setup in result["setups"]] == ["sqlite"] and result["cold"] is None
    _check_setup(result["setups"][0], TINY)
    table = format_turn_table(result, TINY)
    for name in SUMMARY + NAMES:
        assert f"\n{name} " in table
    assert "sqlite median µs" in table and "postgres metadata: skipped" in table


async def test_bench_turn_with_postgres_metadata() -> None:
    spec = TurnBenchSpec(turns=4, documents=6, block=2, warm_up=1, cold=False, postgres_url=server_url("MEMLAB_TEST_POSTGRES_URL"))
    result = await run_bench_turn(spec)
    assert [setup["metadata"] for setup in result["setups"]] == ["sqlite", "postgres"]
    for setup in result["setups"]:
        _check_setup(setup, spec)
    assert "postgres median µs" in format_turn_table(result, spec)


async def test_phase_clock_charges_concurrent_tasks_to_their_own_phases() -> None:
    clock = PhaseClock()

    async def busy(phase: str, spins: int) -> None:
        with clock.phase(phase):
            for _ in range(spins):
                sum(range(2000))
                await asyncio.sleep(0)

    with clock.installed():
        await asyncio.sleep(0)
        with clock.phase("outer"):
            clock.start()
            await asyncio.gather(busy("a", 20), busy("b", 20))
            charged = clock.stop()
    assert set(charged) <= {"outer", "a", "b", None}
    assert charged["a"] > 0 and charged["b"] > 0
    assert charged["a"] + charged["b"] > 0.5 * sum(charged.values())


def test_phase_clock_is_inert_when_not_started() -> None:
    clock = PhaseClock()
    wrapped = clock.wrap(lambda x: x + 1, "a")
    assert wrapped(1) == 2 and clock.charged == {}


def test_cli_bench_turn_json(tmp_path, capsys) -> None:
    out = tmp_path / "turn.json"
    assert main(["bench", "turn", "--turns", "4", "--documents", "6", "--block", "2", "--no-cold", "--quiet", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "memlab own overhead" in printed and "retrieval" in printed
    document = json.loads(out.read_text())
    assert [row["name"] for row in document["setups"][0]["rows"]] == SUMMARY + NAMES


def test_cold_start_runs_in_a_fresh_interpreter() -> None:
    from memlab.bench.turn import cold_start

    cold = cold_start(TINY)
    assert list(cold) == ["import memlab", "build + open stack", "first remember (1 document)", "first search() turn", "second search() turn"]
    assert all(seconds > 0 for seconds in cold.values())
