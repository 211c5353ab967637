"""``memlab ui``: the explorers as a standalone web page for one data root, served by Voilà (the ``memlab[ui]`` extra).

::

    memlab ui [--data-root PATH] [--host 127.0.0.1] [--port 8866] [--no-browser]

The page is the shipped notebook ``explorer.ipynb`` (beside this module) rendered by
`Voilà <https://voila.readthedocs.io>`_: a :class:`~memlab.widgets.ExplorerPage`, that is
a header (the data root, how many sessions, when they were read; Refresh; auto-refresh),
the sessions grid of the usage view (:class:`~memlab.widgets.UsageExplorer`: status,
activity, tokens, cost; the usage per model and the cost by model folded below it), and
the most recently active session opened under it (:class:`~memlab.widgets.SessionExplorer`:
its turns in the paged, sortable, filterable grid; clicking a turn opens its
:class:`~memlab.widgets.TurnInspector`: lanes, verdicts, phases). Selecting another
session in the grid opens that one. The stack is ``MemoryStack.from_env()`` in the
page's kernel: the command passes the data root by environment (``MEMLAB_DATA_ROOT``,
made absolute) with every other setting of the shell it ran in (``.env`` included), and
the kernel moves to the command's working directory (``MEMLAB_UI_CWD``) first.

**Why Voilà serving a notebook, not a page of ``memlab serve``.** The page *is* the
explorers: the same widgets as in a notebook, their Python running in a kernel beside
the stack, so every view they have (lanes, verdicts, phases, guidance, elements with
their documents, feedback) is on the page and stays in step with them: no second front
end to keep in sync, no new HTTP endpoints. A page of ``memlab serve`` would need GET
routes for a session's turns and a turn's trace, an API key in the browser, and each
view written again in JavaScript. Voilà draws widgets with their own front ends, served
by the same local server: ipywidgets' manager and anywidget's (JupyterLab extensions
installed with those packages), so memlab's grid (``memlab/widgets/static/grid.js``)
comes from it too. The page works offline: it asks nothing of any host but the server
(``tests/test_ui_browser.py`` opens it in Chromium with every other request blocked and
no console error allowed). For that, the template shipped here
(``share/voila/templates/memlab``) is Voilà's ``lab`` template without the two Font
Awesome stylesheets it links from a CDN (Voilà's bundle carries Font Awesome already),
and only the widget extensions the page needs are loaded, not every JupyterLab extension
of the environment (one built for JupyterLab alone fails in Voilà and logs an error).

**Fast first page, fresh data.** Voilà preheats a kernel before any browser asks: it
runs the notebook up to :func:`wait_for_request` (the imports, the stack opened, every
grid built and read once) and waits there; a request takes that kernel and the rest
runs then, so the sessions and turns shown are those of the moment the page is opened.
Refresh (or auto-refresh, every 10 s while ticked) reads them again, keeping each grid's
page, sort, filters and selection. Only the page on screen of each grid goes to the
browser: a 10,000-turn session is 25 rows of HTML, not a table of the whole session.
Measured on a data root with a 10,000-turn session (``scripts/bench_ui.py``, 2 shared
CPUs, a fresh browser profile each time; two runs, medians of 5; :data:`FIRST_PAGE_S`):
Chromium draws the turns grid's first page 2.2 to 2.6 s after the request (single loads
2.0 to 3.4 s); 0.85 s of it is the server (the kernel's last cell, about 0.4 s, and
Voilà streaming the page), the rest the browser loading Voilà's scripts (about 10 MB,
none cached in a fresh profile) and drawing the widgets. A request that arrives while
its kernel is still preheating (the first after the server starts) takes 6.6 to 7.3 s.

Each page (each browser tab) has a kernel of its own, a process with its own stack on
the data root, preheated one ahead; Ctrl-C (or SIGTERM) stops the server and shuts every
kernel down. The page reads; only the turn view's feedback buttons write (feedback, as
in a notebook). It has no authentication: the command binds the loopback by default,
and a ``--host`` reachable from elsewhere shows the data root to anyone who can reach
the port.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

__all__ = [
    "CWD_VARIABLE",
    "DEFAULT_PORT",
    "EXTENSIONS",
    "FIRST_PAGE_S",
    "INSTALL_HINT",
    "NOTEBOOK",
    "REQUIRED",
    "SHARE",
    "TEMPLATE",
    "UIServer",
    "is_available",
    "open_page",
    "prepare",
    "require",
    "serve",
    "wait_for_request",
]

#: the shipped notebook Voilà renders
NOTEBOOK = Path(__file__).parent / "explorer.ipynb"
#: a Jupyter data directory holding the ``memlab`` Voilà template (put first on ``JUPYTER_PATH``)
SHARE = Path(__file__).parent / "share"
#: the name of that template (Voilà's ``lab`` without its CDN stylesheets)
TEMPLATE = "memlab"
#: Voilà's own default port
DEFAULT_PORT = 8866
#: what the page imports (the ``memlab[ui]`` extra: Voilà, and the ``memlab[widgets]`` explorers)
REQUIRED = ("voila", "ipywidgets", "anywidget", "matplotlib")
INSTALL_HINT = "pip install 'memlab[ui]'"
#: the JupyterLab extensions the page loads (others installed in the environment are left out)
EXTENSIONS = ("@jupyter-widgets/jupyterlab-manager", "@voila-dashboards/widgets-manager8", "anywidget")
#: the working directory of the ``memlab ui`` command (a kernel's own is the notebook's folder): relative paths in the
#: environment (a SQLite URL, a cache directory) resolve against it in the page's kernel, as in the shell that ran it
CWD_VARIABLE = "MEMLAB_UI_CWD"
#: ``memlab ui`` on a 10,000-turn session, seconds (``scripts/bench_ui.py``; the module docstring): ``page`` the request
#: to the turns grid's first page drawn in Chromium, ``html`` the request to the page's HTML complete (the server's part),
#: ``cold`` ``page`` for a request that waits for its kernel to finish preheating
FIRST_PAGE_S = {"page": 2.56, "html": 0.85, "cold": 6.61}  # load average 1 to 2.7; another run (load 2 to 9): 2.21, 0.85, 7.27
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})

if TYPE_CHECKING:
    from memlab.config import StackConfig
    from memlab.widgets import ExplorerPage


def is_available() -> bool:
    """True when Voilà and the explorers' packages can be imported (the ``memlab[ui]`` extra); imports none of them."""
    return all(importlib.util.find_spec(name) is not None for name in REQUIRED)


