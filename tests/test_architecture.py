"""The shape of the package, checked from its source: one exception tree, no import cycles, no private imports.

* Every exception class memlab defines derives from :class:`~memlab.exceptions.MemlabError`
  and lives in :mod:`memlab.exceptions` (the library's errors, each exported from ``memlab``)
  or in the error module of the command or the benchmarks (:data:`TOOL_ERROR_MODULES`: their
  own errors, not exported from ``memlab``).
* The stack does not depend on the benchmarks: :mod:`memlab.stack`, :mod:`memlab.frames`
  and the widgets import nothing from :mod:`memlab.bench`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
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


#: the errors only the ``memlab`` command / the benchmarks raise, each module's source path -> its module
TOOL_ERROR_MODULES = {"_cli_errors.py": "memlab._cli_errors", "bench/errors.py": "memlab.bench.errors"}
#: where an exception class may be defined
ERROR_MODULES = {"memlab.exceptions", *TOOL_ERROR_MODULES.values()}


def _tool_errors() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_name in TOOL_ERROR_MODULES.values():
        module = importlib.import_module(module_name)
        found.update({name: getattr(module, name) for name in module.__all__})
    return found


def test_every_exception_class_is_defined_in_exceptions_py_or_a_tool_error_module():
    allowed = {"exceptions.py", *TOOL_ERROR_MODULES}
    elsewhere = [(path, name) for path, name, _ in _exception_classes_defined_in_source() if path not in allowed]
    assert elsewhere == [], f"define these in memlab/exceptions.py (or, raised only by the CLI / benchmarks, with them): {elsewhere}"


def test_every_exception_memlab_raises_derives_from_memlab_error_and_is_exported():
    for module_name in _modules():
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__.startswith("memlab"):
                assert issubclass(value, exceptions.MemlabError), f"{module_name}.{name} is not a MemlabError"
                assert value.__module__ in ERROR_MODULES, f"{module_name}.{name} is defined outside the error modules"
    for name in exceptions.__all__:
        assert getattr(memlab, name) is getattr(exceptions, name)
        assert name in memlab.__all__


def test_the_cli_and_benchmark_errors_are_memlab_errors_kept_out_of_the_core_api():
    tool_errors = _tool_errors()
    assert tool_errors, "the tool error modules export their classes in __all__"
    for name, value in tool_errors.items():
        assert issubclass(value, exceptions.MemlabError), name
        assert value.__module__ in TOOL_ERROR_MODULES.values(), f"{name} is defined outside its tool's error module"
        assert name not in exceptions.__all__ and not hasattr(exceptions, name), f"memlab.exceptions must not export {name}"
        assert name not in memlab.__all__ and name not in vars(memlab), f"memlab must not export {name}"


def test_the_tree_in_the_docstring_names_every_class():
    for name in exceptions.__all__:
        assert name in exceptions.__doc__, f"draw {name} in the exceptions module docstring"
    core_tree = exceptions.__doc__.split("Raised only by")[0]
    for name, value in _tool_errors().items():
        module = importlib.import_module(value.__module__)
        assert name in (module.__doc__ or ""), f"draw {name} in the {value.__module__} docstring"
        assert name not in core_tree, f"draw {name} apart from the library's tree in the exceptions docstring"


# -- the stack does not depend on the benchmarks -----------------------------------------------------

#: modules of the library that must not import :mod:`memlab.bench` (at module level, in a function or for type checking)
BENCH_FREE = ("memlab.stack", "memlab.frames")


def _bench_free_modules() -> list[str]:
    return [name for name in _modules() if name in BENCH_FREE or name == "memlab.widgets" or name.startswith("memlab.widgets.")]


def test_the_stack_frames_and_widgets_import_nothing_from_bench():
    offenders = []
    for module in _bench_free_modules():
        path = MODULES[module]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                sources = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                sources = [alias.name for alias in node.names]
            else:
                continue
            if any(source == "memlab.bench" or source.startswith("memlab.bench.") for source in sources):
                offenders.append(f"{module}:{node.lineno}")
    assert offenders == [], f"these import memlab.bench: {offenders}"


def test_importing_the_stack_and_frames_loads_no_benchmark_module():
    code = (
        "import sys, memlab.stack, memlab.frames\n"
        "from memlab import MemoryStack\n"
        "print(sorted(name for name in sys.modules if name == 'memlab.bench' or name.startswith('memlab.bench.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", f"importing memlab.stack / memlab.frames loaded {done.stdout.strip()}"


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
