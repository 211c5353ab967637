"""Provenance cleanup (SPEC §7) on generated sessions, on every backend.

A generated session interleaves turns (each citing a random subset of a small
universe of graph nodes and edges, some using earlier guidance), feedback rows
(referencing an earlier turn) and lessons (distilled from random feedback rows).
A delete removes a random subset of the universe. Checked after the cleanup:

* soundness: no surviving turn cites a removed element or uses a removed entry, no
  surviving feedback references a removed turn, no surviving lesson comes from
  removed feedback;
* minimality: every removed entry is reachable from a seed turn by the provenance
  edges (computed here by a breadth-first search, independently of memlab's
  fixpoint), and everything else survives, in order;
* a dry run's receipt equals the real one and changes nothing;
* the persist watermark is lowered by exactly the removed turns it had counted.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab._clock import SystemClock
from memlab.models import SessionContextEntry, SessionFeedbackEntry
from memlab.provenance import PERSIST_WATERMARK_KIND, ForgetEvent, SessionCleaner
from memlab.relational import RelationalStore
from memlab.session import SessionManager
from memlab.testing import supply_backend

BACKENDS = ["memory", "sqlite", "fs", "fakeredis", "redis", "postgres"]
NODES = [f"n{i}" for i in range(6)]
EDGES = [f"e{i}" for i in range(4)]
USER = str(uuid.UUID(int=7))
DATASET = uuid.UUID(int=42)

_counter = itertools.count()


@st.composite
def sessions(draw):
    """A list of steps: ("turn", nodes, edges, used lesson positions) | ("feedback", turn position) | ("lesson", feedback positions)."""
    steps = []
    turns = feedback = lessons = 0
    for _ in range(draw(st.integers(1, 14))):
        kinds = ["turn"] + (["feedback"] if turns else []) + (["lesson"] if feedback else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "turn":
            nodes = draw(st.lists(st.sampled_from(NODES), max_size=3, unique=True))
            edges = draw(st.lists(st.sampled_from(EDGES), max_size=2, unique=True))
            used = draw(st.lists(st.integers(0, lessons - 1), max_size=2, unique=True)) if lessons else []
            steps.append(("turn", nodes, edges, used))
            turns += 1
        elif kind == "feedback":
            steps.append(("feedback", draw(st.integers(0, turns - 1))))
            feedback += 1
        else:
            steps.append(("lesson", draw(st.lists(st.integers(0, feedback - 1), min_size=1, max_size=2, unique=True))))
            lessons += 1
    return steps


async def _build(cache, session_id: str, steps) -> list[str]:
    """Write the session; returns the turn ids in order."""
    turn_ids: list[str] = []
    feedback_ids: list[str] = []
    lesson_ids: list[str] = []
    for step in steps:
        if step[0] == "turn":
            _, nodes, edges, used = step
            entry = await cache.create_qa_entry(
                USER,
                session_id,
                question=f"q{len(turn_ids)}",
                answer="a",
                used_graph_element_ids={"node_ids": nodes, "edge_ids": edges},
                used_session_context_ids=[lesson_ids[i] for i in used] or None,
            )
            turn_ids.append(entry.qa_id)
        elif step[0] == "feedback":
            row = SessionFeedbackEntry(raw_text="that was wrong", referenced_qa_ids=[turn_ids[step[1]]])
            await cache.create_session_context_entry(USER, session_id, row.model_dump(mode="json"))
            feedback_ids.append(row.id)
        else:
            lesson = SessionContextEntry(section="rules", content="cite sources", confidence=0.9, source_feedback_ids=[feedback_ids[i] for i in step[1]])
            await cache.create_session_context_entry(USER, session_id, lesson.model_dump(mode="json"))
            lesson_ids.append(lesson.id)
    return turn_ids


def _reachable(turns, rows, removed_nodes: set[str], removed_edges: set[str]) -> set[str]:
    """Entry ids reachable from the seed turns along turn -> feedback -> lesson -> consuming turn (BFS)."""
    edges: dict[str, set[str]] = {}
    for row in rows:
        if row.get("kind") == "feedback":
            for qa_id in row["referenced_qa_ids"]:
                edges.setdefault(qa_id, set()).add(row["id"])
        elif row.get("kind") == "context":
            for feedback_id in row["source_feedback_ids"]:
                edges.setdefault(feedback_id, set()).add(row["id"])
    for turn in turns:
        for used in turn.used_session_context_ids or []:
            edges.setdefault(used, set()).add(turn.qa_id)
    seeds = [
        turn.qa_id
        for turn in turns
        if set((turn.used_graph_element_ids or {}).get("node_ids", [])) & removed_nodes
        or set((turn.used_graph_element_ids or {}).get("edge_ids", [])) & removed_edges
    ]
    seen, queue = set(seeds), deque(seeds)
    while queue:
        for nxt in edges.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_cleanup_is_sound_minimal_and_dry_runs_match(backend, tmp_path):
    runner = asyncio.Runner()
    records = RelationalStore(tmp_path / "memlab.db", SystemClock())
    supply = supply_backend(backend, tmp_path=tmp_path)
    try:
        cache = runner.run(supply.__aenter__())
        runner.run(records.open())
        cleaner = SessionCleaner(cache, records, default_session_id="default_session", turn_lock=SessionManager(cache).turn_lock)

        @settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(
            steps=sessions(),
            removed_nodes=st.sets(st.sampled_from(NODES), max_size=3),
            removed_edges=st.sets(st.sampled_from(EDGES), max_size=2),
            watermark=st.integers(0, 14),
            attributed=st.booleans(),
        )
        def check(steps, removed_nodes, removed_edges, watermark, attributed):
            runner.run(_example(cache, records, cleaner, steps, removed_nodes, removed_edges, watermark, attributed))

        check()
    finally:
        runner.run(records.close())
        runner.run(supply.__aexit__(None, None, None))
        runner.close()


async def _example(cache, records, cleaner, steps, removed_nodes, removed_edges, watermark, attributed):
    session_id = f"s{next(_counter)}"
    turn_ids = await _build(cache, session_id, steps)
    count = min(watermark, len(turn_ids))
    mark = {"id": f"{PERSIST_WATERMARK_KIND}:{DATASET}", "kind": PERSIST_WATERMARK_KIND, "count": count}
    await cache.create_session_context_entry(USER, session_id, mark)
    # a session recorded for the dataset, or recorded without one: both are candidates of a one-document delete
    await records.sessions.touch(USER, session_id, DATASET if attributed else None)
    turns = await cache.get_all_qa_entries(USER, session_id)
    rows = await cache.get_session_context_entries(USER, session_id)
    expected = _reachable(turns, rows, removed_nodes, removed_edges)

    event = ForgetEvent(DATASET, frozenset({"doc"}), frozenset(removed_nodes), frozenset(removed_edges), False, dry_run=True)
    dry = await cleaner.after_forget(event)
    assert await cache.get_all_qa_entries(USER, session_id) == turns  # a dry run changes nothing
    assert await cache.get_session_context_entries(USER, session_id) == rows
    real = await cleaner.after_forget(ForgetEvent(DATASET, event.data_ids, event.node_ids, event.edge_ids, False))

    mine = [session for session in real.sessions if session.session_id == session_id]
    assert [session for session in dry.sessions if session.session_id == session_id] == mine
    assert not real.failures
    removed = {entry for session in mine for entry in session.qa_ids + session.context_ids}
    assert removed == expected  # minimal (nothing outside the closure) and complete (the whole closure)

    after_turns = await cache.get_all_qa_entries(USER, session_id)
    after_rows = await cache.get_session_context_entries(USER, session_id)
    assert [turn.qa_id for turn in after_turns] == [turn.qa_id for turn in turns if turn.qa_id not in removed]
    survivors = {turn.qa_id for turn in after_turns} | {row["id"] for row in after_rows}
    for turn in after_turns:  # soundness
        used = turn.used_graph_element_ids or {}
        assert not set(used.get("node_ids", [])) & removed_nodes and not set(used.get("edge_ids", [])) & removed_edges
        assert set(turn.used_session_context_ids or []) <= survivors
    for row in after_rows:
        if row.get("kind") == "feedback":
            assert set(row["referenced_qa_ids"]) <= survivors
        elif row.get("kind") == "context":
            assert set(row["source_feedback_ids"]) <= survivors
    assert [row["id"] for row in after_rows] == [row["id"] for row in rows if row["id"] not in removed]

    [stored_mark] = [row for row in after_rows if row["kind"] == PERSIST_WATERMARK_KIND]
    assert stored_mark["count"] == count - sum(1 for turn in turns[:count] if turn.qa_id in removed)
