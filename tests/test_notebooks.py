"""Every notebook in ``notebooks/`` runs end to end, and is committed clean.

Notebooks are documentation that executes: each one runs in a fresh ``python3``
kernel (the venv's own kernelspec) with this process's environment, so the
offline settings ``make test`` exports (``LITELLM_LOCAL_MODEL_COST_MAP`` & co)
reach the kernel. A cell that raises fails the test with the cell's traceback.

Each notebook runs once per ``make test``: ``make docs`` (run first) executes them
for the docs site into ``build/docs/notebooks/`` (``scripts/docs_build.py``, the same
fresh kernel, scratch working directory and offline settings). When that copy is
fresh (made from this notebook and these memlab sources, as it records) the test
checks the copy: every code cell executed, the cells those of the notebook, no
error output. Otherwise (no ``make docs`` before, or a notebook or memlab changed
since) the test executes the notebook itself, as before.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
NAME = re.compile(r"^(\d{2})_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")

# What `make test` exports; set here too so running pytest directly behaves the same.
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_OFFLINE_MODE": "true",
    "HF_HUB_OFFLINE": "1",
}


def _ids(paths: list[Path]) -> list[str]:
    return [path.name for path in paths]


@pytest.fixture(scope="module")
def memlab_sha256(docs_build) -> str:
    """The hash of memlab's sources a fresh executed copy records (computed once for the module's tests)."""
    return docs_build.memlab_sources_sha256()


def _check_executed(nb, source: Path) -> None:
    """``nb`` is ``source`` executed in full: the same cells, every code cell run, no error output."""
    original = nbformat.read(source, as_version=4)
    assert [(cell.cell_type, cell.source) for cell in nb.cells] == [(cell.cell_type, cell.source) for cell in original.cells], (
        f"{source.name}: the executed copy's cells differ from the notebook's"
    )
    unrun = [index for index, cell in enumerate(nb.cells) if cell.cell_type == "code" and cell.get("execution_count") is None]
    assert not unrun, f"{source.name}: cells {unrun} were not executed"
    errors = [output for cell in nb.cells for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    assert not errors, f"{source.name}: error outputs {errors}"


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs_build, memlab_sha256) -> None:
    copy = docs_build.fresh_copy(path, memlab_sha256)
    if copy is not None:  # executed by `make docs` from this very notebook and these sources: not run twice
        _check_executed(nbformat.read(copy, as_version=4), path)
        return
    from nbclient import NotebookClient

    for name, value in OFFLINE_ENV.items():
        if name not in os.environ:
            monkeypatch.setenv(name, value)
    nb = nbformat.read(path, as_version=4)
    # The kernel's working directory is a scratch dir: a notebook that writes
    # relative paths (./.memlab, say) must not leave files in the repository.
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    _check_executed(nb, path)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_committed_clean(path: Path) -> None:
    """Outputs stripped, execution counts null, python3 kernel, ``NN_topic.ipynb`` name."""
    assert NAME.match(path.name), f"{path.name}: notebooks are named NN_topic.ipynb (lower-case, underscores)"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", f"{path.name}: kernelspec must be python3"
    dirty = [
        index
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or an execution_count; strip them before committing"


def test_notebook_numbers_are_unique() -> None:
    numbers = [NAME.match(path.name).group(1) for path in NOTEBOOKS if NAME.match(path.name)]
    duplicates = sorted({number for number in numbers if numbers.count(number) > 1})
    assert not duplicates, f"notebook numbers used twice: {duplicates}"


def test_a_stale_executed_copy_is_not_used(docs_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy counts only when it records the notebook's and memlab's current hashes."""
    source = NOTEBOOKS[0]
    monkeypatch.setattr(docs_build, "EXECUTED", tmp_path)
    assert docs_build.fresh_copy(source) is None  # no copy
    nb = nbformat.read(source, as_version=4)
    nb.metadata["memlab_docs"] = docs_build.provenance(source)
    nbformat.write(nb, tmp_path / source.name)
    assert docs_build.fresh_copy(source) == tmp_path / source.name
    nb.metadata["memlab_docs"] = {**docs_build.provenance(source), "memlab_sha256": "0" * 64}  # memlab changed since
    nbformat.write(nb, tmp_path / source.name)
    assert docs_build.fresh_copy(source) is None
