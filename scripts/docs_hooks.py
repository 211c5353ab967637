"""mkdocs hook of memlab's docs site (``hooks:`` in ``mkdocs.yml``); ``scripts/docs_build.py`` runs the build.

What it adds to a plain mkdocs-material + mkdocs-jupyter + mkdocstrings build:

* **the home page is the README**: ``index.md`` is generated from ``README.md``, so the
  landing text has one source; its links are rewritten for the site (below);
* **links written for GitHub work on the site**: pages link as the repository lays files
  out (``../notebooks/03_recall.ipynb`` from ``docs/``, ``docs/backends.md`` from the
  README); such a link becomes the site's page (``notebooks/03_recall.ipynb`` is the
  executed notebook's page). A link to a repository file that is no page (``LICENSE``,
  ``memlab/flows/distill.py``) keeps its text without the link;
* **the executed notebooks**: ``build/docs/notebooks/*.ipynb`` (made by ``docs_build.py
  execute``) are added as ``notebooks/NAME.ipynb``; mkdocs-jupyter renders them as they are
  (``execute: false``). A copy that is missing or stale (not made from this notebook and
  these memlab sources) fails the build, as a failing notebook does;
* **widgets without a CDN**: ``build/docs/widgets/`` is served as ``assets/widgets/``, and
  each notebook page loads the widget renderer from there (``memlab-widgets.js``: RequireJS,
  anywidget, ``@jupyter-widgets/html-manager``) instead of unpkg; the MathJax tag nbconvert
  adds (a CDN script; no notebook uses math) is dropped. A page still pointing a script,
  stylesheet or font at another host fails the build;
* **the API reference**: one generated page per module of :data:`REFERENCE`, each object
  of the module's ``__all__`` rendered by mkdocstrings from its docstring where it is
  defined (a re-exported name is documented once, on the page of the most specific module
  exporting it, and linked from the others).
"""

from __future__ import annotations

import importlib
import inspect
import os
import posixpath
import re
import sys
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import docs_build  # noqa: E402  (beside this file)

