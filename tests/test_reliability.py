"""Bad input, concurrency and lifecycle through the public stack API.

Each test names the defect it guards against: a raw driver error, a silently lost
write, or an object that carried authority it should not have.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from memlab import MemoryStack, StackConfig
from memlab.config import CacheConfig
from memlab.exceptions import (
    ConfigError,
    PermissionDeniedError,
    SessionParameterValidationError,
    SessionPreconditionError,
    StackStateError,
    ValidationError,
)
from memlab.models import User
from memlab.testing import FakeClock, fast_config, server_url

SURROGATE = "bad \ud800 text"


# -- a burst of session writes on one event loop, per backend ------------------------------------


def _cache_config(name: str, tmp_path) -> CacheConfig:
    if name == "redis":
        from memlab.cache._redis import redis_connection_kwargs

        kwargs = redis_connection_kwargs(server_url("MEMLAB_TEST_REDIS_URL"))
        return CacheConfig(backend="redis", host=kwargs["host"], port=kwargs["port"])
    if name == "postgres":
        return CacheConfig(backend="postgres", db_url=server_url("MEMLAB_TEST_POSTGRES_URL"))
    return CacheConfig(backend=name)


@pytest.mark.parametrize("name", ["sqlite", "fs", "memory", "redis", "postgres"])
async def test_300_gathered_remembers_are_all_stored(name, tmp_path):
    config = fast_config(tmp_path, cache=_cache_config(name, tmp_path))
    session = f"burst-{uuid.uuid4().hex}"
    async with MemoryStack.from_config(config) as stack:
        results = await asyncio.gather(
            *(stack.remember(f"turn {i}", session_id=session, self_improvement=False) for i in range(300))
        )
        assert {result.status for result in results} == {"session_stored"}
        stored = await stack.session.get_session(session_id=session)
        assert sorted(entry.answer for entry in stored) == sorted(f"turn {i}" for i in range(300))
        await stack.session_manager.delete_session((await stack.users.default()).id, session)


# -- text that cannot be encoded, ids that are not ids --------------------------------------------


async def _nothing_stored(stack) -> None:
    assert await stack.session.get_session(session_id="s") == []
    assert await stack.datasets.list() == []


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda stack: stack.remember(SURROGATE, session_id="s"), "data"),
        (lambda stack: stack.remember(["ok", SURROGATE], session_id="s"), "data"),
        (lambda stack: stack.remember("ok", session_id="s\ud800"), "session_id"),
        (lambda stack: stack.remember(SURROGATE), "text"),
        (lambda stack: stack.remember("ok", dataset=SURROGATE), "dataset"),
        (lambda stack: stack.recall(SURROGATE), "query_text"),
        (lambda stack: stack.recall("ok", session_id="s\udfff"), "session_id"),
        (lambda stack: stack.recall("ok", datasets=[SURROGATE]), "datasets"),
        (lambda stack: stack.search(SURROGATE), "query_text"),
        (lambda stack: stack.search([SURROGATE]), "query_text"),
        (lambda stack: stack.session.get_session(session_id="s\ud800"), "session_id"),
        (lambda stack: stack.datasets.create(SURROGATE), "dataset name"),
        (lambda stack: stack.users.create(SURROGATE), "user name"),
    ],
    ids=[
        "remember-text", "remember-list", "remember-session", "remember-document", "remember-dataset", "recall-query",
        "recall-session", "recall-datasets", "search-query", "search-batch", "get-session", "dataset-name", "user-name",
    ],
)
async def test_lone_surrogates_are_a_validation_error_naming_the_field(stack, call, field):
    with pytest.raises(ValidationError, match=field):
        await call(stack)
    await _nothing_stored(stack)


async def test_feedback_text_with_a_lone_surrogate_raises_and_leaves_the_turn(stack):
    stored = await stack.remember("answer", session_id="s")
    with pytest.raises(ValidationError, match="feedback_text"):
        await stack.session.add_feedback("s", stored.data_ids[0], feedback_text=SURROGATE)
    [entry] = await stack.session.get_session(session_id="s")
    assert entry.feedback_text is None


@pytest.mark.parametrize("session_id", [b"s1", ["s"], {"s": 1}, 1.5, 7, "x" * 256, "a\x00b", "   "], ids=repr)
async def test_session_ids_must_be_valid_strings(stack, session_id):
    with pytest.raises(SessionParameterValidationError, match="session_id"):
        await stack.remember("x", session_id=session_id)
    with pytest.raises(SessionParameterValidationError, match="session_id"):
        await stack.session.get_session(session_id=session_id)
    with pytest.raises(SessionParameterValidationError, match="session_id"):
        await stack.recall("x", session_id=session_id)
    assert await stack.session.get_session(session_id="s") == []


async def test_the_longest_allowed_session_id_round_trips(stack):
    session = "é" * 255
    await stack.remember("kept", session_id=session)
    assert [entry.answer for entry in await stack.session.get_session(session_id=session)] == ["kept"]


@pytest.mark.parametrize("name", ["x" * 256, "a\x00b", "   "], ids=["256_chars", "nul", "blank"])
async def test_dataset_and_user_names_have_one_rule(stack, name):
    with pytest.raises(ValidationError, match="dataset name"):
        await stack.datasets.create(name)
    with pytest.raises(ValidationError, match="user name"):
        await stack.users.create(name)


@pytest.mark.parametrize("last_n", [2**31 - 1, 2**31, 2**63, 10**30], ids=["2^31-1", "2^31", "2^63", "10^30"])
async def test_huge_last_n_returns_every_turn(stack, last_n):
    for i in range(3):
        await stack.remember(f"t{i}", session_id="s")
    assert [entry.answer for entry in await stack.session.get_session(session_id="s", last_n=last_n)] == ["t0", "t1", "t2"]


# -- documents ------------------------------------------------------------------------------------


async def test_deeply_nested_json_is_a_validation_error(stack, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ValidationError, match="deeper than the limit of 100"):
        await stack.remember(deep)
    just_deep_enough = tmp_path / "ok.json"
    just_deep_enough.write_text("[" * 99 + '"leaf"' + "]" * 99)
    result = await stack.remember(just_deep_enough)
    assert result.status == "completed"
    too_deep = tmp_path / "101.json"
    too_deep.write_text("[" * 101 + "1" + "]" * 101)
    with pytest.raises(ValidationError, match="deeper"):
        await stack.remember(too_deep)
    assert len(await stack.datasets.list_data("main_dataset")) == 1


# -- lifecycle ------------------------------------------------------------------------------------


def _session_calls(stack):
    return [
        lambda: stack.session.get_session(session_id="s"),
        lambda: stack.session.add_feedback("s", "q1", feedback_score=3),
        lambda: stack.session.delete_feedback("s", "q1"),
        lambda: stack.session_manager.get_session("u", session_id="s"),
        lambda: stack.session_manager.add_qa("u", "q", "a", session_id="s"),
        lambda: stack.users.default(),
        lambda: stack.users.create("someone"),
        lambda: stack.datasets.list(),
        lambda: stack.datasets.create("d"),
        lambda: stack.remember("x", session_id="s"),
        lambda: stack.recall("x"),
        lambda: stack.search("x"),
        lambda: stack.forget(everything=True),
    ]


async def test_every_call_before_open_or_after_close_is_a_stack_state_error(tmp_path):
    stack = MemoryStack.from_config(fast_config(tmp_path))
    for call in _session_calls(stack):
        with pytest.raises(StackStateError):
            await call()
    async with stack:
        await stack.remember("while open", session_id="s")
    for call in _session_calls(stack):
        with pytest.raises(StackStateError):
            await call()
    async with MemoryStack.from_config(fast_config(tmp_path)) as again:  # the closed stack wrote nothing more
        assert [entry.answer for entry in await again.session.get_session(session_id="s")] == ["while open"]


async def test_close_waits_for_background_improvement_and_logs_what_ran(tmp_path, caplog):
    stack = MemoryStack.from_config(fast_config(tmp_path))
    async with stack:
        await stack.remember("Ada Lovelace wrote the first program.", session_id="s")
        with caplog.at_level(logging.INFO, logger="memlab.stack"):
            await stack.close()
    messages = [record.getMessage() for record in caplog.records]
    assert any("self-improvement of session 's'" in message and "1 new turn(s), 0 new trace step(s), 1 new document(s)" in message for message in messages)
    assert any("self-improvement finished in" in message for message in messages)
    async with MemoryStack.from_config(fast_config(tmp_path)) as again:
        assert len(await again.datasets.list_data("main_dataset")) == 1


async def test_close_bounds_the_wait_and_names_what_was_not_bridged(tmp_path, caplog):
    async with MemoryStack.from_config(fast_config(tmp_path / "warm")) as warm:  # one-off imports happen here, not below
        await warm.remember("Warm up the imports.")
    config = fast_config(tmp_path, llm={"offline_latency_ms": 5000})  # each extraction call takes 5 s
    stack = MemoryStack.from_config(config)
    async with stack:
        await stack.remember("Grace Hopper built a compiler.", session_id="slow")
        with caplog.at_level(logging.INFO, logger="memlab.stack"):
            started = asyncio.get_running_loop().time()
            await stack.close(timeout=0.5)
            assert asyncio.get_running_loop().time() - started < 3
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("'slow'" in message and "improve(" in message for message in warnings)
    async with MemoryStack.from_config(fast_config(tmp_path)) as again:  # the turn itself is kept
        assert [entry.answer for entry in await again.session.get_session(session_id="slow")] == ["Grace Hopper built a compiler."]


# -- authority comes from the store ---------------------------------------------------------------


async def test_forged_user_objects_gain_nothing(stack):
    alice = await stack.users.default()
    bob = await stack.users.create("bob")
    private = await stack.remember("Alice keeps her notes on Lisbon here.", dataset="private")
    forged_agent = User(id=bob.id, name="bob", parent_user_id=alice.id, created_at=bob.created_at)  # claims to be Alice's agent
    stranger = User(id=uuid.uuid4(), name="nobody", created_at=bob.created_at)

    assert not await stack.datasets.can(forged_agent, private.dataset_id, "read")
    with pytest.raises(PermissionDeniedError):
        await stack.datasets.list_data(private.dataset_id, user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.datasets.delete_data(private.dataset_id, private.data_ids[0], user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.datasets.empty_dataset(private.dataset_id, user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.remember("more", dataset=private.dataset_id, user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.recall("Lisbon", dataset_ids=[private.dataset_id], user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.forget(dataset=private.dataset_id, user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.forget(data_id=private.data_ids[0], dataset=private.dataset_id, user=forged_agent)
    with pytest.raises(PermissionDeniedError):
        await stack.datasets.grant(private.dataset_id, forged_agent, "read", by=forged_agent)
    assert await stack.datasets.list(user=forged_agent) == []
    assert [hit for hit in await stack.recall("Lisbon", user=forged_agent) if hit.source == "graph" and "Lisbon" in hit.text] == []

    # an object claiming Alice's id but a different name is just Alice: identity only
    assert (await stack.users.resolve(User(id=alice.id, name="mallory", parent_user_id=bob.id, created_at=alice.created_at))).parent_user_id is None
    for call in (
        lambda: stack.datasets.list(user=stranger),
        lambda: stack.recall("Lisbon", user=stranger),
        lambda: stack.forget(everything=True, user=stranger),
        lambda: stack.datasets.grant(private.dataset_id, bob, "read", by=stranger),
    ):
        with pytest.raises(SessionPreconditionError, match="does not exist"):
            await call()
    assert len(await stack.datasets.list_data(private.dataset_id)) == 1  # nothing was removed


# -- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable, value",
    [
        ("CACHE_PORT", "nan"), ("CACHE_PORT", "inf"), ("CACHE_PORT", "99999"), ("CACHE_PORT", "-1"), ("CACHE_PORT", "80.5"),
        ("MEMLAB_CHUNK_SIZE", "nan"), ("MEMLAB_EXTRACTION_CONCURRENCY", "inf"), ("SESSION_TTL_SECONDS", "nan"),
        ("SESSION_TTL_SECONDS", "inf"), ("SESSION_TTL_SECONDS", "1e308"), ("CACHE_PURGE_INTERVAL_SECONDS", "inf"),
        ("MEMLAB_ANALYSIS_TIMEOUT_SECONDS", "nan"), ("MEMLAB_OFFLINE_LATENCY_MS", "inf"),
        ("CACHE_DB_URL", "not a url"), ("CACHE_DB_URL", "mysql://h/db"), ("MEMLAB_DATA_ROOT", "root\x00x"),
    ],
)
def test_bad_environment_values_name_the_variable(variable, value):
    with pytest.raises(ConfigError, match=variable):
        StackConfig.from_env({variable: value})


@pytest.mark.parametrize(
    "variable, value",
    [("CACHE_PORT", "inf"), ("CACHE_PORT", "80.5"), ("SESSION_TTL_SECONDS", "1e308"), ("CACHING", "maybe"),
     ("CACHE_DB_URL", "mysql://h/db"), ("CACHE_BACKEND", "mongo")],
)
def test_bad_dotenv_values_name_the_variable(tmp_path, variable, value):
    env_file = tmp_path / ".env"
    env_file.write_text(f"{variable.lower()}={value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=variable):
        StackConfig.from_env({}, env_file=env_file)
    assert StackConfig.from_env({variable: ""}, env_file=tmp_path / "absent.env") == StackConfig()


@pytest.mark.parametrize(
    "build",
    [
        lambda: CacheConfig(port=0),
        lambda: CacheConfig(port=70000),
        lambda: CacheConfig(db_url="not a url"),
        lambda: CacheConfig(purge_interval_seconds=float("nan")),
        lambda: StackConfig(ttl={"seconds": float("inf")}),
        lambda: StackConfig(ttl={"seconds": 1e308}),
        lambda: StackConfig(graph={"chunk_size": 10**9}),
        lambda: StackConfig(data_root="a\x00b"),
    ],
    ids=["port0", "port70000", "url", "purge_nan", "ttl_inf", "ttl_huge", "chunk_huge", "root_nul"],
)
def test_bad_values_in_code_are_config_errors_too(build):
    with pytest.raises(ConfigError):
        build()


def test_the_largest_ttl_still_works():
    config = StackConfig.from_env({"SESSION_TTL_SECONDS": "3153600000"})
    assert config.ttl.seconds == 3153600000
    policy_stack = MemoryStack.from_config(config.model_copy(update={"data_root": config.data_root}), clock=FakeClock())
    assert policy_stack.cache is not None


def test_the_docs_stand_alone():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        assert "../shared" not in doc.read_text(), doc
    assert (root / "docs" / "differences.md").exists()
