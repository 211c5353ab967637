"""``/docs`` and ``/redoc`` render the API in a real headless Chromium that can reach nothing but the server."""

from __future__ import annotations

import httpx

from memlab.testing.browser import offline_page


async def _paths(live) -> list[str]:
    """Every path of the API's schema (one operation each), as both pages must list them (the set: test_api_http)."""
    return list((await live.client.get("/openapi.json")).json()["paths"])


async def test_swagger_ui_renders_every_endpoint_offline(live):
    paths = await _paths(live)
    async with offline_page() as browser:
        await browser.page.goto(f"{live.url}/docs")
        await browser.page.wait_for_selector(".opblock-summary-path", timeout=30_000)
        shown = await browser.page.eval_on_selector_all(".opblock-summary-path", "nodes => nodes.map(n => n.textContent.trim())")
        title = await browser.page.title()
    assert sorted(set(shown)) == sorted(paths), shown
    assert "memlab" in title
    assert browser.blocked == []  # nothing came from a CDN


async def test_redoc_renders_every_endpoint_offline(live):
    paths = await _paths(live)
    async with offline_page() as browser:
        await browser.page.goto(f"{live.url}/redoc")
        await browser.page.wait_for_selector("[data-section-id^='operation/']", timeout=30_000)
        sections = await browser.page.eval_on_selector_all("[data-section-id^='operation/']", "nodes => nodes.length")
        text = await browser.page.inner_text("body")
    assert sections == len(paths)
    for path in paths:
        assert path in text
    # ReDoc's bundle links its "API docs by Redocly" badge image to cdn.redoc.ly: a decorative image, not needed to render
    assert browser.blocked_except("image") == []
    assert all("redoc.ly" in url for _, url in browser.blocked), browser.blocked


def test_the_docs_pages_reference_no_cdn(live):
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{live.url}{page}", timeout=30).text
        assert "cdn.jsdelivr.net" not in html and "fonts.googleapis.com" not in html, page
        assert "/static-offline-docs/" in html
    assert httpx.get(f"{live.url}/static-offline-docs/swagger-ui-bundle.js", timeout=30).status_code == 200
