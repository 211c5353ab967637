"""The top-level ``memlab`` namespace: ``__all__`` is exact, and ``import memlab`` is light.

``memlab/__init__.py`` binds some names eagerly (errors, module-level functions) and
resolves others on first access through a module ``__getattr__`` (the stack,
config and models), so the checks resolve every name before comparing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import types

import pytest

import memlab

#: Modules ``import memlab`` must not load (issue contract: memlab loads them on first use).
HEAVY_MODULES = ("litellm", "pandas", "faiss", "ipywidgets", "torch")
#: Wall-clock budget of ``import memlab`` in a fresh interpreter (issue contract).
IMPORT_BUDGET_SECONDS = 0.5


def _defined_by_memlab(value: object) -> bool:
    """True for classes and functions memlab defines (not typing helpers or imported modules)."""
    if isinstance(value, types.ModuleType):
        return False
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and (module == "memlab" or module.startswith("memlab."))


def test_all_has_no_duplicates_and_is_sorted() -> None:
    assert len(memlab.__all__) == len(set(memlab.__all__))
    assert memlab.__all__ == sorted(memlab.__all__), "keep memlab.__all__ sorted"


@pytest.mark.parametrize("name", memlab.__all__)
def test_every_name_in_all_resolves(name: str) -> None:
    value = getattr(memlab, name)
    assert _defined_by_memlab(value), f"memlab.{name} is {value!r}, not something memlab defines"


def test_all_matches_what_memlab_exports() -> None:
    for name in memlab.__all__:  # bind the lazily resolved names
        getattr(memlab, name)
    exported = {name for name, value in vars(memlab).items() if not name.startswith("_") and _defined_by_memlab(value)}
    assert exported == set(memlab.__all__), (
        f"public names missing from __all__: {sorted(exported - set(memlab.__all__))}; "
        f"names in __all__ that memlab does not bind: {sorted(set(memlab.__all__) - exported)}"
    )


def test_lazy_names_are_exported() -> None:
    # Names served by the module __getattr__ are invisible to vars() until first
    # use, so the previous test cannot see one that is missing from __all__.
    lazy = set(vars(memlab).get("_LAZY", {}))
    assert lazy <= set(memlab.__all__), f"lazily resolved names missing from __all__: {sorted(lazy - set(memlab.__all__))}"


def test_dir_lists_every_exported_name() -> None:
    assert set(memlab.__all__) <= set(dir(memlab))


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        memlab.no_such_name  # noqa: B018


_IMPORT_PROBE = textwrap.dedent(
    """
    import json, sys, time
    start = time.perf_counter()
    import memlab
    elapsed = time.perf_counter() - start
    heavy = sorted(name for name in {heavy!r} if name in sys.modules)
    print(json.dumps({{"elapsed": elapsed, "heavy": heavy}}))
    """
)


def _probe_import(cwd) -> dict:
    code = _IMPORT_PROBE.format(heavy=HEAVY_MODULES)
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_memlab_is_light(tmp_path) -> None:
    """A fresh interpreter imports memlab in < 0.5 s, without heavy libraries, writing nothing."""
    # Best of three runs: one slow start on a loaded CI machine should not fail
    # the contract; memlab's own import cost is what is measured.
    probes = [_probe_import(tmp_path) for _ in range(3)]
    for probe in probes:
        assert probe["heavy"] == [], f"import memlab loaded {probe['heavy']}"
    best = min(probe["elapsed"] for probe in probes)
    assert best < IMPORT_BUDGET_SECONDS, f"import memlab took {best:.3f} s (budget {IMPORT_BUDGET_SECONDS} s)"
    assert list(tmp_path.iterdir()) == [], "import memlab created files in the working directory"
