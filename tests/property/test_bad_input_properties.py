"""Property: any call of the public API, with any arguments, behaves or raises a named memlab error.

Hypothesis draws calls of ``remember``, ``recall``, ``search``, ``session.*``,
``forget``, ``datasets.*`` and ``users.*`` on one open stack (default sqlite cache,
offline LLM), with arguments mixed from valid values and hostile ones: lone
surrogates, control characters, over-long ids, bytes, NaN, huge integers, lists,
dicts, forged ``User`` objects. For every call:

* it returns, or raises a :class:`~memlab.exceptions.MemlabError` that is not a
  ``BackendError`` (bad input is the caller's error, never a store failure);
* no store failure was swallowed on the way (no "failed open" warning, no
  ``cache_unavailable``) while the stores are healthy;
* when it raised, the stored state (every row of ``memlab.db`` and ``cache.db``,
  every file of the graph store) is exactly what it was before.

``StackConfig`` and ``StackConfig.from_env`` get the same treatment: a config, or
a ``ConfigError``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
import hashlib
import logging
import math
import sqlite3
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab import MemoryStack, StackConfig
from memlab.exceptions import BackendError, ConfigError, MemlabError
from memlab.models import RememberResult, User
from memlab.testing import FakeClock, fast_config

HOSTILE_TEXT = ["\ud800", "a\udfffb", "a\x00b", "tab\tid", "line\nbreak", "x" * 256, "", "   ", "é" * 255, "🙂"]
FRIENDLY_TEXT = ["main_dataset", "s1", "notes", "Who founded Lisbon?", '"Lisbon"', "What happened in 1998?"]

texts = st.one_of(st.sampled_from(HOSTILE_TEXT + FRIENDLY_TEXT), st.text(max_size=12))
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=4),
    st.lists(st.sampled_from(FRIENDLY_TEXT + ["\ud800"]), max_size=2),
    st.dictionaries(st.sampled_from(["id", "x"]), st.integers(), max_size=2),
    st.uuids(),
)
anything = st.one_of(texts, junk)


class _Swallowed(logging.Handler):
    """Collects warnings that mean a store error was turned into a default value."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "failed open" in record.getMessage():
            self.messages.append(record.getMessage())


def _snapshot(root: Path) -> tuple:
    """Every row of both databases and every file (name, size, digest) under the data root."""
    rows = []
    for name in ("memlab.db", "cache.db"):
        path = root / name
        if not path.exists():
            continue
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
            for table in tables:
                rows.append((name, table, sorted(map(repr, conn.execute(f'SELECT * FROM "{table}"')))))
        finally:
            conn.close()
    files = []
    for path in sorted((root / "graph").rglob("*")) if (root / "graph").exists() else []:
        if path.is_file() and path.suffix != ".lock":
            files.append((str(path.relative_to(root)), hashlib.sha256(path.read_bytes()).hexdigest()))
    return tuple(rows), tuple(files)


