"""FrameGrid in a real headless Chromium (offline): its own front end, driven by clicks and typing, synced with the Python grid."""

from __future__ import annotations

from memlab.testing.browser import mount_widget, offline_page, settle_widget
from memlab.widgets import FrameGrid, SessionExplorer

async def _texts(page, selector: str) -> list[str]:
    return await page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent.trim())")


async def _info(page) -> str:
    return (await page.text_content(".memlab-grid-info")) or ""


async def test_the_grid_pages_sorts_filters_and_selects_in_a_browser(turns, tmp_path) -> None:
    frame = turns(200)
    grid = FrameGrid(frame, key="qa_id", page_size=25, title="turns")
    picked = []
    grid.on_select(lambda key, row: picked.append(key))
    async with offline_page() as browser:
        page = browser.page
        await mount_widget(browser, grid.widget)
        assert await _texts(page, ".memlab-grid-names th .memlab-grid-name") == list(frame.columns)
        assert len(await page.query_selector_all(".memlab-grid-table tbody tr")) == 25
        assert await _info(page) == "rows 1–25 of 200" and await page.text_content(".memlab-grid-page") == "page 1 of 8"
        assert await _texts(page, "tbody tr:first-child td") == ["qa-000", "question 0 about Polonium", "concurrent", "no", "0.250", "1,000",
                                                                 "0.000", "0", "2"]  # formatted by kind; lanes and ids as counts
        await page.screenshot(path=str(tmp_path / "grid-first-page.png"), full_page=True)

        await page.click("th[data-column='latency_ms']")  # sort ascending, then descending
        await settle_widget(browser)
        assert grid.widget.sort_by == "latency_ms" and not grid.widget.descending
        await page.click("th[data-column='latency_ms']")
        await settle_widget(browser)
        first = await _texts(page, "tbody tr:first-child td")
        assert grid.widget.descending and first[4] == "1,990" == grid.page_rows[0]["latency_ms"]
        assert await page.get_attribute("th[data-column='latency_ms']", "aria-sort") == "descending"

        await page.fill("input[data-column='mode']", "off")  # a column filter, sent after the typing pauses
        await page.wait_for_function("document.querySelector('.memlab-grid-info').textContent.includes('filtered')")
        await settle_widget(browser)
        assert grid.widget.filters == {"mode": "off"} and await _info(page) == "rows 1–25 of 66 (filtered from 200)"
        assert set(await _texts(page, "tbody td:nth-child(3)")) == {"off"}
        assert (await _texts(page, "tbody tr:first-child td"))[0] == "qa-197"  # still sorted: the slowest "off" turn first

        await page.click(".memlab-grid-next")
        await settle_widget(browser)
        assert grid.widget.page == 1 and await page.text_content(".memlab-grid-page") == "page 2 of 3"
        rows = await page.query_selector_all("tbody tr")
        key = await rows[2].get_attribute("data-key")
        await rows[2].click()  # select a row
        await settle_widget(browser)
        assert grid.widget.selected == key and picked == [key]
        assert await page.get_attribute(f"tr[data-key='{key}']", "class") == "memlab-selected"

        await page.keyboard.press("Shift+Tab")  # the row before, by keyboard
        await page.keyboard.press("Enter")
        await settle_widget(browser)
        assert grid.widget.selected != key and picked[-1] == grid.widget.selected

        await page.fill("input[data-column='latency_ms']", "fast")  # a filter that cannot be read is named
        await page.wait_for_function("document.querySelector('.memlab-grid-message').textContent.length > 0")
        assert "latency_ms: use a number" in (await page.text_content(".memlab-grid-message") or "")
        await page.screenshot(path=str(tmp_path / "grid-filtered.png"), full_page=True)
    assert browser.errors == [] and browser.blocked == []
    assert (tmp_path / "grid-first-page.png").stat().st_size > 0


async def test_clicking_a_turn_in_the_session_explorer_opens_its_inspector(chat, tmp_path) -> None:
    """The click-through end to end: a click on a row of the turns grid in Chromium, the explorer's TurnInspector in Python."""
    stack, _, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    async with offline_page() as browser:
        await mount_widget(browser, explorer.turn_grid.widget)
        await browser.page.click(f"tr[data-key='{qa_ids[2]}']")
        await settle_widget(browser)
        await explorer.settle()
        await browser.page.screenshot(path=str(tmp_path / "turns-grid.png"))
    assert explorer.inspector is not None and explorer.inspector.qa_id == qa_ids[2]
    assert explorer.inspector.trace is not None and explorer.inspector_box.children == (explorer.inspector.widget,)
    assert browser.errors == []


async def test_the_static_export_of_a_grid_shows_its_page(turns, tmp_path) -> None:
    """Saved without widget state, a grid is its page as a plain table (the text/html of its mime bundle)."""
    grid = FrameGrid(turns(200), key="qa_id", page_size=10, title="turns")
    grid.filter("mode", "off")
    path = tmp_path / "grid.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{grid.to_html()}</body></html>", encoding="utf-8")
    async with offline_page() as browser:
        await browser.page.goto(path.as_uri())
        header = await _texts(browser.page, "table.memlab-table th")
        cells = await _texts(browser.page, "table.memlab-table tr:nth-child(2) td")
        note = await browser.page.text_content(".memlab-note")
        await browser.page.screenshot(path=str(tmp_path / "grid-static.png"))
    assert header == list(turns().columns) and cells[:3] == ["qa-002", "question 2 about Turing", "off"]
    assert note == "rows 1–10 of 66 (filtered from 200)" and browser.errors == [] and browser.blocked == []
