"""How long the turns grid takes to show its first page on a 10,000-turn session (and to re-sort, filter, page).

    PYTHONPATH=. python scripts/bench_grid.py [--turns 10000] [--repeats 5]

Writes ``--turns`` traced turns into one session of a throw-away stack (the fast hashing
embedder; the turns carry the metadata a search turn stores), then measures, each the
median of ``--repeats``:

* ``load``: ``SessionExplorer.refresh()`` (reads the session's entries, usage and
  guidance from the SQLite cache, then builds the grid): what opening the explorer costs;
* ``kernel first page``: from the entries in memory to the grid's first page ready to
  send (``turn_frame()`` plus ``FrameGrid(...)``: normalising the frame, formatting 25 rows);
* ``browser first page``: the grid's front end drawing that page in headless Chromium
  (``memlab.testing.browser.mount_widget``; needs chromium and playwright, skipped without);
* sort, filter, search and next page: the kernel's recompute of the page after each,
  and the browser round trip of a header click (the click, the kernel's answer, the page redrawn).

The numbers in ``memlab/widgets/_grid.py`` (``FIRST_PAGE_MS``) and docs/research.md come from a
run of this script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def _timed(repeats: int, work: Callable[[], Awaitable[Any]]) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        await work()
        samples.append(time.perf_counter() - started)
    return _median_ms(samples)


def _timed_sync(repeats: int, work: Callable[[], Any]) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        samples.append(time.perf_counter() - started)
    return _median_ms(samples)


async def _write_turns(stack: Any, turns: int) -> None:
    user = await stack.users.default()
    manager = stack.session_manager
    modes = ("concurrent", "sequential", "off")
    for index in range(turns):
        mode = modes[index % 3]
        meta = {"turn_mode": mode, "turn_requested_mode": mode, "turn_answered": index % 11 != 0, "turn_latency_ms": 180.0 + (index * 37) % 900,
                "turn_answer_calls": 1, "turn_analysis_calls": 0 if mode == "off" else 1, "turn_tokens_in": 400 + index % 600,
                "turn_tokens_out": 40 + index % 90, "turn_source": "search"}
        await manager.add_qa(str(user.id), f"question {index}: where did Marie Curie work in {1890 + index % 40}?", f"answer {index}: Paris",
                             session_id="big", used_graph_element_ids={"node_ids": ["n1", "n2"], "edge_ids": ["e1"]}, memify_metadata=meta)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    from memlab import MemoryStack
    from memlab.testing import fast_config
    from memlab.widgets import FrameGrid, SessionExplorer
    from memlab.widgets._session import TURN_GRID_COLUMNS

    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="memlab-bench-grid-") as root:
        async with MemoryStack.from_config(fast_config(root)) as stack:
            began = time.perf_counter()
            await _write_turns(stack, args.turns)
            print(f"wrote {args.turns:,} turns in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            explorer = SessionExplorer(stack, session_id="big")
            load = await _timed(args.repeats, explorer.refresh)
            assert explorer.turn_grid.widget.count == args.turns
            frame_ms = _timed_sync(args.repeats, explorer.turn_frame)
            frame = explorer.turn_frame()
            first_ms = _timed_sync(args.repeats, lambda: FrameGrid(frame, key="qa_id", columns=TURN_GRID_COLUMNS))
            grid = FrameGrid(frame, key="qa_id", columns=TURN_GRID_COLUMNS)
            sort_ms = _timed_sync(args.repeats, lambda: (grid.sort("latency_ms", descending=True), grid.sort(None)))
            filter_ms = _timed_sync(args.repeats, lambda: (grid.filter("mode", "seq"), grid.filter("mode", None)))
            number_ms = _timed_sync(args.repeats, lambda: (grid.filter("latency_ms", "300..500"), grid.filter("latency_ms", None)))
            search_ms = _timed_sync(args.repeats, lambda: (grid.search("curie work in 1899"), grid.search("")))
            page_ms = _timed_sync(args.repeats, lambda: grid.go_to(grid.widget.page + 1))
            rows += [
                ("load: SessionExplorer.refresh() (read the session, build the grid)", f"{load:,.0f} ms"),
                ("kernel first page: turn_frame() + FrameGrid(...)", f"{frame_ms + first_ms:,.0f} ms ({frame_ms:,.0f} + {first_ms:,.0f})"),
                ("kernel: sort by latency_ms and back (two pages)", f"{sort_ms:,.1f} ms"),
                ("kernel: filter mode contains 'seq' and clear", f"{filter_ms:,.1f} ms"),
                ("kernel: filter latency_ms 300..500 and clear", f"{number_ms:,.1f} ms"),
                ("kernel: search the text columns and clear", f"{search_ms:,.1f} ms"),
                ("kernel: next page", f"{page_ms:,.1f} ms"),
            ]
            rows += await _browser(grid, args.repeats)
    width = max(len(label) for label, _ in rows)
    print(f"turns grid on a {args.turns:,}-turn session, median of {args.repeats} (CPUs: {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f})")
    for label, value in rows:
        print(f"  {label.ljust(width)}  {value}")
    return 0


async def _browser(grid: Any, repeats: int) -> list[tuple[str, str]]:
    from memlab.testing import browser as chromium

    try:
        chromium.chromium_path()
        import playwright  # noqa: F401
    except BaseException as exc:  # the skip/missing helper raises pytest's Skipped outside CI
        return [("browser", f"skipped: {exc}")]
    first, rounds = [], []
    for _ in range(repeats):
        async with chromium.offline_page() as page:
            started = time.perf_counter()
            await chromium.mount_widget(page, grid.widget)
            await page.page.wait_for_selector(".memlab-grid-table tbody tr")
            first.append(time.perf_counter() - started)
            started = time.perf_counter()
            await page.page.click("th[data-column='latency_ms']")  # sends the sort; the answer redraws the page
            await chromium.settle_widget(page)
            rounds.append(time.perf_counter() - started)
            assert grid.widget.sort_by == "latency_ms"
            grid.sort(None)
            if page.errors:
                raise RuntimeError(f"the page reported errors: {page.errors}")
    return [
        ("browser first page: load the page + module, draw page 1", f"{_median_ms(first):,.0f} ms"),
        ("browser: header click to the re-sorted page drawn (round trip)", f"{_median_ms(rounds):,.0f} ms"),
    ]


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
