"""memlab.widgets as a package: lazy imports, is_available(), the missing-extra error, display, settle()."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from memlab import ValidationError, widgets
from memlab.models import ForgetResult

PROBE = """
import json, sys
import memlab.widgets as w
names = [w.SessionExplorer, w.TurnInspector, w.ModeComparison, w.CleanupViewer, w.UsageExplorer, w.FrameGrid, w.ExplorerPage]
heavy = ("ipywidgets", "anywidget", "matplotlib", "plotly", "pandas")
print(json.dumps({"available": w.is_available(), "loaded": sorted(m for m in heavy if m in sys.modules)}))
"""


def test_importing_the_package_and_its_classes_loads_no_widget_library() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {"available": True, "loaded": []}


def test_all_lists_the_explorers() -> None:
    assert widgets.__all__ == ["CleanupViewer", "ExplorerPage", "FrameGrid", "ModeComparison", "SessionExplorer", "TurnInspector", "UsageExplorer", "is_available"]
    assert set(widgets.__all__) <= set(dir(widgets))
    with pytest.raises(AttributeError, match="Nope"):
        widgets.Nope  # noqa: B018


def test_without_ipywidgets_construction_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'memlab\[widgets\]'"):
        widgets.CleanupViewer(ForgetResult())


def test_without_anywidget_the_grid_names_the_extra(monkeypatch) -> None:
    import pandas as pd

    from memlab.widgets import _grid

    _grid._view_class.cache_clear()
    monkeypatch.setitem(sys.modules, "anywidget", None)
    try:
        with pytest.raises(ImportError, match=r"pip install 'memlab\[widgets\]'"):
            widgets.FrameGrid(pd.DataFrame({"a": [1]}))
    finally:
        _grid._view_class.cache_clear()


def test_an_explorer_displays_as_its_widget() -> None:
    viewer = widgets.CleanupViewer(ForgetResult(dry_run=True))
    bundle = viewer._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == viewer.widget.model_id


def test_a_callback_error_shows_in_status_and_settle_raises_it() -> None:
    viewer = widgets.CleanupViewer(ForgetResult())

    async def failing() -> None:
        raise ValidationError("no such thing")

    viewer._schedule(failing)  # no loop running: the load waits for settle()
    assert len(viewer.pending) == 1
    with pytest.raises(ValidationError, match="no such thing"):
        asyncio.run(viewer.settle())
    assert "no such thing" in viewer.status.value and viewer.pending == [] and viewer.errors == []


async def test_settle_waits_for_loads_scheduled_on_the_running_loop() -> None:
    viewer = widgets.CleanupViewer(ForgetResult())
    done = []

    async def slow() -> None:
        await asyncio.sleep(0.01)
        done.append(1)

    viewer._schedule(slow)
    viewer._schedule(slow)
    await viewer.settle()
    assert done == [1, 1] and viewer.pending == []
