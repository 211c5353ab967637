"""Every notebook in ``notebooks/`` runs end to end, and is committed clean.

Notebooks are documentation that executes: each one runs in a fresh ``python3``
kernel (the venv's own kernelspec) with this process's environment, so the
offline settings ``make test`` exports (``LITELLM_LOCAL_MODEL_COST_MAP`` & co)
reach the kernel. A cell that raises fails the test with the cell's traceback.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
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


def test_notebooks_exist() -> None:
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
    errors = [output for cell in nb.cells for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    assert not errors, f"{path.name}: error outputs {errors}"


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
