"""Build memlab's docs site: the notebooks executed once, the widget front end served locally, mkdocs in strict mode.

    .venv/bin/python scripts/docs_build.py            # everything `make docs` does
    .venv/bin/python scripts/docs_build.py execute    # only run the notebooks (stale or missing copies)
    .venv/bin/python scripts/docs_build.py assets     # only fetch and unpack the widget front end

``execute`` runs every ``notebooks/NN_topic.ipynb`` in a fresh ``python3`` kernel (nbclient),
with the offline settings, in a scratch working directory, widget state stored, and writes the
executed copy to ``build/docs/notebooks/``. A copy records what it was made from
(``metadata.memlab_docs``: the sha256 of the notebook and of memlab's sources); a copy whose
record matches the checkout is *fresh* and is not run again. ``tests/test_notebooks.py`` reads
the fresh copies instead of executing the notebooks a second time (:func:`fresh_copy`), so
``make test``, which builds the docs first, runs each notebook once. A cell that raises fails
the build and leaves no copy.

``assets`` puts the widget front end in ``build/docs/widgets/``: the notebook pages render the
stored widget state with ``@jupyter-widgets/html-manager`` (its ``embed-amd.js`` bundles the
standard controls and their Font Awesome fonts), which needs RequireJS, and anywidget's front
end (memlab's grid, plotly's FigureWidget) as a RequireJS module. The first two come from the
npm registry with ``npm pack`` (pinned versions, sha512-checked, kept in ``build/docs-cache/``
so later builds need no network); anywidget's is the AMD module its Python package ships
(``anywidget/nbextension/index.js``), the version the kernel used. ``scripts/docs_hooks.py``
(the mkdocs hook) points each notebook page at these files instead of unpkg / cdnjs.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
BUILD = ROOT / "build" / "docs"
EXECUTED = BUILD / "notebooks"
WIDGETS = BUILD / "widgets"
CACHE = ROOT / "build" / "docs-cache"
#: the settings `make test` exports: no network for litellm or the Hugging Face hub
OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1"}
#: seconds one cell may take
CELL_TIMEOUT = 300
#: npm packages of the widget front end: name, version, the registry's sha512 integrity, the files kept
NPM = (
    (
        "@jupyter-widgets/html-manager",
        "1.0.15",
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "dist/",  # embed-amd.js and the font files it references beside it
    ),
    (
        "requirejs",
        "2.3.8",
        "sha512-7/cTSLOdYkNBNJcDMWf+luFvMriVm7eYxp4BcFCsAX0wF421Vyce5SXP17c+Jd5otXKGNehIonFlyQXSowL6Mw==",
        "require.js",
    ),
)
#: the page-side loader (served as widgets/memlab-widgets.js): RequireJS, anywidget as a module, then html-manager
LOADER = """\
// memlab's docs: render the widget state stored in this page with files served beside this script, never a CDN.
// RequireJS is loaded here, after the page's own scripts ran (a UMD script that saw `define` would register with it).
(function () {
  var base = document.currentScript.src.replace(/[^/]*$/, "");
  var tag = document.createElement("script");
  tag.src = base + "require.js";
  tag.onload = function () {
    window.requirejs.config({ paths: { anywidget: base + "anywidget" } });
    var embed = document.createElement("script");
    embed.src = base + "html-manager/embed-amd.js";
    // a widget module missing here is looked up beside this script (and fails), not on jsDelivr
    embed.setAttribute("data-jupyter-widgets-cdn", base + "npm/");
    document.body.appendChild(embed);
  };
  document.body.appendChild(tag);
})();
"""


# -- freshness ---------------------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def memlab_sources_sha256() -> str:
    """One hash of every file of the memlab package in the checkout (what a notebook's outputs depend on besides itself)."""
    digest = hashlib.sha256()
    package = ROOT / "memlab"
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def servers_in_use() -> list[str]:
    """The test servers a notebook would use (``MEMLAB_TEST_*_URL`` set: ``04_swap_backends`` runs those backends too)."""
    return sorted(name for name, value in os.environ.items() if name.startswith("MEMLAB_TEST_") and name.endswith("_URL") and value)


def provenance(source: Path, memlab_sha256: str | None = None) -> dict[str, Any]:
    """What an executed copy of ``source`` must record to count as fresh: the notebook, memlab's sources, the servers it saw."""
    return {
        "notebook": source.name,
        "notebook_sha256": _sha256(source.read_bytes()),
        "memlab_sha256": memlab_sha256 or memlab_sources_sha256(),
        "servers": servers_in_use(),
    }


def executed_path(source: Path) -> Path:
    return EXECUTED / source.name


def fresh_copy(source: Path, memlab_sha256: str | None = None) -> Path | None:
    """The executed copy of notebook ``source`` when it was made from this notebook and these memlab sources, else None."""
    copy = executed_path(source)
    if not copy.exists():
        return None
    try:
        recorded = json.loads(copy.read_text(encoding="utf-8")).get("metadata", {}).get("memlab_docs")
    except (OSError, ValueError):
        return None
    return copy if recorded == provenance(source, memlab_sha256) else None


# -- execute -----------------------------------------------------------------------------------


def execute_notebook(source: Path, target: Path, memlab_sha256: str) -> float:
    """Run ``source`` in a fresh kernel (scratch cwd, offline env, widget state stored); write it to ``target``; seconds taken."""
    import nbformat
    from nbclient import NotebookClient

    started = time.perf_counter()
    nb = nbformat.read(source, as_version=4)
    with tempfile.TemporaryDirectory(prefix=f"memlab-docs-{source.stem}-") as scratch:
        # the kernel's cwd is a scratch dir: a notebook writing ./.memlab leaves nothing in the checkout
        client = NotebookClient(
            nb, kernel_name="python3", timeout=CELL_TIMEOUT, store_widget_state=True, resources={"metadata": {"path": scratch}}
        )
        client.execute()  # CellExecutionError on the first failing cell
    errors = [output for cell in nb.cells for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    if errors:
        raise RuntimeError(f"{source.name}: error outputs {errors}")
    nb.metadata["memlab_docs"] = provenance(source, memlab_sha256)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    nbformat.write(nb, partial)
    partial.replace(target)
    return time.perf_counter() - started


def _environment() -> None:
    """Offline settings, and memlab imported from this checkout (the sources hashed), for the kernels and mkdocs alike."""
    for name, value in OFFLINE_ENV.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")  # mkdocs-material's banner about its successor, on every build
    if str(ROOT) not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def execute(*, force: bool = False, jobs: int = 1, names: list[str] | None = None) -> None:
    """Execute every stale (or missing) notebook copy; ``force`` runs them all; ``names`` limits it to those files."""
    sources = sorted(NOTEBOOKS.glob("*.ipynb"))
    if names:
        sources = [path for path in sources if path.name in names or path.stem in names]
    _environment()
    memlab_sha256 = memlab_sources_sha256()
    stale = [path for path in sources if force or fresh_copy(path, memlab_sha256) is None]
    for path in sources:
        if path not in stale:
            print(f"docs: {path.name}: fresh copy, not run again", flush=True)
    for gone in EXECUTED.glob("*.ipynb") if EXECUTED.exists() else ():
        if not (NOTEBOOKS / gone.name).exists():
            gone.unlink()
    failures: list[str] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        running = {pool.submit(execute_notebook, path, executed_path(path), memlab_sha256): path for path in stale}
        for done in concurrent.futures.as_completed(running):
            path = running[done]
            try:
                print(f"docs: {path.name}: executed in {done.result():.1f} s", flush=True)
            except Exception as exc:  # reported together below; the build fails
                executed_path(path).unlink(missing_ok=True)
                failures.append(f"{path.name}: {type(exc).__name__}: {str(exc)[-2000:]}")
    if failures:
        raise SystemExit("docs: notebooks failed:\n" + "\n".join(failures))


# -- widget front end --------------------------------------------------------------------------


def _tarball(name: str, version: str, integrity: str) -> Path:
    """The npm tarball of ``name@version`` in the cache, packed with ``npm pack`` when missing; its sha512 checked."""
    cache = CACHE / "npm"
    path = cache / f"{name.lstrip('@').replace('/', '-')}-{version}.tgz"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit(f"docs: {name}@{version} is not in {cache} and npm is not installed (apt-get install npm)")
        print(f"docs: npm pack {name}@{version} (once; kept in {cache.relative_to(ROOT)})", flush=True)
        subprocess.run([npm, "pack", "--silent", f"{name}@{version}"], cwd=cache, check=True, stdout=subprocess.DEVNULL, timeout=600)
    algorithm, expected = integrity.split("-", 1)
    actual = base64.b64encode(hashlib.new(algorithm, path.read_bytes()).digest()).decode()
    if actual != expected:
        path.unlink()
        raise SystemExit(f"docs: {path.name}: {algorithm} {actual} is not the pinned {expected}; removed, run again")
    return path


def assets() -> Path:
    """Fill ``build/docs/widgets/`` (see the module docstring); returns it."""
    import anywidget

    staging = WIDGETS.with_name("widgets.partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "html-manager").mkdir(parents=True)
    for name, version, integrity, keep in NPM:
        with tarfile.open(_tarball(name, version, integrity)) as archive:
            for member in archive.getmembers():
                inside = member.name.removeprefix("package/")
                if not member.isfile() or not inside.startswith(keep) or inside.endswith((".map", ".LICENSE.txt")):
                    continue
                if name == "requirejs":
                    target = staging / "require.js"
                else:
                    if inside.removeprefix(keep).startswith(("embed.js", "libembed")):
                        continue  # only embed-amd.js is used
                    target = staging / "html-manager" / inside.removeprefix(keep)
                extracted = archive.extractfile(member)
                assert extracted is not None
                target.write_bytes(extracted.read())
    shutil.copy2(Path(anywidget.__file__).parent / "nbextension" / "index.js", staging / "anywidget.js")
    (staging / "memlab-widgets.js").write_text(LOADER, encoding="utf-8")
    (staging / "VERSIONS").write_text(
        "".join(f"{name} {version}\n" for name, version, _, _ in NPM) + f"anywidget {anywidget.__version__} (its Python package)\n",
        encoding="utf-8",
    )
    shutil.rmtree(WIDGETS, ignore_errors=True)
    staging.rename(WIDGETS)
    return WIDGETS


# -- build -------------------------------------------------------------------------------------


SITE = ROOT / "site"
#: written into the site after a build: the hash of what it was built from (:func:`site_is_fresh`)
STAMP = ".memlab-build.json"


def site_inputs_sha256() -> str:
    """One hash of everything the site is built from: the README, mkdocs.yml, docs/, these scripts, the executed notebooks, memlab."""
    digest = hashlib.sha256(memlab_sources_sha256().encode())
    inputs = [ROOT / "README.md", ROOT / "mkdocs.yml", Path(__file__), Path(__file__).with_name("docs_hooks.py")]
    inputs += sorted(path for path in (ROOT / "docs").rglob("*") if path.is_file())
    inputs += sorted(EXECUTED.glob("*.ipynb")) if EXECUTED.exists() else []
    for path in inputs:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def site_is_fresh(site: Path = SITE) -> bool:
    """True when ``site`` was built by :func:`build` from the inputs the checkout has now."""
    try:
        stamp = json.loads((site / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return stamp.get("inputs_sha256") == site_inputs_sha256()


def build(*, jobs: int = 1, site: Path = SITE) -> Path:
    """Execute the stale notebooks, unpack the widget front end, then ``mkdocs build --strict`` into ``site``."""
    started = time.perf_counter()
    _environment()
    execute(jobs=jobs)
    executed = time.perf_counter()
    assets()
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "--site-dir", str(site)], cwd=ROOT, check=True)
    (site / STAMP).write_text(json.dumps({"inputs_sha256": site_inputs_sha256()}) + "\n", encoding="utf-8")
    done = time.perf_counter()
    where = site.relative_to(ROOT) if site.is_relative_to(ROOT) else site
    print(f"docs: {where}/ built in {done - started:.0f} s (notebooks {executed - started:.0f} s, assets and mkdocs {done - executed:.0f} s)")
    return site


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", nargs="?", choices=("build", "execute", "assets"), default="build")
    parser.add_argument("notebooks", nargs="*", help="execute: only these notebooks (file names or stems)")
    parser.add_argument("--force", action="store_true", help="execute: run fresh copies again too")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("MEMLAB_DOCS_JOBS", "1")), help="notebooks run at once (default 1)")
    parser.add_argument("--site-dir", type=Path, default=SITE, help="build: where the site goes (default site/)")
    args = parser.parse_args(argv)
    if args.step == "execute":
        execute(force=args.force, jobs=args.jobs, names=args.notebooks)
    elif args.step == "assets":
        print(assets())
    else:
        build(jobs=args.jobs, site=args.site_dir.resolve())


if __name__ == "__main__":
    main()
