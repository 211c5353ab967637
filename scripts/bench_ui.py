"""How long ``memlab ui`` takes to show a 10,000-turn session's first page of turns in a browser.

    PYTHONPATH=. python scripts/bench_ui.py [--turns 10000] [--repeats 5] [--settle 20] [--data-root PATH]

Seeds a throw-away data root (unless ``--data-root`` names one already seeded): a short
session, then session "big" with ``--turns`` turns written the way a search turn stores
them (the most recently active: the page opens it). Starts the real ``memlab ui
--no-browser --port 0`` and opens the page in headless Chromium
(``memlab.testing.browser.offline_page``, no network, a fresh profile each time: no
cached scripts), ``--repeats`` times, ``--settle`` seconds apart so that Voilà has
preheated the next kernel (a page takes the preheated kernel; another is started
after it). Measures, medians:

* ``page``: from the request to the turns grid's first page drawn (rows of the
  10,000-turn session on screen);
* ``html``: from the request to the page's HTML complete: what the kernel does after
  the request (``ExplorerPage.refresh(latest=True)``: the sessions, usage and cost read,
  the 10,000 turns read and their grid built) and Voilà's streaming of the cells;
  the rest of ``page`` is the browser loading Voilà's scripts and the widget managers
  and drawing the widgets;
* ``cached``: ``page`` for a second load in the same browser (its cache holds Voilà's
  scripts: what a researcher reloading the page sees);
* ``cold``: the first request after the server started (its kernel still preheating).

The numbers in ``memlab/ui/__init__.py`` (``FIRST_PAGE_S``) and the README come from a run
of this script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


async def _seed(root: Path, turns: int) -> None:
    from memlab import MemoryStack, SearchType
    from memlab.testing import fast_config

    async with MemoryStack.from_config(fast_config(root)) as stack:
        await stack.remember(["Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."])
        await stack.search("Who discovered Polonium?", SearchType.GRAPH_COMPLETION, session_id="short")
        user = str((await stack.users.default()).id)
        modes = ("concurrent", "sequential", "off")
        for index in range(turns):
            mode = modes[index % 3]
            meta = {"turn_mode": mode, "turn_requested_mode": mode, "turn_answered": index % 11 != 0, "turn_source": "search",
                    "turn_latency_ms": 180.0 + (index * 37) % 900, "turn_answer_calls": 1, "turn_analysis_calls": int(mode != "off"),
                    "turn_tokens_in": 400 + index % 600, "turn_tokens_out": 40 + index % 90}
            await stack.session_manager.add_qa(user, f"question {index}: where did Marie Curie work in {1890 + index % 40}?",
                                               f"answer {index}: Paris", session_id="big", memify_metadata=meta)


async def _load(browser: Any, url: str, turns: int) -> tuple[float, float]:
    page = browser.page
    started = time.perf_counter()
    await page.goto(url, timeout=300_000, wait_until="commit")
    await page.wait_for_function(
        "n => [...document.querySelectorAll('.memlab-turn-grid .memlab-grid-info')].some(e => e.textContent.endsWith(`of ${n}`))"
        " && document.querySelectorAll('.memlab-turn-grid tbody tr').length > 0",
        arg=f"{turns:,}", timeout=300_000, polling=20)
    drawn = time.perf_counter() - started
    html = await page.evaluate("performance.getEntriesByType('navigation')[0].responseEnd") / 1000
    if browser.errors or browser.blocked:
        raise RuntimeError(f"the page reported errors {browser.errors} or blocked requests {browser.blocked}")
    return drawn, html


async def _open(url: str, turns: int, *, reload_after: float | None = None) -> tuple[float, float]:
    """A page load in a fresh browser: (request to the turns grid's first page drawn, request to the HTML complete), seconds.

    ``reload_after``: load once, wait that long, and time the second load instead (the browser's cache warm).
    """
    from memlab.testing.browser import offline_page

    async with offline_page() as browser:
        timed = await _load(browser, url, turns)
        if reload_after is not None:
            await asyncio.sleep(reload_after)
            timed = await _load(browser, url, turns)
        await browser.page.close(run_before_unload=True)  # as a closed tab: Voilà shuts the page's kernel down
    return timed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds between page loads (the next kernel preheats)")
    parser.add_argument("--data-root", type=Path, help="an already seeded data root (its 'big' session has --turns turns)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memlab-bench-ui-") as scratch:
        root = args.data_root
        if root is None:
            root = Path(scratch) / "lab"
            began = time.perf_counter()
            asyncio.run(_seed(root, args.turns))
            print(f"seeded {args.turns:,} turns in {time.perf_counter() - began:.1f} s", file=sys.stderr)
        env = {**os.environ, "EMBEDDING_MODEL": "memlab/hashing"}
        log = Path(scratch) / "ui.log"
        with log.open("w") as err:
            server = subprocess.Popen([sys.executable, "-m", "memlab", "ui", "--no-browser", "--port", "0", "--data-root", str(root)],
                                      env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        try:
            url = None
            while url is None:
                if server.poll() is not None:
                    raise SystemExit(f"memlab ui exited:\n{log.read_text()}")
                found = re.search(r"at (http://\S+/) \(Ctrl-C stops\)", log.read_text())
                url = found.group(1) if found else None
                time.sleep(0.1)
            cold, _ = asyncio.run(_open(url, args.turns))
            samples, cached = [], []
            for _ in range(args.repeats):
                time.sleep(args.settle)
                samples.append(asyncio.run(_open(url, args.turns)))
            for _ in range(args.repeats):
                time.sleep(args.settle)
                cached.append(asyncio.run(_open(url, args.turns, reload_after=args.settle)))
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
    page = statistics.median(drawn for drawn, _ in samples)
    html = statistics.median(done for _, done in samples)
    print(f"memlab ui on a {args.turns:,}-turn session, median of {args.repeats} (CPUs: {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f})")
    print(f"  page: request to the turns grid's first page drawn  {page:.2f} s  (each: {', '.join(f'{d:.2f}' for d, _ in samples)})")
    print(f"  html: request to the page's HTML complete            {html:.2f} s")
    print(f"  cached: the same, the browser's cache warm (a reload) {statistics.median(d for d, _ in cached):.2f} s  "
          f"(each: {', '.join(f'{d:.2f}' for d, _ in cached)})")
    print(f"  cold: the first request, kernel still preheating    {cold:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