class World:
    """One open stack with a little data, driven from hypothesis' synchronous examples."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runner = asyncio.Runner()  # its close() cancels what is left on the loop (litellm's logging worker)
        self.stack = MemoryStack.from_config(fast_config(root), clock=FakeClock())
        self.run(self.stack.open())
        self.run(self._seed())

    async def _seed(self) -> None:
        stack = self.stack
        self.alice = await stack.users.default()
        self.bob = await stack.users.create("bob")
        remembered = await stack.remember("Lisbon was founded long ago. Ada Lovelace wrote programs.", dataset="notes")
        self.dataset_id, self.data_id = remembered.dataset_id, remembered.data_ids[0]
        turn = await stack.remember("a first turn about Lisbon", session_id="s1", self_improvement=False)
        self.qa_id = turn.data_ids[0]
        self.forged = User(id=self.bob.id, name="bob", parent_user_id=self.alice.id, created_at=self.bob.created_at)

    def run(self, coro):
        return self.runner.run(coro)

    def close(self) -> None:
        try:
            self.run(self.stack.close())
        finally:
            self.runner.close()


def _calls(world: World):
    """A strategy of ``(label, coroutine factory)`` over the public API."""
    stack = world.stack

    def mostly(valid, hostile=anything):
        """Valid four times in five, so calls with a single bad argument (the interesting ones) are common."""
        return st.integers(0, 4).flatmap(lambda roll: hostile if roll == 0 else valid)

    users = mostly(st.sampled_from([None, None, world.alice, world.bob]), st.one_of(st.just(world.forged), anything))
    datasets = mostly(st.sampled_from(["notes", "main_dataset", world.dataset_id, str(world.dataset_id)]))
    data_ids = mostly(st.sampled_from([world.data_id, str(world.data_id), uuid.uuid4()]))
    qa_ids = mostly(st.just(world.qa_id))
    sessions = mostly(st.sampled_from(["s1", "s2", None]))
    types = mostly(st.sampled_from([None, "CHUNKS", "GRAPH_COMPLETION", "CHUNKS_LEXICAL", "RAG_COMPLETION", "SUMMARIES"]))
    words = mostly(st.sampled_from(FRIENDLY_TEXT))
    top_k = mostly(st.sampled_from([1, 5, 15]), junk)
    flags = st.booleans()

    def call(label, fn, **kwargs):
        return st.fixed_dictionaries(kwargs).map(lambda drawn: (f"{label}({drawn!r})"[:300], lambda: fn(**drawn)))

    return st.one_of(
        call("remember/session", stack.remember, data=words, session_id=sessions, user=users, self_improvement=st.just(False)),
        call("remember/graph", stack.remember, data=mostly(st.lists(st.sampled_from(FRIENDLY_TEXT), min_size=1, max_size=2), anything),
             dataset=datasets, user=users),
        call("recall", stack.recall, query_text=words, query_type=types, datasets=mostly(st.none(), junk),
             session_id=sessions, top_k=top_k, scope=mostly(st.sampled_from([None, "auto", "session", "graph"])), user=users),
        call("search", stack.search, query_text=mostly(words, st.lists(texts, max_size=2)), query_type=types,
             session_id=sessions, top_k=top_k, user=users, only_context=flags),
        call("get_session", stack.session.get_session, session_id=sessions, last_n=mostly(st.sampled_from([None, 1, 10, 2**63]), junk),
             user=users),
        call("add_feedback", stack.session.add_feedback, session_id=sessions, qa_id=qa_ids,
             feedback_text=mostly(st.sampled_from([None, "good", "wrong year"])), feedback_score=mostly(st.sampled_from([None, 1, 5]), junk),
             user=users),
        call("delete_feedback", stack.session.delete_feedback, session_id=sessions, qa_id=qa_ids, user=users),
        call("forget/data", stack.forget, data_id=data_ids, dataset=datasets, user=users),
        call("forget/dataset", stack.forget, dataset=datasets, memory_only=flags, user=users),
        call("datasets.create", stack.datasets.create, name=words, user=users),
        call("datasets.get", stack.datasets.get, name=words, user=users),
        call("datasets.list", stack.datasets.list, user=users, permission=mostly(st.sampled_from(["read", "write"]))),
        call("datasets.grant", stack.datasets.grant, dataset=datasets, user=users, permission=mostly(st.sampled_from(["read", "write"])),
             by=users),
        call("datasets.list_data", stack.datasets.list_data, dataset=datasets, user=users),
        call("datasets.delete_data", stack.datasets.delete_data, dataset=datasets, data_id=data_ids, user=users),
        call("datasets.empty_dataset", stack.datasets.empty_dataset, dataset=datasets, user=users),
        call("users.create", stack.users.create, name=words, parent_user_id=mostly(st.sampled_from([None, world.alice.id]))),
        call("users.resolve", stack.users.resolve, user=users),
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    opened = World(tmp_path_factory.mktemp("bad-input"))
    yield opened
    opened.close()


@pytest.mark.slow
def test_public_api_calls_behave_or_raise_a_named_error_and_change_nothing(world):
    swallowed = _Swallowed()
    logging.getLogger("memlab").addHandler(swallowed)
    outcomes: Counter = Counter()

    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], database=None)
    @given(data=st.data())
    def check(data):
        label, make = data.draw(_calls(world), label="call")
        outcomes[label.partition("(")[0], "called"] += 1
        before = _snapshot(world.root)
        swallowed.messages.clear()
        try:
            result = world.run(make())
        except MemlabError as exc:
            outcomes[label.partition("(")[0], "raised"] += 1
            assert not isinstance(exc, BackendError), f"{label} raised a store error for bad input: {exc!r}"
            assert _snapshot(world.root) == before, f"{label} raised {exc!r} but changed the stored state"
        else:
            if isinstance(result, RememberResult):
                assert result.status != "cache_unavailable", f"{label} lost the write while the cache is healthy"
        assert not swallowed.messages, f"{label} swallowed a store error: {swallowed.messages}"

    try:
        check()
    finally:
        logging.getLogger("memlab").removeHandler(swallowed)
    called = {name for name, what in outcomes if what == "called"}
    assert len(called) >= 16, f"the generator reached too few entry points: {sorted(called)}"
    raised = sum(count for (_, what), count in outcomes.items() if what == "raised")
    calls = sum(count for (_, what), count in outcomes.items() if what == "called")
    assert 0.1 * calls < raised < 0.9 * calls, outcomes  # both paths are exercised


config_values = st.one_of(
    anything, st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["nan", "inf", "-1", "99999", "1e308", "0", "7"])
)


@settings(max_examples=300, database=None)
@given(
    section=st.sampled_from(["cache", "ttl", "session", "analysis", "merge", "llm", "embedding", "graph", "recall"]),
    field=st.sampled_from(
        ["port", "seconds", "policy", "backend", "db_url", "chunk_size", "chunk_overlap", "extraction_concurrency",
         "timeout_seconds", "search_mode", "model", "offline_latency_ms", "warmup_threshold", "rrf_k", "purge_interval_seconds",
         "abandon_after_seconds", "bogus"]
    ),
    value=config_values,
)
def test_stack_config_builds_or_raises_config_error(section, field, value):
    try:
        config = StackConfig(**{section: {field: value}})
    except ConfigError:
        return
    for number in (getattr(getattr(config, section), field, None),):
        if isinstance(number, float):
            assert math.isfinite(number), f"{section}.{field} accepted {number!r}"


@settings(max_examples=300, database=None)
@given(
    env=st.dictionaries(
        st.sampled_from(
            ["CACHE_PORT", "SESSION_TTL_SECONDS", "MEMLAB_CHUNK_SIZE", "MEMLAB_CHUNK_OVERLAP", "MEMLAB_EXTRACTION_CONCURRENCY",
             "CACHE_DB_URL", "CACHE_BACKEND", "MEMLAB_DATA_ROOT", "CACHE_PURGE_INTERVAL_SECONDS", "MEMLAB_OFFLINE_LATENCY_MS",
             "SESSION_SEARCH_MODE", "CACHING", "MEMLAB_ANALYSIS_TIMEOUT_SECONDS", "RECALL_WARMUP_THRESHOLD", "LLM_MODEL"]
        ),
        st.one_of(st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1", "99999", "1e308", "true", "not a url", "a\x00b", ""]), st.text(max_size=8)),
        max_size=4,
    )
)
def test_environment_builds_or_raises_config_error(env):
    try:
        config = StackConfig.from_env(env)
    except ConfigError as exc:
        assert any(name in str(exc) for name in env), f"{exc} names none of {sorted(env)}"
        return
    assert 1 <= config.cache.port <= 65535
    assert config.ttl.seconds is None or math.isfinite(config.ttl.seconds)
    assert "\x00" not in str(config.data_root)
