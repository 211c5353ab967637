"""The adapters load their framework only when imported themselves, and say which extra is missing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

FRAMEWORKS = ("langchain_core", "langgraph", "langsmith")


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False)


def test_import_memlab_and_its_integrations_package_loads_no_framework():
    done = _run(
        f"""
        import sys, memlab, memlab.integrations
        print(sorted(m for m in sys.modules if m.split(".")[0] in {FRAMEWORKS!r}))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("memlab.integrations.langchain", "langchain_core", "memlab[langchain]"),
    ("memlab.integrations.langgraph", "langgraph", "memlab[langgraph]"),
])
def test_without_the_framework_the_import_error_names_the_extra(module, blocked, extra):
    done = _run(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the package were not installed
        try:
            import {module}
        except ImportError as exc:
            print(exc)
        """
    )
    assert done.returncode == 0, done.stderr
    assert extra in done.stdout