def require() -> None:
    """``ImportError`` naming ``pip install 'memlab[ui]'`` when a package of the extra is missing."""
    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"memlab ui needs {', '.join(missing)} (the ui extra): {INSTALL_HINT}")


async def open_page(**options: Any) -> "ExplorerPage":
    """The page's :class:`~memlab.widgets.ExplorerPage` on ``MemoryStack.from_env()``, read once (the notebook's first cell).

    Moves to ``MEMLAB_UI_CWD`` first (the directory ``memlab ui`` ran in), so that relative
    paths in the environment mean what they meant there. ``options``: the page's.
    """
    from memlab.widgets import ExplorerPage

    cwd = os.environ.get(CWD_VARIABLE)
    if cwd:
        os.chdir(cwd)
    return await ExplorerPage.from_env(**options)


def wait_for_request() -> None:
    """In a kernel Voilà preheated, wait until a browser requests the page (returns at once anywhere else)."""
    if os.environ.get("VOILA_PREHEAT", "False") == "False":
        return
    from voila.utils import wait_for_request as wait

    wait()


class UIServer:
    """What :func:`serve` runs, checked and ready: ``url``, ``data_root``, ``stack_config``, the kernels' ``environ``.

    Built by :func:`prepare` (which does every check); :meth:`run` serves until Ctrl-C
    (SIGINT) or SIGTERM, then shuts every page's kernel down.
    """

    def __init__(self, *, stack_config: "StackConfig", host: str, port: int, open_browser: bool, environ: dict[str, str]) -> None:
        self.stack_config, self.data_root = stack_config, Path(stack_config.data_root)
        self.host, self.port, self.open_browser, self.environ = host, port, open_browser, environ
        shown = "127.0.0.1" if host in _WILDCARD_HOSTS else host
        self.url = f"http://{f'[{shown}]' if ':' in shown else shown}:{port}/"

    def voila_config(self) -> Any:
        """The traitlets config of the Voilà application (see the module docstring)."""
        from traitlets.config import Config

        config = Config()
        config.Voila.ip = self.host
        config.Voila.port = self.port
        config.Voila.port_retries = 0  # the port was checked: never move to another one silently
        config.Voila.open_browser = self.open_browser
        config.Voila.log_level = logging.WARNING
        # the kernels talk to the server over Unix sockets in Voilà's private connection directory, not loopback TCP
        # ports that any local user could reach (and ipykernel's warning about unencrypted TCP does not print per page)
        config.KernelManager.transport = "ipc"
        config.VoilaConfiguration.template = TEMPLATE
        config.VoilaConfiguration.preheat_kernel = True
        config.VoilaConfiguration.default_pool_size = 1
        config.VoilaConfiguration.extension_allowlist = list(EXTENSIONS)
        config.VoilaConfiguration.show_tracebacks = True  # a local tool: a failing cell says why on the page
        return config

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C or SIGTERM); every kernel is shut down before this returns."""
        os.environ.update(self.environ)
        app = _voila_class()(config=self.voila_config())
        app.initialize([str(NOTEBOOK)])
        app.log.addFilter(_QuietTrust())
        # SIGINT may be ignored (a command started in the background by a shell); SIGTERM is Ctrl-C too
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)
        print(f"memlab ui: {self.data_root} at {self.url} (Ctrl-C stops)", file=sys.stderr, flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # one arriving outside Voilà's loop (which catches its own) ends quietly too
            app.start()  # returns after Ctrl-C, once Voilà has shut its kernels down


def _voila_class() -> Any:
    """Voilà's application with two fixes: a closed page's kernel is shut down (``init_handlers``), and ``stop``."""
    from jupyter_core.utils import run_sync
    from voila.app import Voila
    from voila.tornado.handler import TornadoVoilaHandler

    class PageHandler(TornadoVoilaHandler):
        async def get(self, path: str | None = None) -> Any:
            # Voilà's page asks the server to shut its kernel down when it closes (a beacon on "beforeunload")
            # carrying the _xsrf cookie, but the page's handler never sets that cookie: the server refuses the
            # beacon (403), and every closed or reloaded tab left its kernel running until the server stopped.
            self.xsrf_token  # noqa: B018 - reading it sets the cookie
            return await super().get(path)

    class MemlabVoila(Voila):
        def init_handlers(self) -> list[Any]:
            return [(route[0], PageHandler, *route[2:]) if route[1] is TornadoVoilaHandler else route for route in super().init_handlers()]

        def stop(self) -> None:
            """Stop every kernel: those running a cell (preheating, or waiting for a request) at once, the others politely.

            A kernel asked to shut down in the middle of a cell closes its sockets first and
            then logs a traceback when the cell's reply finds them closed; one stopped at
            once has nothing to log (its stack has nothing in flight: SQLite stays whole).
            """
            manager = self.kernel_manager
            for kernel_id in list(manager.list_kernel_ids()):
                if getattr(manager.get_kernel(kernel_id), "execution_state", None) == "busy":
                    with contextlib.suppress(Exception):  # gone already: the polite pass below skips it
                        run_sync(manager.shutdown_kernel)(kernel_id, now=True)
            super().stop()

    return MemlabVoila


class _QuietTrust(logging.Filter):
    """Drop Voilà's "Notebook explorer.ipynb is not trusted" (a shipped notebook cannot carry the user's signature)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "is not trusted" not in record.getMessage()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def prepare(
    *,
    data_root: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    open_browser: bool = True,
    environ: Mapping[str, str] | None = None,
) -> UIServer:
    """Check everything :func:`serve` needs and return the server, not started yet.

    ``data_root``: the data root to show (None: the one the environment names,
    ``MEMLAB_DATA_ROOT`` or ``./.memlab``); ``port`` 0 picks a free one. Raises, before
    anything starts: ``ImportError`` naming ``pip install 'memlab[ui]'`` when the extra is
    missing, ``ConfigError`` when the environment is invalid or the data root is not an
    existing directory, ``ValidationError`` when the port is taken (or cannot be bound).
    """
    from memlab.config import StackConfig
    from memlab.exceptions import ConfigError

    require()
    source = dict(os.environ if environ is None else environ)
    if data_root is not None:
        source["MEMLAB_DATA_ROOT"] = str(data_root)
    config = StackConfig.from_env(source)
    root = Path(config.data_root).expanduser()
    if not root.is_dir():
        given = "--data-root" if data_root is not None else "MEMLAB_DATA_ROOT" if "MEMLAB_DATA_ROOT" in source else "the default data root"
        raise ConfigError(
            f"data root {root} ({given}) {'is not a directory' if root.exists() else 'does not exist'}: "
            "pass the folder a stack wrote (--data-root PATH or MEMLAB_DATA_ROOT)"
        )
    root = root.resolve()
    port = _bindable(host, port)
    extra = {
        "MEMLAB_DATA_ROOT": str(root),
        CWD_VARIABLE: os.getcwd(),
        "JUPYTER_PATH": os.pathsep.join(part for part in (str(SHARE), source.get("JUPYTER_PATH", "")) if part),
    }
    if host not in _WILDCARD_HOSTS:  # a preheated kernel calls back to the server (wait_for_request) at this address
        extra["VOILA_APP_IP"] = host
    config = config.model_copy(update={"data_root": root})
    return UIServer(stack_config=config, host=host, port=port, open_browser=open_browser, environ=extra)


def serve(**options: Any) -> None:
    """Serve the page (see the module docstring) until Ctrl-C; ``options`` as :func:`prepare`'s."""
    prepare(**options).run()


def _bindable(host: str, port: int) -> int:
    """``port`` once a socket could bind it on ``host`` (0: a free port's number); ValidationError when it cannot."""
    from memlab.exceptions import ValidationError

    try:
        with _socket(host) as probe:
            probe.bind((host, port))
            return int(probe.getsockname()[1])
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ValidationError(f"port {port} on {host} is in use: pick another with --port (--port 0: any free port)") from None
        raise ValidationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _socket(host: str) -> Iterator[socket.socket]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    probe = socket.socket(family, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as tornado binds: a port in TIME_WAIT is free
        yield probe
    finally:
        probe.close()


