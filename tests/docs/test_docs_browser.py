"""The docs site in a real headless Chromium that can reach nothing but the loopback (issue 28, deliverable 5).

The site is the one ``make docs`` built (``site/``, when its stamp says it was built from the
checkout's current inputs), else one this module builds in its temporary directory with
``scripts/docs_build.py`` (minutes: the notebooks run first; hence ``slow``). A local HTTP server
serves it; each page must load with no console error and without asking for anything beyond the
loopback (``memlab.testing.browser.offline_page`` blocks and records such requests), and show
what a reader looks for. Screenshots go to the test's temporary directory.
"""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlab.testing.browser import offline_page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, docs_build) -> Path:
    """A built site: ``site/`` when fresh, else a new build."""
    if docs_build.site_is_fresh():
        return docs_build.SITE
    target = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs_build.py"), "--site-dir", str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=3600,
    )
    assert done.returncode == 0, f"the docs build failed\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return target


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The site's base URL on a local HTTP server."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _clean(browser) -> None:
    assert browser.errors == [], browser.errors
    assert browser.blocked == [], browser.blocked  # nothing from a CDN, no fonts, no analytics


async def test_the_home_page_is_the_readme_with_the_site_around_it(served, tmp_path):
    async with offline_page() as browser:
        page = browser.page
        await page.goto(f"{served}/")
        await page.wait_for_selector("article h1")
        heading = await page.inner_text("article h1")
        article = await page.inner_text("article")
        nav = await page.inner_text("nav.md-nav--primary")
        # a relative link of the README leads to its page on the site
        await page.click("article a[href$='notebooks/01_quickstart/']")
        await page.wait_for_selector(".jupyter-wrapper")
        notebook_title = await page.title()
        await page.goto(f"{served}/")
        # the search index is built in the page (a web worker): no search service
        await page.click("label.md-search__icon, .md-search__input")
        await page.fill("input.md-search__input", "SessionExplorer")
        await page.wait_for_selector(".md-search-result__item", timeout=30_000)
        hits = await page.eval_on_selector_all(".md-search-result__item", "items => items.length")
        await page.screenshot(path=tmp_path / "home.png")
    _clean(browser)
    assert heading.strip().startswith("memlab")
    assert "Jupyter-first research toolkit for agent memory" in article
    assert "MemoryStack.from_config" in article and "make test" in article  # the quickstart and the two commands
    for section in ("Notebooks", "API reference"):
        assert section in nav
    assert "Quickstart" in notebook_title
    assert hits >= 1


async def test_a_notebook_page_renders_its_explorers_from_the_stored_widget_state(served, tmp_path):
    async with offline_page() as browser:
        page = browser.page
        await page.goto(f"{served}/notebooks/09_explorers/")
        # the anywidget grid (memlab's FrameGrid) drawn by its own front end from the stored state
        await page.wait_for_selector(".memlab-grid-table tbody tr", timeout=60_000)
        # ipywidgets' standard controls (SessionExplorer's user and session dropdowns) drawn by html-manager
        await page.wait_for_selector(".widget-dropdown select", timeout=60_000)
        await page.wait_for_selector(".js-plotly-plot", timeout=60_000)  # ModeComparison's interactive chart
        options = await page.eval_on_selector_all(
            ".widget-dropdown select option", "options => options.map(o => o.textContent.replace(/\\s+/g, ' '))"
        )
        headers = await page.eval_on_selector_all(".memlab-grid-table thead .memlab-grid-name", "cells => cells.map(c => c.textContent)")
        cells = await page.eval_on_selector_all(".memlab-grid-table tbody td", "cells => cells.map(c => c.textContent)")
        grid = page.locator(".memlab-grid").first
        await grid.scroll_into_view_if_needed()
        await page.screenshot(path=tmp_path / "notebook-explorers.png")
        await grid.screenshot(path=tmp_path / "notebook-grid.png")
    _clean(browser)
    sessions = {option.split(" · ")[0] for option in options if " · " in option}  # "chat · running"
    assert {"chat", "lab"} <= sessions, options  # the notebook's two sessions
    assert "question" in headers
    assert any("Who discovered Polonium?" in cell for cell in cells)


async def test_the_api_reference_shows_signatures_from_the_docstrings(served, tmp_path):
    async with offline_page() as browser:
        page = browser.page
        await page.goto(f"{served}/reference/memlab.merge/")
        await page.wait_for_selector("#memlab.merge._dual_lane.conversational_reserve, [id='memlab.merge._dual_lane.conversational_reserve']")
        signatures = await page.eval_on_selector_all(".doc-signature", "nodes => nodes.map(n => n.textContent.replace(/\\s+/g, ' ').trim())")
        body = await page.inner_text("article")
        await page.screenshot(path=tmp_path / "api-reference.png")
    _clean(browser)
    assert "conversational_reserve(limit: int | None) -> int" in signatures, signatures
    assert any(signature.startswith("merge(raw: Sequence[Any] | None, rewrite:") for signature in signatures), signatures
    assert "Merge policies" in body and "DualLaneMerge" in body  # the package docstring, a class heading


async def test_every_notebook_page_loads_offline_without_a_console_error(served, site):
    """Each executed notebook's page (its outputs, charts, any widget state) loads without an error or a request beyond the loopback."""
    pages = sorted(path.parent.name for path in (site / "notebooks").glob("*/index.html"))
    assert len(pages) == len(list((ROOT / "notebooks").glob("*.ipynb")))
    seen: dict[str, tuple[list, list]] = {}
    async with offline_page() as browser:
        for name in pages:
            errors, blocked = len(browser.errors), len(browser.blocked)
            await browser.page.goto(f"{served}/notebooks/{name}/", wait_until="networkidle")
            await browser.page.wait_for_selector(".jupyter-wrapper .jp-Cell")
            if await browser.page.query_selector("script[type='application/vnd.jupyter.widget-state+json']"):
                await browser.page.wait_for_selector(".jupyter-widgets", timeout=60_000)  # the renderer ran
            seen[name] = (browser.errors[errors:], browser.blocked[blocked:])
    assert {name: found for name, found in seen.items() if found != ([], [])} == {}
