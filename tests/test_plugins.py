"""Third-party strategies by name (issue 23): a real distribution, installed with pip, used through the environment.

The plugin distribution is built in a temporary directory (a pyproject and two
modules) and installed with ``pip install --target``; each check runs in a
subprocess whose ``PYTHONPATH`` holds that directory, so the entry points are
those of an installed distribution, read by :mod:`importlib.metadata`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

DIST = "memlab-demo-plugin"

PYPROJECT = f"""
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST}"
version = "0.1"

[tool.setuptools]
py-modules = ["memlab_demo_plugin", "memlab_demo_broken"]

[project.entry-points."memlab.cache_backends"]
democache = "memlab_demo_plugin:DemoCache"
memory = "memlab_demo_plugin:Shadow"

[project.entry-points."memlab.session_retrievers"]
demoretriever = "memlab_demo_plugin:DemoRetriever"

[project.entry-points."memlab.session_rerankers"]
demoreranker = "memlab_demo_plugin:DemoReranker"

[project.entry-points."memlab.merge_policies"]
demomerge = "memlab_demo_plugin:DemoMerge"
broken = "memlab_demo_broken:Nothing"

[project.entry-points."memlab.ttl_policies"]
demottl = "memlab_demo_plugin:DemoTTL"

[project.entry-points."memlab.analysis_modes"]
demomode = "memlab_demo_plugin:DemoMode"

[project.entry-points."memlab.embedders"]
demoembedder = "memlab_demo_plugin:DemoEmbedder"
"""

PLUGIN = '''
from memlab.analysis import SequentialMode
from memlab.cache import MemoryCache
from memlab.embeddings import HashingEmbedder
from memlab.merge import RawOnlyMerge
from memlab.session.rerankers import MMRSessionReranker
from memlab.session.retrievers import KeywordSessionRetriever
from memlab.ttl import SlidingTTL


class DemoCache(MemoryCache):
    name = "democache"


class Shadow(MemoryCache):
    """Named like the built-in ``memory``: never used, as built-ins win."""


class DemoRetriever(KeywordSessionRetriever):
    name = "demoretriever"


class DemoReranker(MMRSessionReranker):
    name = "demoreranker"


class DemoMerge(RawOnlyMerge):
    pass


class DemoTTL(SlidingTTL):
    name = "demottl"


class DemoMode(SequentialMode):
    name = "demomode"


class DemoEmbedder(HashingEmbedder):
    @classmethod
    def from_config(cls, config):
        return cls(64)
'''


def _can_build_offline() -> bool:
    """True when the venv's setuptools builds wheels by itself (70.1+, or with ``wheel`` installed)."""
    try:
        import setuptools
    except ImportError:
        return False
    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A directory holding the installed plugin distribution (pip ``--target``)."""
    source = tmp_path_factory.mktemp("plugin_src")
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "memlab_demo_plugin.py").write_text(PLUGIN)
    (source / "memlab_demo_broken.py").write_text('raise ImportError("memlab_demo_broken cannot be imported")\n')
    target = tmp_path_factory.mktemp("plugin_site")
    # without a local wheel-building setuptools, pip fetches the build backend from the package index
    isolation = ["--no-build-isolation"] if _can_build_offline() else []
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", *isolation, "--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    assert (target / "memlab_demo_plugin.py").exists()
    return target


def _run(plugin_path: Path, code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CACHE_", "SESSION_", "MEMLAB_", "EMBEDDING_"))}
    environ.update(env, PYTHONPATH=os.pathsep.join([str(plugin_path), environ.get("PYTHONPATH", "")]), MEMLAB_DATA_ROOT=str(tmp_path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environ, capture_output=True, text=True, cwd=tmp_path)


TURN = """
    import asyncio, json
    from memlab import MemoryStack, StackConfig

    async def main():
        config = StackConfig.from_env()
        async with MemoryStack.from_config(config) as stack:
            await stack.remember("The capital of France is Paris.", session_id="chat")
            results = await stack.recall("paris france", session_id="chat")
            print(json.dumps({
                "cache": type(stack.cache).__name__,
                "ttl": type(stack.cache.ttl).__name__,
                "retriever": type(stack.session_manager.retriever).__name__,
                "reranker": type(stack.session_manager.reranker).__name__,
                "merge": type(stack.merge).__name__,
                "analysis": type(stack.analysis).__name__,
                "embedder": type(stack.embedder).__name__,
                "answers": [r.answer for r in results],
            }))

    asyncio.run(main())
"""


def _turn(plugin_path: Path, tmp_path: Path, **env: str) -> dict:
    done = _run(plugin_path, TURN, env, tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_plugin_cache_backend_runs_a_turn_by_name(plugin_path, tmp_path):
    seen = _turn(plugin_path, tmp_path, CACHE_BACKEND="DemoCache", MEMLAB_TTL_POLICY="demottl")
    assert (seen["cache"], seen["ttl"]) == ("DemoCache", "DemoTTL")
    assert seen["answers"] == ["The capital of France is Paris."]


def test_plugin_retriever_merge_mode_and_embedder_by_name(plugin_path, tmp_path):
    seen = _turn(
        plugin_path,
        tmp_path,
        CACHE_BACKEND="memory",
        SESSION_RETRIEVER="demoretriever",
        SESSION_RERANKER="demoreranker",
        MEMLAB_MERGE_POLICY="demomerge",
        SESSION_SEARCH_MODE="demomode",
        EMBEDDING_MODEL="demoembedder",
    )
    # "memory" is also a plugin's name: the built-in wins
    assert seen["cache"] == "MemoryCache"
    assert (seen["retriever"], seen["merge"], seen["analysis"], seen["embedder"]) == ("DemoRetriever", "DemoMerge", "DemoMode", "DemoEmbedder")
    assert seen["reranker"] == "DemoReranker"
    assert seen["answers"] == ["The capital of France is Paris."]


def test_a_plugin_that_fails_to_import_is_a_config_error_naming_it_and_its_distribution(plugin_path, tmp_path):
    code = """
        from memlab import ConfigError, StackConfig
        from memlab.config import build_merge_policy
        try:
            build_merge_policy(StackConfig.from_env())
        except ConfigError as exc:
            print(exc)
    """
    done = _run(plugin_path, code, {"MEMLAB_MERGE_POLICY": "broken"}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "'broken'" in done.stdout and DIST in done.stdout and "memlab_demo_broken cannot be imported" in done.stdout


def test_the_unknown_name_error_and_help_list_installed_plugins_with_their_distribution(plugin_path, tmp_path):
    done = _run(plugin_path, "from memlab.cli import main; raise SystemExit(main(['demo', 'session']))", {"CACHE_BACKEND": "nosuch"}, tmp_path)
    assert done.returncode == 2
    assert "unknown cache backend 'nosuch'" in done.stderr
    assert f"democache ({DIST})" in done.stderr and f"memory ({DIST})" in done.stderr
    shown = _run(plugin_path, "from memlab.cli import main; main(['--help'])", {}, tmp_path)
    assert "installed plugins:" in shown.stdout
    for name in ("democache", "demoretriever", "demoreranker", "demomerge", "broken", "demottl", "demomode", "demoembedder"):
        assert f"{name} ({DIST})" in shown.stdout
