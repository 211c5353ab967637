"""The shape of the package, checked from its source: one exception tree, no import cycles, no private imports.

* Every exception class memlab defines lives in :mod:`memlab.exceptions` and derives
  from :class:`~memlab.exceptions.MemlabError`; each is exported from ``memlab``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import memlab
from memlab import exceptions

ROOT = Path(memlab.__file__).resolve().parent


def _modules() -> list[str]:
    """Every module of the memlab package (migration scripts and data folders excluded)."""
    names = ["memlab"]
    for info in pkgutil.walk_packages([str(ROOT)], prefix="memlab."):
        if ".migrations.versions" in info.name or info.name.endswith(".migrations.env"):
            continue
        names.append(info.name)
    return names


def _exception_classes_defined_in_source() -> list[tuple[str, str, list[str]]]:
    """``(module path, class name, base names)`` of every class whose bases look like exceptions."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base) for base in node.bases]
                if any(base.endswith(("Error", "Exception", "Warning")) or base in {"MemlabError"} for base in bases):
                    found.append((str(path.relative_to(ROOT)), node.name, bases))
    return found


def test_every_exception_class_is_defined_in_exceptions_py():
    elsewhere = [(path, name) for path, name, _ in _exception_classes_defined_in_source() if path != "exceptions.py"]
    assert elsewhere == [], f"define these in memlab/exceptions.py: {elsewhere}"


def test_every_exception_memlab_raises_derives_from_memlab_error_and_is_exported():
    for module_name in _modules():
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__.startswith("memlab"):
                assert issubclass(value, exceptions.MemlabError), f"{module_name}.{name} is not a MemlabError"
                assert value.__module__ == "memlab.exceptions", f"{module_name}.{name} is defined outside exceptions.py"
    for name in exceptions.__all__:
        assert getattr(memlab, name) is getattr(exceptions, name)
        assert name in memlab.__all__


def test_the_tree_in_the_docstring_names_every_class():
    for name in exceptions.__all__:
        assert name in exceptions.__doc__, f"draw {name} in the exceptions module docstring"
