"""``memlab ui`` end to end: the real command as a subprocess, its page opened by headless Chromium with no network.

The data root is seeded by a real stack: session "notes" (one stored turn), "other" (one
search turn), then "chat" (the most recently active, so the page opens it): 57 turns
written the way a search turn stores them, then three real ``search()`` turns through the
offline LLM, whose lanes and phases the TurnInspector shows. In the browser: the turns
grid's header cells, paging, a sort by a header click, a filter, a click on a turn
opening its lanes and phases, then a reload (the closed page's kernel shut down); no
console error, no request beyond the loopback; screenshots under ``tmp_path``. Ctrl-C
(SIGINT) stops the server and every kernel it started (checked in ``/proc``).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlab import MemoryStack, SearchType
from memlab.testing import fast_config
from memlab.testing.browser import chromium_path, offline_page
from memlab.widgets._session import TURN_GRID_COLUMNS

pytestmark = pytest.mark.slow

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
QUESTIONS = ("Always cite the source.", "Who discovered Polonium?", "And where did she work?")
STORED = 57  # turns written as a search turn stores them: with the real ones, 60 turns, three pages of 25
TURNS = ".memlab-turn-grid"


async def _seed(root: Path) -> None:
    async with MemoryStack.from_config(fast_config(root)) as stack:
        await stack.remember([CURIE, TURING])
        await stack.remember("Alice owns the billing service.", session_id="notes", self_improvement=False)  # a stored turn, no trace
        await stack.search("Where did Alan Turing work?", SearchType.GRAPH_COMPLETION, session_id="other")
        user = await stack.users.default()
        modes = ("concurrent", "sequential", "off")
        for index in range(STORED):
            mode = modes[index % 3]
            meta = {"turn_mode": mode, "turn_requested_mode": mode, "turn_answered": index % 11 != 0, "turn_source": "search",
                    "turn_latency_ms": 100.0 + (index * 37) % 900, "turn_answer_calls": 1, "turn_analysis_calls": int(mode != "off"),
                    "turn_tokens_in": 400 + index, "turn_tokens_out": 40 + index}
            await stack.session_manager.add_qa(str(user.id), f"question {index}: what happened in {1890 + index}?", f"answer {index}",
                                               session_id="chat", memify_metadata=meta)
        for question in QUESTIONS:
            await stack.search(question, SearchType.GRAPH_COMPLETION, session_id="chat")


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from ``/proc``; zombies count as gone)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, pending = set(), [pid]
    while pending:
        for child in parents.get(pending.pop(), []):
            found.add(child)
            pending.append(child)
    return found


def _kernel_process(server: int, kernel_id: str) -> int | None:
    """The live process of kernel ``kernel_id`` under the server ``server`` (its connection file names the id), or None."""
    for child in _children(server):
        try:
            if kernel_id in (Path("/proc") / str(child) / "cmdline").read_bytes().decode(errors="replace"):
                return child
        except OSError:
            continue
    return None


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def _texts(page, selector: str) -> list[str]:
    return await page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent.trim())")


async def _wait_text(page, selector: str, text: str, timeout_ms: float = 30_000) -> None:
    await page.wait_for_function("([s, t]) => (document.querySelector(s)?.textContent || '').includes(t)", arg=[selector, text],
                                 timeout=timeout_ms)


@pytest.fixture
def server(tmp_path):
    """``memlab ui --no-browser --port 0`` on a seeded data root: (process, URL, its stderr file); stopped with SIGINT after the test."""
    chromium_path()  # skip (fail under CI) before the seeding when there is no browser
    root = tmp_path / "lab"
    asyncio.run(_seed(root))
    env = {**os.environ, "EMBEDDING_MODEL": "memlab/hashing", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true",
           "HF_HUB_OFFLINE": "1"}
    env.pop("MEMLAB_DATA_ROOT", None)
    log = tmp_path / "ui.log"
    with log.open("w") as err:
        process = subprocess.Popen([sys.executable, "-m", "memlab", "ui", "--no-browser", "--port", "0", "--data-root", str(root)],
                                   cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        url = None
        while url is None:
            found = re.search(r"at (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops\)", log.read_text())
            url = found.group(1) if found else None
            assert process.poll() is None, f"memlab ui exited with {process.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"memlab ui did not start:\n{log.read_text()}"
            time.sleep(0.2)
        yield process, url, log
    finally:
        kernels = _children(process.pid)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # what Ctrl-C sends
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise AssertionError(f"memlab ui did not stop on SIGINT:\n{log.read_text()}") from None
        for pid in kernels:  # whatever is left: stop it, then fail
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        orphans = [pid for pid in kernels if _alive(pid)]
        for pid in orphans:
            os.kill(pid, signal.SIGKILL)
    assert kernels, "no kernel was seen running under memlab ui"
    assert orphans == [], f"processes left running after Ctrl-C: {orphans}"
    assert process.returncode == 0, f"memlab ui exited with {process.returncode}:\n{log.read_text()}"
    assert "Traceback" not in log.read_text(), log.read_text()


async def test_memlab_ui_pages_sorts_filters_and_opens_a_turns_lanes_and_phases(server, tmp_path) -> None:
    process, url, log = server
    async with offline_page() as browser:
        page = browser.page
        started = time.perf_counter()
        await page.goto(url, timeout=120_000)  # a first request waits for the preheating kernel
        await page.wait_for_selector(f"{TURNS} tbody tr", timeout=120_000)
        first_page_s = time.perf_counter() - started
        await page.screenshot(path=str(tmp_path / "ui-first-page.png"), full_page=True)
        header = await page.text_content(".memlab-ui-header") or ""
        assert "memlab ui" in header and str((tmp_path / "lab").resolve()) in header and "3 sessions" in header
        assert await _texts(page, ".memlab-session-grid tbody tr td:first-child") == ["chat", "other", "notes"]  # the latest first
        assert await page.get_attribute(".memlab-session-grid tbody tr:first-child", "class") == "memlab-selected"

        # the turns grid of the latest session: its header cells, paging
        assert await _texts(page, f"{TURNS} th .memlab-grid-name") == list(TURN_GRID_COLUMNS)
        assert await page.text_content(f"{TURNS} .memlab-grid-info") == "rows 1–25 of 60"
        assert await page.text_content(f"{TURNS} .memlab-grid-page") == "page 1 of 3"
        await page.click(f"{TURNS} .memlab-grid-next")
        await _wait_text(page, f"{TURNS} tbody tr:first-child td:first-child", "26")  # the kernel's page 2, drawn
        assert await page.text_content(f"{TURNS} .memlab-grid-info") == "rows 26–50 of 60"
        assert await page.text_content(f"{TURNS} .memlab-grid-page") == "page 2 of 3"
        assert len(await page.query_selector_all(f"{TURNS} tbody tr")) == 25

        # sorting by a header click: latency, slowest first (a sort goes back to page 1)
        latency = f"{TURNS} th[data-column='latency_ms']"
        await page.click(latency)
        await page.wait_for_function("s => document.querySelector(s).getAttribute('aria-sort') === 'ascending'", arg=latency)
        await page.click(latency)
        assert await page.get_attribute(latency, "aria-sort") == "descending"
        slowest = max(100.0 + (index * 37) % 900 for index in range(STORED))
        await _wait_text(page, f"{TURNS} tbody tr:first-child td:nth-child(6)", f"{slowest:,.0f}")  # the kernel's sorted page, drawn
        assert await page.text_content(f"{TURNS} .memlab-grid-info") == "rows 1–25 of 60"
        shown = [float(text.replace(",", "")) for text in await _texts(page, f"{TURNS} tbody td:nth-child(6)")]
        assert shown == sorted(shown, reverse=True) and shown[0] == slowest

        # a filter: the question column, then the real search turn about Polonium is one click away
        await page.fill(f"{TURNS} input[data-column='question']", "polonium")
        await _wait_text(page, f"{TURNS} .memlab-grid-info", "(filtered from 60)")
        assert await page.text_content(f"{TURNS} .memlab-grid-info") == "rows 1–1 of 1 (filtered from 60)"
        assert await _texts(page, f"{TURNS} tbody td:nth-child(2)") == ["Who discovered Polonium?"]
        await page.click(f"{TURNS} tbody tr:first-child")

        # the TurnInspector: its lanes and phases
        inspector = ".memlab-turn-inspector"
        await page.wait_for_selector(f"{inspector} .memlab-phases table", timeout=60_000)
        for lane, title in (("raw", "raw lane: "), ("rewrite", "rewrite lane: "), ("merged", "merged (what the answer saw): ")):
            heading = await page.text_content(f"{inspector} .memlab-lane-{lane} h4") or ""
            assert heading.startswith(title) and int(heading.removeprefix(title)) > 0, heading  # "raw lane: 5"
            rows = await page.query_selector_all(f"{inspector} .memlab-lane-{lane} tr:has(td)")
            assert len(rows) == int(heading.removeprefix(title))  # one row per element, ranked
        phases = await _texts(page, f"{inspector} .memlab-phases tr td:first-child")
        assert {"load", "retrieve_raw", "retrieve_rewrite", "merge", "answer"} <= set(phases), phases
        assert "Who discovered Polonium?" in (await page.text_content(inspector) or "")
        await page.locator(f"{inspector} .memlab-lane-raw").scroll_into_view_if_needed()  # Voilà's page scrolls inside its body
        await page.screenshot(path=str(tmp_path / "ui-turn-inspector.png"))

        # a reload: a new page on a new kernel, the closed page's kernel shut down (not left running until Ctrl-C)
        kernel_id = await page.evaluate("JSON.parse(document.getElementById('jupyter-config-data').textContent).kernelId")
        assert _kernel_process(process.pid, kernel_id) is not None
        await page.reload(timeout=120_000)
        await page.wait_for_selector(f"{TURNS} tbody tr", timeout=120_000)
        assert await page.text_content(f"{TURNS} .memlab-grid-info") == "rows 1–25 of 60"
        deadline = time.monotonic() + 30
        while _kernel_process(process.pid, kernel_id) is not None:
            assert time.monotonic() < deadline, f"the closed page's kernel {kernel_id} still runs"
            await asyncio.sleep(0.2)
    assert browser.errors == [], browser.errors
    assert browser.blocked == [], browser.blocked
    assert (tmp_path / "ui-first-page.png").stat().st_size > 0 and (tmp_path / "ui-turn-inspector.png").stat().st_size > 0
    print(f"memlab ui: first page of the turns grid {first_page_s:.2f} s after the request")
