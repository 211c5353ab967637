"""A delete racing a running turn: once forget() and the turn have returned, no stored turn cites a removed element.

The offline LLM is slowed down so that the delete lands after the turn has read the
graph and before it stores itself (the window the session cleaner must cover, see
:mod:`memlab.provenance`). Every test first checks that the race really happened: the
racing turn's answer used an element the delete removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from memlab import MemoryStack
from memlab.config import AnalysisConfig, CacheConfig, LLMConfig
from memlab.testing import fast_config, postgres_database, server_url
from memlab.testing.processes import run_in_processes

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."
QUESTION = "Who discovered Polonium?"
LATENCY_MS = 800
#: when the delete starts, per mode: after the turn has retrieved, before its last LLM call returns
DELETE_AFTER_S = {"concurrent": 0.4, "off": 0.4, "sequential": 1.2}


@contextlib.asynccontextmanager
async def _cache(backend: str):
    """(cache settings, metadata URL or None) for ``backend``."""
    if backend in ("memory", "sqlite", "fs"):
        yield {"backend": backend}, None
    elif backend == "redis":
        url = urlsplit(server_url("MEMLAB_TEST_REDIS_URL"))
        yield {"backend": "redis", "host": url.hostname, "port": url.port}, None
    else:
        async with postgres_database("memlab_race") as db_url:
            yield {"backend": "postgres", "db_url": db_url}, None


def _config(root: str | Path, cache: dict, mode: str, db_url: str | None = None):
    config = fast_config(
        Path(root), cache=CacheConfig(**cache), llm=LLMConfig(offline_latency_ms=LATENCY_MS), analysis=AnalysisConfig(search_mode=mode)
    )
    return config.model_copy(update={"db_url": db_url}) if db_url else config


def _cited(turn) -> set[str]:
    used = turn.used_graph_element_ids or {}
    return set(used.get("node_ids") or ()) | set(used.get("edge_ids") or ())


async def _assert_nothing_cites(stack, removed: set[str], session_id: str | None) -> None:
    turns = await stack.session.get_session(session_id)
    assert turns, "the session lost its turns"
    for turn in turns:
        assert not _cited(turn) & removed, f"turn {turn.qa_id} cites removed elements {sorted(_cited(turn) & removed)}"


BACKENDS = ["memory", "sqlite", "fs", pytest.param("redis", marks=pytest.mark.server), pytest.param("postgres", marks=pytest.mark.server)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("mode", "session_id"), [("concurrent", "race"), ("sequential", "race"), ("concurrent", None)])
async def test_a_delete_during_a_turn_cleans_that_turn_once_it_is_stored(backend, mode, session_id, tmp_path):
    async with _cache(backend) as (cache, db_url), MemoryStack.from_config(_config(tmp_path, cache, mode, db_url)) as stack:
        curie = await stack.remember(CURIE, dataset="science")
        await stack.remember(TURING, dataset="science")  # the delete takes one document, not the dataset
        turn = asyncio.ensure_future(stack.search(QUESTION, session_id=session_id, datasets=["science"]))
        await asyncio.sleep(DELETE_AFTER_S[mode])
        assert not turn.done()
        result = await stack.forget(data_id=curie.data_ids[0], dataset="science")
        [answer] = await turn
        removed = set(result.node_ids) | set(result.edge_ids)
        assert set(answer.raw["used_node_ids"]) & removed, "no race: the turn did not read what the delete removed"
        # the receipt names the racing turn: the cleaner waited for it to be stored, then removed it
        assert answer.raw["qa_id"] in result.cleanup.qa_ids, result.cleanup
        assert result.cleanup.failures == []
        [later] = await stack.search(QUESTION, session_id=session_id, datasets=["science"])  # a turn after the delete
        assert not set(later.raw["used_node_ids"]) & removed
        await _assert_nothing_cites(stack, removed, answer.raw["session_id"])


async def test_a_delete_waits_for_a_turn_in_progress_but_not_for_other_sessions(tmp_path):
    async with MemoryStack.from_config(_config(tmp_path, {"backend": "sqlite"}, "off")) as stack:
        curie = await stack.remember(CURIE, dataset="science")
        await stack.remember(TURING, dataset="science")
        turn = asyncio.ensure_future(stack.search(QUESTION, session_id="busy", datasets=["science"]))
        await asyncio.sleep(DELETE_AFTER_S["off"])
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await stack.forget(data_id=curie.data_ids[0], dataset="science")
        assert turn.done()  # forget returned only after the turn it raced had stored itself
        assert loop.time() - started < LATENCY_MS / 1000 + 5
        [answer] = await turn
        assert [session.session_id for session in result.cleanup.sessions] == ["busy"]
        assert result.cleanup.qa_ids == [answer.raw["qa_id"]]


async def test_a_dry_run_does_not_wait_for_running_turns(tmp_path):
    async with MemoryStack.from_config(_config(tmp_path, {"backend": "sqlite"}, "off")) as stack:
        curie = await stack.remember(CURIE, dataset="science")
        turn = asyncio.ensure_future(stack.search(QUESTION, session_id="busy", datasets=["science"]))
        await asyncio.sleep(DELETE_AFTER_S["off"])
        await stack.forget(data_id=curie.data_ids[0], dataset="science", dry_run=True)
        assert not turn.done()
        await turn


async def _racing_process(root: str, cache: dict, db_url: str | None, role: str, data_id: str, out: str, *, barrier) -> None:
    async with MemoryStack.from_config(_config(root, cache, "off", db_url)) as stack:
        if role == "turn":
            await stack.search("warm up", session_id="warm-up", datasets=["science"])  # imports and loads before the race
            barrier.wait(timeout=120)
            [answer] = await stack.search(QUESTION, session_id="race", datasets=["science"])
            Path(out).write_text(json.dumps({"qa_id": answer.raw["qa_id"], "used": answer.raw["used_node_ids"]}))
        else:
            await stack.session.get_session("warm-up")
            barrier.wait(timeout=120)
            await asyncio.sleep(DELETE_AFTER_S["off"])
            result = await stack.forget(data_id=data_id, dataset="science")
            Path(out).write_text(json.dumps({"removed": result.node_ids + result.edge_ids, "cleaned": result.cleanup.qa_ids}))


@contextlib.asynccontextmanager
async def _shared(backend: str):
    """(cache settings, metadata URL): with a server cache both processes share a PostgreSQL metadata database too."""
    if backend in ("sqlite", "fs"):
        yield {"backend": backend}, None
        return
    async with postgres_database("memlab_race") as db_url:
        if backend == "redis":
            url = urlsplit(server_url("MEMLAB_TEST_REDIS_URL"))
            yield {"backend": "redis", "host": url.hostname, "port": url.port}, db_url
        else:
            yield {"backend": "postgres", "db_url": db_url}, db_url


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "fs", pytest.param("redis", marks=pytest.mark.server), pytest.param("postgres", marks=pytest.mark.server)])
async def test_a_delete_in_another_process_cleans_the_turn_it_raced(backend, tmp_path):
    async with _shared(backend) as (cache, db_url):
        root = str(tmp_path / "root")
        async with MemoryStack.from_config(_config(root, cache, "off", db_url)) as stack:
            curie = await stack.remember(CURIE, dataset="science")
            await stack.remember(TURING, dataset="science")
        turn_out, forget_out = str(tmp_path / "turn.json"), str(tmp_path / "forget.json")
        args = [(root, cache, db_url, "turn", curie.data_ids[0], turn_out), (root, cache, db_url, "forget", curie.data_ids[0], forget_out)]
        failures = await run_in_processes(_racing_process, args)
        assert not failures, failures[0]
        turned, forgot = json.loads(Path(turn_out).read_text()), json.loads(Path(forget_out).read_text())
        removed = set(forgot["removed"])
        assert set(turned["used"]) & removed, "no race: the turn did not read what the delete removed"
        assert turned["qa_id"] in forgot["cleaned"]
        async with MemoryStack.from_config(_config(root, cache, "off", db_url)) as stack:
            for session in ("warm-up", "race"):
                for turn in await stack.session.get_session(session):
                    assert not _cited(turn) & removed, f"turn {turn.qa_id} of {session!r} cites removed elements"
            assert turned["qa_id"] not in [turn.qa_id for turn in await stack.session.get_session("race")]
