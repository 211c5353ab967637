"""Experiment 001: cache backend throughput.

Loads ``config.toml`` (or the path given), runs :func:`memlab.bench.cache.bench_cache`
(the code behind ``memlab bench cache``), prints the table and writes
``results/<UTC time>.json`` and ``.txt`` beside this file (gitignored).
"""

from __future__ import annotations

import json
import sys
import tomllib
from datetime import datetime, timezone
from pathlib import Path

from memlab.bench.cache import CacheBenchSpec, environment, format_table, results_document, run_bench_cache

HERE = Path(__file__).resolve().parent


def load_spec(path: Path) -> CacheBenchSpec:
    with path.open("rb") as handle:
        settings = tomllib.load(handle)["bench"]
    return CacheBenchSpec(**settings)


def main(argv: list[str]) -> int:
    config = Path(argv[0]) if argv else HERE / "config.toml"
    spec = load_spec(config)
    rows = run_bench_cache(spec, progress=lambda line: print(f"bench: {line}", file=sys.stderr, flush=True))
    env = environment()
    table = format_table(rows, spec, env)
    print(table)

    results = HERE / "results"
    results.mkdir(exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    document = {**results_document(rows, spec, env), "config": str(config)}
    (results / f"{stamp}.json").write_text(json.dumps(document, indent=2) + "\n")
    (results / f"{stamp}.txt").write_text(table + "\n")
    print(f"\nwrote {results / stamp}.json and .txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
