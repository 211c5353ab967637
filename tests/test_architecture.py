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
        if ".migrations." in info.name and (".versions" in info.name or info.name.endswith(".env")):
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


# -- the import graph ------------------------------------------------------------------------------


def _module_files() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        if "migrations/" in path.as_posix() and "/versions/" in path.as_posix():
            continue
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _module_files()
TREES = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in MODULES.items()}


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _reexports(package: str) -> dict[str, str]:
    """``name -> module`` for what a package ``__init__`` binds by import or lists in its lazy ``_LAZY`` map."""
    found: dict[str, str] = {}
    for node in TREES[package].body:
        if isinstance(node, ast.ImportFrom):
            source = _absolute(package, node)
            for alias in node.names:
                found[alias.asname or alias.name] = source
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == "_LAZY" for target in targets):
                for key, value in zip(node.value.keys, node.value.values):
                    if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                        found[key.value] = value.value.partition(":")[0]
    return found


def _defining_module(module: str, name: str, seen: frozenset = frozenset()) -> str:
    """The module whose code ``from module import name`` depends on, following package re-exports."""
    if f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    if MODULES[module].name == "__init__.py" and (module, name) not in seen:
        source = _reexports(module).get(name)
        if source in MODULES:
            return _defining_module(source, name, seen | {(module, name)})
    return module


def _imports(module: str):
    """``(target module, imported name or None, line)`` of every memlab import in ``module``, wherever it stands."""
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            if source in MODULES:
                for alias in node.names:
                    yield source, alias.name, node.lineno


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {module: set() for module in MODULES}
    for module in MODULES:
        for source, name, _ in _imports(module):
            target = _defining_module(source, name) if name else source
            if target != module:
                edges[module].add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles_counting_type_checking_and_function_level_imports():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _private_owner(module: str) -> str | None:
    """The package a module is private to (the parent of its first ``_`` part), or None for a public module."""
    parts = module.split(".")
    for depth, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:depth])
    return None


def test_no_module_imports_a_private_name_or_module_of_another_package():
    offenders = []
    for module in MODULES:
        inside = _package_of(module)
        for source, name, line in _imports(module):
            owner = _private_owner(source)
            if owner is not None and not (inside == owner or inside.startswith(owner + ".")):
                offenders.append(f"{module}:{line} imports {source}" + (f".{name}" if name else ""))
            elif name and name.startswith("_") and not name.startswith("__") and _package_of(source) != inside:
                offenders.append(f"{module}:{line} imports the private name {source}.{name}")
    assert offenders == [], "\n".join(offenders)
