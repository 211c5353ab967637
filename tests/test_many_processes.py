"""Many OS processes on one data root, with the default settings.

* Cold start: 8 spawned processes open the same *fresh* data root at once (three
  rounds, each on a new root); every one opens, and every turn they write is readable.
* Defaults under load: 8 processes x 60 ``remember(text, session_id=...)`` with the
  default ``self_improvement=True`` on the default sqlite cache: no turn is lost, even
  while the background graph work of every process writes the same data root.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from memlab import MemoryStack, StackConfig
from memlab.testing import fast_config
from memlab.testing.processes import run_in_processes

PROCESSES = 8


def _stack(root: str, defaults: bool) -> MemoryStack:
    """The default config (MiniLM embedder, sqlite cache), or the fast one (hashing embedder)."""
    return MemoryStack.from_config(StackConfig(data_root=Path(root)) if defaults else fast_config(Path(root)))


async def _writer(root: str, writer: int, turns: int, defaults: bool, *, barrier) -> None:
    barrier.wait(timeout=120)  # every process opens the fresh root at the same moment
    async with _stack(root, defaults) as stack:
        for i in range(turns):
            if defaults:  # remember()'s own defaults: self_improvement=True
                result = await stack.remember(f"writer {writer} turn {i} about Lisbon", session_id=f"s{writer % 2}")
            else:
                result = await stack.remember(
                    f"writer {writer} turn {i} about Lisbon", session_id=f"s{writer % 2}", self_improvement=False
                )
            if result.status != "session_stored":
                raise AssertionError(f"writer {writer} turn {i}: {result.status}")


async def _run_writers(root: Path, turns: int, defaults: bool) -> None:
    failures = await run_in_processes(_writer, [(str(root), w, turns, defaults) for w in range(PROCESSES)])
    assert not failures, f"{len(failures)} of {PROCESSES} processes failed; first:\n{failures[0]}"


async def _stored_turns(root: Path) -> list[str]:
    async with _stack(str(root), defaults=False) as stack:
        texts = []
        for session in ("s0", "s1"):
            texts.extend(entry.answer for entry in await stack.session.get_session(session_id=session))
        return texts


def _expected(turns: int) -> list[str]:
    return [f"writer {w} turn {i} about Lisbon" for w in range(PROCESSES) for i in range(turns)]


@pytest.mark.slow
async def test_eight_processes_open_a_fresh_data_root_at_once(tmp_path):
    for round_ in range(3):
        root = tmp_path / f"root-{round_}-{uuid.uuid4().hex[:6]}"  # does not exist yet: every process creates it
        await _run_writers(root, turns=5, defaults=False)
        assert sorted(await _stored_turns(root)) == sorted(_expected(5))


@pytest.mark.slow
async def test_default_settings_lose_no_turn_across_processes(tmp_path):
    root = tmp_path / "root"
    await _run_writers(root, turns=60, defaults=True)
    stored = await _stored_turns(root)
    assert len(stored) == len(set(stored)) == PROCESSES * 60
    assert sorted(stored) == sorted(_expected(60))
