"""The distribution (issue 27, deliverable 1): ``python -m build`` makes an sdist and a wheel, and
``memlab demo`` / ``import memlab`` run from a fresh venv that has memlab only from that wheel.

The sources are copied to a temporary directory and built there (the sdist first, then the
wheel from the unpacked sdist, as ``python -m build`` does), so the checkout gets no
``build/`` or ``*.egg-info`` and a file missing from the sdist fails the wheel build.

The fresh venv (no ``--system-site-packages``) gets memlab from the wheel, with
``pip install --no-index``. Its dependencies are the installed copies in this test's venv,
and only those: the closure of the wheel's ``Requires-Dist`` (no extras) is computed from
the installed metadata, and a ``.pth`` file names a directory of links to just those
distributions' files. So the venv holds what ``pip install memlab-*.whl`` would give it
(no matplotlib, fastapi, redis, pytest...); pip resolves the wheel's requirements against
it, and nothing is downloaded. The commands then run from a directory
outside the repository, without ``PYTHONPATH``, and the test asserts that ``memlab``
was imported from the venv's own site-packages.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import memlab

ROOT = Path(__file__).resolve().parents[1]
#: what the sdist is built from (the build's inputs: pyproject.toml names README.md and LICENSE)
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "memlab")
OFFLINE = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1"}


def _run(args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """``python -m build`` of a copy of the sources: the directory holding the sdist and the wheel."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(path, source / name)
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, source], cwd=source)
    return out


def _package_files() -> set[str]:
    """Every file of the memlab package in the checkout, as wheel paths (``memlab/...``)."""
    package = ROOT / "memlab"
    return {
        path.relative_to(ROOT).as_posix()
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def _wheel(dist: Path) -> Path:
    [wheel] = dist.glob("memlab-*.whl")
    return wheel


@pytest.mark.slow
def test_build_makes_an_sdist_and_a_wheel_with_every_package_file(dist) -> None:
    [sdist] = dist.glob("memlab-*.tar.gz")
    wheel = _wheel(dist)
    assert wheel.name == f"memlab-{memlab.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = _package_files() - names
    assert not missing, f"files of memlab/ the wheel leaves out (package data?): {sorted(missing)}"
    info = f"memlab-{memlab.__version__}.dist-info"
    assert {f"{info}/licenses/LICENSE", f"{info}/entry_points.txt"} <= names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert f"Version: {memlab.__version__}\n" in metadata and "License-Expression: Apache-2.0\n" in metadata
    assert "Classifier: " in metadata and "Project-URL: " in metadata
    with tarfile.open(sdist) as archive:
        members = {Path(name).relative_to(f"memlab-{memlab.__version__}").as_posix() for name in archive.getnames()[1:]}
    assert {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO"} <= members


def _closure(requirements: list[str], extras: tuple[str, ...] = ()) -> list[importlib.metadata.Distribution]:
    """The distributions of this venv that ``requirements`` (Requires-Dist lines, with ``extras``) pull in, transitively."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [(Requirement(line), extra) for line in requirements for extra in ("", *extras)]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(requirement.name)
        dist = importlib.metadata.distribution(requirement.name)  # a missing one fails here, naming it
        fresh = key not in found
        found[key] = dist
        for wanted in ([""] if fresh else []) + sorted(requirement.extras):
            pending += [(Requirement(line), wanted) for line in dist.requires or ()]
    return list(found.values())


def _dependencies_view(target: Path, wheel: Path, extras: tuple[str, ...] = ()) -> Path:
    """A directory of links to the site-packages entries of the wheel's dependencies with ``extras`` (transitively), nothing else."""
    info = next(name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".dist-info/METADATA"))
    metadata = email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(info).decode())
    target.mkdir()
    for dist in _closure(metadata.get_all("Requires-Dist") or [], extras):
        site = Path(str(dist.locate_file(""))).resolve()
        tops = {Path(str(file)).parts[0] for file in dist.files or () if not str(file).startswith("..")}
        for top in sorted(tops):
            entry = site / top
            if entry.exists() and not top.endswith(".pth") and top != "__pycache__" and not (target / top).exists():
                (target / top).symlink_to(entry)
    return target


