"""A real headless browser for tests that look at a page: Debian's ``chromium``, driven by playwright, with no network.

:func:`offline_page` launches the Chromium binary at ``MEMLAB_CHROMIUM`` (default
``/usr/bin/chromium``; playwright cannot download its own browser here) through
playwright's async API, headless, with background networking off, and opens a page
on which every request to a host other than the loopback is aborted and recorded
in :attr:`OfflinePage.blocked`. A page that renders there renders without internet.
``file:`` URLs (a report written to disk) are local and allowed. Console errors and
uncaught exceptions are collected in :attr:`OfflinePage.errors`.

:func:`mount_widget` draws an anywidget-based widget (memlab's :class:`~memlab.widgets.FrameGrid`)
in such a page without Jupyter: the widget's own ES module renders against a small
model that holds the widget's synced state and sends every ``save_changes()`` to the
Python widget (through playwright), whose observers run and whose new state comes back
to the page, as a kernel's comm would. What a click or a keystroke does in the browser
is then what it does in a notebook.

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

__all__ = ["CHROMIUM_FLAGS", "OfflinePage", "chromium_path", "mount_widget", "offline_page", "settle_widget"]

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
    """A playwright ``Page`` (``page``), what it tried to fetch beyond the loopback (``(resource type, URL)`` pairs, aborted) and its errors.

    ``errors``: console messages of type ``error`` and uncaught page exceptions, as text,
    in the order they happened (a blocked request's console error is among them).
    """

    page: Any
    blocked: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

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
            page.on("console", lambda message: result.errors.append(f"console: {message.text}") if message.type == "error" else None)
            page.on("pageerror", lambda error: result.errors.append(f"uncaught: {error}"))

            async def only_loopback(route: Any) -> None:
                url = route.request.url
                host = urlsplit(url).hostname or ""
                if url.startswith(("data:", "blob:", "about:", "file:")) or host in _LOOPBACK:
                    await route.continue_()
                else:
                    result.blocked.append((route.request.resource_type, url))
                    await route.abort()

            await page.route("**/*", only_loopback)
            yield result
        finally:
            await browser.close()


#: the page :func:`mount_widget` loads: a model with anywidget's interface (get, set, on, off, save_changes)
_HARNESS = """
<!doctype html><html><head><meta charset="utf-8"><title>widget</title><style>{css}</style></head>
<body><div id="widget"></div><script type="module">
class Model {{
  constructor(state) {{ this.state = state; this.handlers = {{}}; this.pending = {{}}; }}
  get(name) {{ return this.state[name]; }}
  set(name, value) {{ this.state[name] = value; this.pending[name] = value; this.emit(name); }}
  on(event, handler) {{ (this.handlers[event] ||= []).push(handler); }}
  off(event, handler) {{ this.handlers[event] = (this.handlers[event] || []).filter((h) => h !== handler); }}
  emit(name) {{ for (const handler of this.handlers["change:" + name] || []) handler(); }}
  async save_changes() {{
    const changes = this.pending;
    this.pending = {{}};
    window.memlabPending = (window.memlabPending || 0) + 1;
    try {{
      const state = await window.memlabSync(changes);
      for (const [name, value] of Object.entries(state)) {{
        if (JSON.stringify(this.state[name]) !== JSON.stringify(value)) {{ this.state[name] = value; this.emit(name); }}
      }}
    }} finally {{ window.memlabPending -= 1; }}
  }}
}}
const source = {esm};
const module = await import(URL.createObjectURL(new Blob([source], {{ type: "text/javascript" }})));
window.memlabModel = new Model({state});
const started = performance.now();
(module.default.render || module.default)({{ model: window.memlabModel, el: document.getElementById("widget") }});
window.memlabRenderMs = performance.now() - started;
</script></body></html>
"""


def _synced_state(widget: Any, names: Any) -> dict[str, Any]:
    import json

    return json.loads(json.dumps({name: getattr(widget, name) for name in names}, default=str))


async def mount_widget(browser: OfflinePage, widget: Any) -> None:
    """Render anywidget ``widget`` in ``browser``'s page, its state synced both ways with the Python object (see the module docstring).

    Only the widget's own synced traits are sent (not ipywidgets' layout and style
    models). When this returns, the first render ran; ``window.memlabRenderMs`` holds
    how long it took. After a click or typing, wait for ``window.memlabPending == 0``
    (:func:`settle_widget`) before reading the page.
    """
    import json

    names = [name for name in widget.keys if not name.startswith("_") and name not in {"layout", "tabbable", "tooltip"}]

    async def sync(changes: dict[str, Any]) -> dict[str, Any]:
        with widget.hold_trait_notifications():
            for name, value in changes.items():
                setattr(widget, name, value)
        return _synced_state(widget, names)

    await browser.page.expose_function("memlabSync", sync)
    html = _HARNESS.format(css=str(getattr(widget, "_css", "")), esm=json.dumps(str(widget._esm)), state=json.dumps(_synced_state(widget, names)))
    await browser.page.set_content(html)
    await browser.page.wait_for_function("window.memlabRenderMs !== undefined")


async def settle_widget(browser: OfflinePage, timeout_ms: float = 10_000) -> None:
    """Wait until every ``save_changes()`` the page sent has had its answer from the Python widget."""
    await browser.page.wait_for_function("!window.memlabPending", timeout=timeout_ms)