ROOT = docs_build.ROOT
#: the API reference: (module, what it is), one page each, in the nav's order
REFERENCE = (
    ("memlab", "the package: module-level remember / recall / search / forget / improve, the public names"),
    ("memlab.stack", "MemoryStack, the composition root"),
    ("memlab.sync", "SyncMemoryStack, the blocking API"),
    ("memlab.config", "StackConfig and the strategy names"),
    ("memlab.models", "the records and results"),
    ("memlab.exceptions", "the error tree"),
    ("memlab.session", "sessions, guidance, traces, session retrievers"),
    ("memlab.session.rerankers", "session rerankers"),
    ("memlab.retrievers", "search types, routing, scope"),
    ("memlab.merge", "merge policies"),
    ("memlab.analysis", "turn-analysis modes"),
    ("memlab.cache", "cache backends"),
    ("memlab.ttl", "TTL policies"),
    ("memlab.graph", "permanent memory"),
    ("memlab.embeddings", "embedders"),
    ("memlab.llm", "the LLM client and the offline model"),
    ("memlab.usage", "usage and cost"),
    ("memlab.frames", "DataFrames"),
    ("memlab.experiments", "the experiment grid"),
    ("memlab.stats", "intervals and paired tests"),
    ("memlab.charts", "matplotlib charts"),
    ("memlab.plotly_charts", "interactive charts"),
    ("memlab.widgets", "the explorers"),
    ("memlab.ui", "memlab ui: the explorers as a web page (Voilà)"),
    ("memlab.api", "the HTTP API"),
    ("memlab.remote", "what the HTTP API and the MCP server share"),
    ("memlab.integrations.langchain", "LangChain adapters"),
    ("memlab.integrations.langgraph", "LangGraph adapters"),
    ("memlab.integrations.mcp", "the MCP server"),
    ("memlab.bench", "benchmarks"),
    ("memlab.testing", "conformance suites, suppliers, the fake clock, the browser"),
    ("memlab.clock", "clocks"),
)
_NOTEBOOK_LINK = re.compile(r"^notebooks/\d\d_[a-z0-9_]+\.ipynb$")
_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(\s*(?:```|~~~).*)$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const|ref):(?=<code>)")
#: resources a page may load from itself only (a script, a stylesheet, a font, an image, a frame)
_EXTERNAL = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*?\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)
_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL)
_RENDERER = "https://unpkg.com/@jupyter-widgets/html-manager@*/dist/embed-amd.js"
_OLD_RENDERER = "https://unpkg.com/@jupyter-js-widgets@*/dist/embed.js"


def reference_uri(module: str) -> str:
    return f"reference/{module}.md"


# -- config and files --------------------------------------------------------------------------


def on_config(config: Any) -> Any:
    """Fill the nav's "Notebooks" and "API reference" sections (from notebooks/ and :data:`REFERENCE`)."""
    notebooks = [f"notebooks/{path.name}" for path in sorted(docs_build.NOTEBOOKS.glob("*.ipynb"))]
    reference = [{module: reference_uri(module)} for module, _ in REFERENCE]
    for entry in config.nav or []:
        if isinstance(entry, dict) and "Notebooks" in entry:
            entry["Notebooks"] = notebooks
        if isinstance(entry, dict) and "API reference" in entry:
            entry["API reference"] = [{"Overview": "reference/index.md"}, *reference]
    return config


@event_priority(50)  # before mkdocs-jupyter's on_files, which wraps the notebook files
def on_files(files: Files, config: Any) -> Files:
    memlab_sha256 = docs_build.memlab_sources_sha256()
    problems = []
    for source in sorted(docs_build.NOTEBOOKS.glob("*.ipynb")):
        copy = docs_build.fresh_copy(source, memlab_sha256)
        if copy is None:
            state = "stale" if docs_build.executed_path(source).exists() else "missing"
            problems.append(f"{source.name} ({state})")
            continue
        # a File rooted in build/docs (not File.generated): mkdocs-jupyter's wrapper reads the path from src_dir
        files.append(File(f"notebooks/{copy.name}", src_dir=str(copy.parent.parent), dest_dir=config.site_dir, use_directory_urls=config.use_directory_urls))
    if problems:
        raise PluginError(
            f"executed notebooks {', '.join(problems)} in {docs_build.EXECUTED.relative_to(ROOT)}: "
            "run `make docs` (scripts/docs_build.py executes them)"
        )
    widgets = docs_build.WIDGETS
    if not (widgets / "memlab-widgets.js").exists():
        raise PluginError(f"no widget front end in {widgets.relative_to(ROOT)}: run `make docs` (scripts/docs_build.py assets)")
    for path in sorted(widgets.rglob("*")):
        if path.is_file():
            files.append(File.generated(config, f"assets/widgets/{path.relative_to(widgets).as_posix()}", abs_src_path=str(path)))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=readme))
    files.append(File.generated(config, "reference/index.md", content=_reference_index()))
    homes = _reference_homes()
    for module, summary in REFERENCE:
        files.append(File.generated(config, reference_uri(module), content=_reference_page(module, summary, homes)))
    return files


# -- links -------------------------------------------------------------------------------------


def _repo_path(src_uri: str) -> str:
    """Where page ``src_uri`` lives in the repository (the README is the home page)."""
    return "README.md" if src_uri == "index.md" else f"docs/{src_uri}"


def site_link(src_uri: str, target: str) -> str | None:
    """The link ``target`` of page ``src_uri`` rewritten for the site; None when it points at a repository file that is no page."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith(("#", "/")):
        return target
    path, _, anchor = target.partition("#")
    if not path:
        return target
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(_repo_path(src_uri)), path))
    if resolved.startswith("docs/"):
        site = resolved.removeprefix("docs/")
    elif _NOTEBOOK_LINK.match(resolved):
        site = resolved
    elif resolved == "README.md":
        site = "index.md"
    else:
        return None
    relative = posixpath.relpath(site, posixpath.dirname(src_uri) or ".")
    return relative + (f"#{anchor}" if anchor else "")


def rewrite_links(markdown: str, src_uri: str) -> str:
    """:func:`site_link` applied to every inline link outside fenced code blocks."""

    def one(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        link = site_link(src_uri, target)
        return text if link is None else f"[{text}]({link})"

    out, inside = [], False
    for chunk in _FENCE.split(markdown):  # [text, fence line, text, fence line, ...]
        if _FENCE.match(chunk):
            inside = not inside
            out.append(chunk)
        else:
            out.append(chunk if inside else _LINK.sub(one, chunk))
    return "".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    return rewrite_links(markdown, page.file.src_uri)


# -- notebook pages ----------------------------------------------------------------------------


def on_post_page(output: str, page: Any, config: Any) -> str:
    src_uri = page.file.src_uri
    if src_uri.endswith(".ipynb"):
        loader = posixpath.relpath("assets/widgets/memlab-widgets.js", posixpath.dirname(page.file.dest_uri))
        output = output.replace(_RENDERER, loader).replace(_OLD_RENDERER, loader)
        output = _MATHJAX.sub("", output)
    external = _EXTERNAL.search(output)
    if external:
        start = max(0, external.start() - 80)
        raise PluginError(f"{src_uri}: loads a resource from another host: ...{output[start:external.end() + 120]}...")
    return output


# -- API reference -----------------------------------------------------------------------------


def _exports(module: str) -> list[str]:
    imported = importlib.import_module(module)
    names = getattr(imported, "__all__", None)
    if names is None:
        names = [name for name, value in vars(imported).items() if not name.startswith("_") and getattr(value, "__module__", None) == module]
    return sorted(names, key=lambda name: (not name[:1].isupper(), name.lower()))


def _canonical(module: str, name: str) -> str:
    """The dotted path mkdocstrings documents ``module.name`` under: where it is defined, when that can be told."""
    imported = importlib.import_module(module)
    value = getattr(imported, name)
    lazy = getattr(imported, "_LAZY", {})  # a package loading names on first access (memlab._imports.lazy_getattr)
    where, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if (
        (inspect.isclass(value) or inspect.isfunction(value) or inspect.iscoroutinefunction(value))
        and isinstance(where, str)
        and where.startswith("memlab")
        and qualname == name
    ):
        return f"{where}.{qualname}"
    if name in lazy:  # griffe reads sources: a lazily loaded constant is found where it is defined
        return f"{lazy[name]}.{name}"
    return f"{module}.{name}"


def _reference_homes() -> dict[str, str]:
    """Canonical path -> the reference module that documents it (the most specific one exporting it)."""
    homes: dict[str, str] = {}
    for module, _ in REFERENCE:
        for name in _exports(module):
            path = _canonical(module, name)
            home = homes.get(path)
            owner = path.rsplit(".", 1)[0]

            def fit(candidate: str) -> int:
                return len(candidate) if owner == candidate or owner.startswith(candidate + ".") else -1

            if home is None or fit(module) > fit(home):
                homes[path] = module
    return homes


def _reference_page(module: str, summary: str, homes: dict[str, str]) -> str:
    lines = [
        f"# `{module}`",
        "",
        f"::: {module}",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "      show_root_toc_entry: false",
        "",
    ]
    elsewhere = []
    for name in _exports(module):
        path = _canonical(module, name)
        if homes.get(path) != module:
            elsewhere.append(f"* `{module}.{name}`: [`{path.rsplit('.', 1)[1]}`][{path}] (`{homes[path]}`)")
            continue
        lines += [f"::: {path}", "    options:", "      heading_level: 2", ""]
    if elsewhere:
        lines += ["## Also exported here", "", "Documented on the page of the module they come from:", "", *elsewhere, ""]
    return "\n".join(lines)


def _reference_index() -> str:
    rows = "\n".join(f"| [`{module}`]({module}.md) | {summary} |" for module, summary in REFERENCE)
    return (
        "# API reference\n\n"
        "Generated from the docstrings at build time (mkdocstrings): one page per public module, each object\n"
        "of the module's `__all__` documented where it is defined.\n\n"
        f"| module | what |\n|---|---|\n{rows}\n"
    )


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    """Sphinx roles in docstrings (``:class:`X```) read as plain code on the site."""
    if page.file.src_uri.startswith("reference/"):
        html = _ROLE.sub("", html)
    return html


__all__ = ["REFERENCE", "on_config", "on_files", "on_page_content", "on_page_markdown", "on_post_page", "rewrite_links", "site_link"]