def _fresh_venv(dist: Path, base: Path, extras: tuple[str, ...] = ()) -> tuple[Path, dict[str, str], Path]:
    """A venv under ``base`` with ``memlab[extras]`` from the wheel alone: (venv, environment, a working directory)."""
    home = base / "venv"
    _run([sys.executable, "-m", "venv", home], cwd=base)
    python = home / "bin" / "python"
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base).stdout.strip())
    (site / "_memlab_test_dependencies.pth").write_text(f"{_dependencies_view(base / 'dependencies', _wheel(dist), extras)}\n")
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not k.startswith("MEMLAB_")}
    env.update(OFFLINE, PATH=f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONNOUSERSITE="1", MEMLAB_DATA_ROOT=str(base / "data"))
    wanted = f"{_wheel(dist)}[{','.join(extras)}]" if extras else str(_wheel(dist))
    _run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-q", wanted], cwd=base, env=env)
    work = base / "work"
    work.mkdir()
    return home, env, work


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """The core install: (venv directory, environment for its commands, a working directory outside the repository)."""
    return _fresh_venv(dist, tmp_path_factory.mktemp("fresh"))


#: modules that only extras or the dev tools bring (redis, api, widgets, ui, frames, dev): none may be importable
EXTRA_ONLY = ("redis", "asyncpg", "fastapi", "uvicorn", "matplotlib", "ipywidgets", "anywidget", "plotly", "voila", "pyarrow", "pytest",
              "hypothesis")

_PROBE = f"EXTRA_ONLY = {EXTRA_ONLY!r}\n" + """
import importlib.metadata, json, memlab
from memlab import StackConfig, SyncMemoryStack
from memlab.samples import corpus_paths

with SyncMemoryStack.from_config(StackConfig(data_root="lab")) as stack:   # the default stack: MiniLM, offline LLM
    stored = stack.remember("Marie Curie discovered Polonium in 1898.", self_improvement=False)
    answer = stack.recall("Who discovered Polonium?")
    turn = stack.remember("Alice owns the billing service.", session_id="chat", self_improvement=False)
    hits = stack.recall("Who owns billing?", session_id="chat")
dist = importlib.metadata.distribution("memlab")
import importlib.util
print(json.dumps({
    "extras_visible": [name for name in EXTRA_ONLY if importlib.util.find_spec(name) is not None],
    "file": memlab.__file__, "version": memlab.__version__, "metadata_version": dist.version,
    "dist_info": str(dist.locate_file(f"memlab-{dist.version}.dist-info")),
    "samples": [path.name for path in corpus_paths()], "stored": stored.status, "answer": answer[0].text,
    "session": [hit.answer for hit in hits],
}))
"""


@pytest.mark.slow
def test_import_memlab_from_the_wheel_alone(venv) -> None:
    home, env, work = venv
    probe = json.loads(_run([home / "bin" / "python", "-c", _PROBE], cwd=work, env=env).stdout.strip().splitlines()[-1])
    home = home.resolve()
    assert Path(probe["file"]).resolve().is_relative_to(home), f"memlab came from {probe['file']}, not the venv {home}"
    assert Path(probe["dist_info"]).resolve().is_relative_to(home)
    assert probe["version"] == probe["metadata_version"] == memlab.__version__
    assert probe["extras_visible"] == [], "the venv must hold the core install only"
    assert probe["samples"] == ["curie_family.md", "early_computing.md", "missions.csv", "research_labs.json"]
    assert probe["stored"] == "completed" and "Curie" in probe["answer"]
    assert probe["session"] == ["Alice owns the billing service."]
    version = _run([home / "bin" / "memlab", "--version"], cwd=work, env=env).stdout.strip()
    assert version == f"memlab {memlab.__version__}"


@pytest.mark.slow
def test_memlab_demo_from_the_wheel_alone(venv) -> None:
    home, env, work = venv
    done = _run([home / "bin" / "memlab", "demo", "--turns", "6", "--documents", "4", "--latency-ms", "0", "--quiet"], cwd=work, env=env)
    for mode in ("concurrent", "sequential", "off"):
        assert f"\n{mode} " in done.stdout, done.stdout
    from memlab.demo._modes import NO_CHARTS

    assert NO_CHARTS in done.stdout  # the core install has neither plotly nor matplotlib
    report = Path(done.stdout.strip().splitlines()[-1].removeprefix("report: "))
    assert report.is_file() and report.suffix == ".html" and report.resolve().is_relative_to(Path(env["MEMLAB_DATA_ROOT"]).resolve())


