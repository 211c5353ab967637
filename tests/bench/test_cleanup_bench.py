"""``memlab bench cleanup``: runs small, removes exactly the contaminated turns, prints its table."""

from __future__ import annotations

import json

import pytest

from memlab.bench.cleanup import CleanupBenchSpec, format_cleanup_table, run_bench_cleanup
from memlab.cli import main
from memlab.exceptions import ValidationError


async def test_each_backend_removes_the_contaminated_turns_and_is_timed_beside_its_ceiling():
    spec = CleanupBenchSpec(turns=40, contaminated=7, repeats=2, backends=("memory", "sqlite", "fs"))
    rows = await run_bench_cleanup(spec)
    assert [(row["backend"], row["operation"]) for row in rows] == [
        (backend, op) for backend in spec.backends for op in ("dry run", "cleanup", "backend ops")
    ]
    for row in rows:
        assert row["median_ms"] > 0 and row["min_ms"] <= row["median_ms"] <= row["max_ms"]
        assert row["removed"] == (7 if row["operation"] == "cleanup" else None)
    table = format_cleanup_table(rows, spec)
    assert "a 40-turn session, 7 turns citing the deleted node" in table and "backend ops" in table


def test_the_command_writes_json_and_rejects_bad_sizes(tmp_path, capsys):
    out = tmp_path / "cleanup.json"
    assert main(["bench", "cleanup", "--turns", "20", "--contaminated", "2", "--repeats", "1", "--backends", "memory", "--quiet", "--json", str(out)]) == 0
    assert "memory" in capsys.readouterr().out
    assert {row["operation"] for row in json.loads(out.read_text())["rows"]} == {"dry run", "cleanup", "backend ops"}
    with pytest.raises(ValidationError, match="contaminated"):
        CleanupBenchSpec(turns=5, contaminated=6)
    assert main(["bench", "cleanup", "--turns", "5", "--contaminated", "6", "--quiet"]) == 2
