"""The ``memlab demo`` HTML report: the machine first, tables formatted by kind that scroll in their own box, charts; and in Chromium."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from memlab.demo import ModeDemoSpec, run_mode_demo, write_report
from memlab.testing import fast_config
from memlab.testing.browser import offline_page


def test_tables_are_formatted_by_kind_and_scroll_inside_their_box(tmp_path) -> None:
    summary = pd.DataFrame({"analysis.search_mode": ["concurrent", "off"], "turns": [24.0, 24.0], "latency_p50_ms": [320.4, 45.67],
                            "hit_rate": [0.590032, 1.0], "wall_s": [7.46, 6.5]})
    long = pd.DataFrame({"cell": [0, 0, 0], "metric": ["turns", "latency_p50_ms", "hit_rate"], "value": [24.0, 320.4, 0.590032],
                         "unit": ["turns", "ms", "ratio"]})
    path = write_report(tmp_path / "r.html", "report", context=[("machine", "2 CPUs"), ("embedder", "memlab/hashing")],
                        notes=["a note"], tables=[("per mode", summary)], details=[("every metric", long)],
                        units={"turns": "turns", "latency_p50_ms": "ms", "hit_rate": "ratio", "wall_s": "s"})
    text = path.read_text()
    assert text.index("id='machine'") < text.index("a note") < text.index("<h2>per mode</h2>")
    assert "<th>machine</th><td>2 CPUs</td>" in text
    assert text.count("<div class='scroll'>") == 2
    assert "<td>24</td>" in text and "24.00" not in text and "<td>0.590</td>" in text and "0.590032" not in text
    assert "<td>320</td>" in text and "<td>45.7</td>" in text and "<td>7.46</td>" in text
    assert "<td class='text'>concurrent</td>" in text
    with pytest.raises(ValueError, match="data:image/"):
        write_report(tmp_path / "bad.html", "x", images=[("a chart", "http://example.com/a.png")])


async def _texts(page, selector: str) -> list[str]:
    return await page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent.trim())")


async def test_the_demo_report_renders_in_a_browser_offline(tmp_path) -> None:
    """Chromium, offline, a window narrower than the table: no errors, the machine on top, the table in its box, two live charts."""
    lines: list[str] = []
    result = await run_mode_demo(fast_config(tmp_path / "data"), ModeDemoSpec(turns=6, documents=4, latency_ms=10.0),
                                 out=lines.append, progress=False, report_dir=tmp_path / "reports")
    assert result.failed.empty
    async with offline_page(width=900, height=1400) as browser:
        page = browser.page
        await page.goto(result.report.as_uri())
        await page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=30_000)
        await page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        machine = await page.text_content("#machine") or ""
        header = await _texts(page, "h2 + .scroll thead th")
        first_row = await _texts(page, "h2 + .scroll tbody tr:first-child td")
        turns_cells = await _texts(page, "h2 + .scroll tbody td:nth-child(2)")
        box = await page.evaluate("""() => {
            const scroll = document.querySelector('h2 + .scroll');
            return {inner: scroll.clientWidth, wide: scroll.scrollWidth, page: document.documentElement.scrollWidth, window: innerWidth,
                    machineTop: document.querySelector('#machine').getBoundingClientRect().top,
                    tableTop: scroll.getBoundingClientRect().top}; }""")
        plots = await page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot')].map(
            p => p.data.map(t => ({name: t.name, symbol: t.marker && t.marker.symbol, type: t.type})))""")
        captions = await _texts(page, "figure.plot figcaption")
        turn_plot = page.locator(".js-plotly-plot").nth(1)
        target = await turn_plot.locator(".scatterlayer .trace .points path").first.bounding_box()
        await page.mouse.move(target["x"] + target["width"] / 2, target["y"] + target["height"] / 2)
        hovered = "document.querySelectorAll('.js-plotly-plot')[1].querySelector('.hoverlayer').textContent"
        await page.wait_for_function(f"{hovered}.length > 0", timeout=10_000)  # x unified: every series at that turn
        hover = await page.evaluate(hovered)
    assert browser.errors == [] and browser.blocked == []  # plotly.js is inlined: nothing from a CDN
    for label in ("CPUs", "load average", "embedder", "memlab/hashing", "sqlite"):
        assert label in machine
    assert box["machineTop"] < box["tableTop"]
    assert header[:4] == ["analysis.search_mode", "turns", "answered", "gated"] and "latency_p50_ms" in header and "hit_rate" in header
    assert "cpus" not in header and "embedder" not in header  # the machine is said once, at the top
    assert first_row[0] == "concurrent" and first_row[1] == "6" and set(turns_cells) == {"6"}
    assert not any(re.fullmatch(r"\d+\.00", cell) for cell in first_row)  # counts are integers
    assert box["wide"] > box["inner"] and box["page"] <= box["window"]  # the table scrolls in its box, not the page
    assert len(plots) == 2 and captions[1] == "wall-clock of every turn, by mode"
    per_turn = plots[1]
    assert [trace["name"] for trace in per_turn] == ["concurrent", "sequential", "off"]
    assert len({trace["symbol"] for trace in per_turn}) == 3  # lines that coincide stay distinguishable
    assert "median" in hover and "seeds 1" in hover
    assert (tmp_path / "report.png").stat().st_size > 10_000