def test_the_readme_extras_table_matches_pyproject() -> None:
    """README's Install table lists each optional-dependencies extra with the packages it installs."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("| Extra | Installs | For |") + 2
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        extra, installs, _ = (cell.strip() for cell in line.strip("|").split("|"))
        rows[extra.strip("`")] = (installs, set(re.findall(r"`([^`]+)`", installs)))
    assert set(rows) == set(extras), "the README's extras table and pyproject's optional-dependencies name different extras"
    for extra, requirements in extras.items():
        parsed = [Requirement(line) for line in requirements]
        named = {req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") for req in parsed if req.name != "memlab"}
        installs, listed = rows[extra]
        assert listed == named, f"README row for {extra!r}: {sorted(listed)}, pyproject: {sorted(named)}"
        if any(req.name == "memlab" for req in parsed):
            assert "all of the above" in installs, f"{extra!r} includes other extras: its README row says so"


#: the adapters' extras: a fresh venv with ``memlab[langchain,langgraph,mcp]`` from the wheel and nothing else
FRAMEWORK_EXTRAS = ("langchain", "langgraph", "mcp")

_FRAMEWORKS_PROBE = """
import asyncio, json, sys

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from mcp import Client, StdioServerParameters

from memlab import MemoryStack, StackConfig
from memlab.integrations.langchain import MemlabChatMessageHistory, MemlabRetriever
from memlab.integrations.langgraph import MemlabStore


def graph(model):
    async def remember(state: MessagesState, runtime: Runtime) -> dict:
        text = state["messages"][-1].content
        if text.startswith("remember: "):
            await runtime.store.aput(("memories",), "fact", {"text": text.removeprefix("remember: ")})
        return {}

    async def respond(state: MessagesState, runtime: Runtime) -> dict:
        found = await runtime.store.asearch(("memories",), query=state["messages"][-1].content, limit=1)
        return {"messages": [await model.ainvoke(state["messages"])], "found": [item.value["text"] for item in found]}

    class State(MessagesState):
        found: list

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder


async def main() -> dict:
    out = {}
    async with MemoryStack.from_config(StackConfig(data_root="lab")) as stack:  # the default stack: MiniLM, offline LLM
        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
        chain = RunnableWithMessageHistory(
            prompt | FakeListChatModel(responses=["Alice owns billing."]),
            lambda session_id: MemlabChatMessageHistory(stack, session_id),
            input_messages_key="question", history_messages_key="history",
        )
        await chain.ainvoke({"question": "Who owns billing?"}, config={"configurable": {"session_id": "lc"}})
        out["langchain_turns"] = [[turn.question, turn.answer] for turn in await stack.session.get_session("lc")]
        documents = await MemlabRetriever(stack=stack, session_id="lc", query_type=None).ainvoke("Who owns billing?")
        out["langchain_recalled"] = [document.page_content for document in documents]

        store = MemlabStore(stack, index={"fields": ["text"]})
        compiled = graph(FakeListChatModel(responses=["Noted."])).compile(store=store)
        await compiled.ainvoke({"messages": [HumanMessage("remember: Ann drinks green tea")], "found": []})
        state = await compiled.ainvoke({"messages": [HumanMessage("Which beverage does Ann like?")], "found": []})
        out["langgraph_found"] = state["found"]

    server = StdioServerParameters(command=sys.executable, args=["-m", "memlab", "mcp"], env=dict(__import__("os").environ))
    async with Client(server, read_timeout_seconds=120) as client:
        stored = await client.call_tool("remember", {"text": "Bob runs the deploys.", "session_id": "mcp", "self_improvement": False})
        recalled = await client.call_tool("recall", {"query": "Who runs the deploys?", "session_id": "mcp"})
        out["mcp"] = [stored.is_error, recalled.is_error, recalled.structured_content["result"][0]["answer"]]
    return out


print(json.dumps(asyncio.run(main())))
"""


@pytest.fixture(scope="module")
def framework_venv(dist, tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """A fresh venv with ``memlab[langchain,langgraph,mcp]``: the wheel and those extras' dependencies only."""
    return _fresh_venv(dist, tmp_path_factory.mktemp("frameworks"), FRAMEWORK_EXTRAS)


@pytest.mark.slow
def test_langchain_langgraph_and_an_mcp_client_remember_and_recall_from_the_wheel(framework_venv) -> None:
    home, env, work = framework_venv
    python = home / "bin" / "python"
    where = _run([python, "-c", "import memlab, langgraph, mcp, importlib.util; print(memlab.__file__); print(importlib.util.find_spec('fastapi'))"], cwd=work, env=env)
    memlab_file, fastapi_spec = where.stdout.split()
    assert Path(memlab_file).resolve().is_relative_to(home.resolve()) and fastapi_spec == "None"
    probe = json.loads(_run([python, "-c", _FRAMEWORKS_PROBE], cwd=work, env=env, timeout=300).stdout.strip().splitlines()[-1])
    assert probe["langchain_turns"] == [["Who owns billing?", "Alice owns billing."]]
    assert "Alice owns billing." in " ".join(probe["langchain_recalled"])
    assert probe["langgraph_found"] == ["Ann drinks green tea"]
    assert probe["mcp"] == [False, False, "Bob runs the deploys."]
