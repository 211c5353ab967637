"""``memlab bench usage``: both stacks run the conversation, the tracked one records every call."""

from __future__ import annotations

from memlab.bench.usage import UsageBenchSpec, format_usage_table, run_bench_usage


async def test_the_tracked_stack_records_usage_and_the_table_judges_the_overhead():
    spec = UsageBenchSpec(turns=8, documents=10, block=4)
    rows = await run_bench_usage(spec)
    tracked, untracked, overhead = rows
    assert (tracked["name"], untracked["name"], overhead["name"]) == ("tracked", "untracked", "overhead")
    assert tracked["turns"] == untracked["turns"] == 8 and tracked["median_ms"] > 0 and untracked["median_ms"] > 0
    assert overhead["recorded_calls"] >= 8 and overhead["write_ms"] > 0  # every turn's calls were written
    table = format_usage_table(rows, spec)
    assert "overhead (tracked - untracked)" in table and ("PASS" in table or "MISS" in table)
