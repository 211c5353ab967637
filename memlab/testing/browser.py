"""A real headless browser for tests that look at a page: Debian's ``chromium``, driven by playwright, with no network.

:func:`offline_page` launches the Chromium binary at ``MEMLAB_CHROMIUM`` (default
``/usr/bin/chromium``; playwright cannot download its own browser here) through
playwright's async API, headless, with background networking off, and opens a page
on which every request to a host other than the loopback is aborted and recorded
in :attr:`OfflinePage.blocked`. A page that renders there renders without internet.

When the binary or playwright is missing the calling test is skipped; under
``CI=true`` it fails instead (``make test`` installs both).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from memlab.testing.suppliers import missing

__all__ = ["CHROMIUM_FLAGS", "OfflinePage", "chromium_path", "offline_page"]

#: what Chromium needs on a closed network, as root, without a display
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass
class OfflinePage:
    """A playwright ``Page`` (``page``) and what it tried to fetch beyond the loopback: ``(resource type, URL)`` pairs, aborted."""

    page: Any
    blocked: list[tuple[str, str]] = field(default_factory=list)

    def blocked_except(self, *kinds: str) -> list[tuple[str, str]]:
        """The blocked requests whose resource type (``script``, ``stylesheet``, ``image``, ``font``, ``fetch``...) is not in ``kinds``."""
        return [(kind, url) for kind, url in self.blocked if kind not in kinds]


def chromium_path() -> Path:
    """The Chromium binary the browser tests use (``MEMLAB_CHROMIUM``, default ``/usr/bin/chromium``); skips (fails under CI) when absent."""
    path = Path(os.environ.get("MEMLAB_CHROMIUM", "/usr/bin/chromium"))
    if not path.exists():
        missing(f"no Chromium at {path}: `apt-get install chromium` (make test does) or set MEMLAB_CHROMIUM")
    return path


@asynccontextmanager
async def offline_page(*, width: int = 1400, height: int = 1000) -> AsyncIterator[OfflinePage]:
    """A fresh page in headless Chromium that can reach only the loopback (see the module docstring)."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        missing("playwright is not installed: pip install -e '.[dev]'")
    executable = chromium_path()
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=str(executable), headless=True, args=list(CHROMIUM_FLAGS))
        try:
            page = await browser.new_page(viewport={"width": width, "height": height})
            result = OfflinePage(page)

            async def only_loopback(route: Any) -> None:
                url = route.request.url
                host = urlsplit(url).hostname or ""
                if url.startswith(("data:", "blob:", "about:")) or host in _LOOPBACK:
                    await route.continue_()
                else:
                    result.blocked.append((route.request.resource_type, url))
                    await route.abort()

            await page.route("**/*", only_loopback)
            yield result
        finally:
            await browser.close()
