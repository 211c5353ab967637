import uuid
from datetime import datetime, timezone

import pytest

import memlab
from memlab import (
    ConfigError,
    MemoryStack,
    SessionParameterValidationError,
    SessionPreconditionError,
    SessionQAEntryValidationError,
    StackConfig,
    StackStateError,
    ValidationError,
)
from memlab.config import CacheConfig
from memlab.testing import FakeClock


@pytest.fixture
async def stack(tmp_path):
    async with MemoryStack.from_config(StackConfig(data_root=tmp_path), clock=FakeClock()) as opened:
        yield opened


async def test_remember_with_session_writes_one_raw_turn(stack):
    result = await stack.remember("Einstein was born in Ulm.", session_id="chat")
    assert result.status == "session_stored" and result.session_id == "chat" and len(result.data_ids) == 1
    [entry] = await stack.session.get_session(session_id="chat")
    assert (entry.question, entry.context, entry.answer) == ("", "", "Einstein was born in Ulm.")
    assert entry.qa_id == result.data_ids[0]
    assert entry.time == stack.clock.now().isoformat()


async def test_remember_edge_cases(stack):
    assert (await stack.remember("   \n", session_id="chat")).status == "skipped_blank"
    assert await stack.session.get_session(session_id="chat") == []
    await stack.remember(["first", "second"], session_id="chat")
    assert (await stack.session.get_session(session_id="chat"))[0].answer == "first\n\nsecond"
    with pytest.raises(ValidationError, match="bytes"):
        await stack.remember(b"raw", session_id="chat")
    with pytest.raises(SessionParameterValidationError):
        await stack.remember("x", session_id="  ")
    assert len(await stack.session.get_session(session_id="chat")) == 1


async def test_recall_session_keywords(stack):
    await stack.remember("The capital of France is Paris.", session_id="chat")
    await stack.remember("Berlin is in Germany.", session_id="chat")
    await stack.remember("Paris has the Louvre; France loves it.", session_id="chat")
    results = await stack.recall("paris france", session_id="chat")
    assert [r.source for r in results] == ["session", "session"]
    assert [r.answer for r in results] == ["The capital of France is Paris.", "Paris has the Louvre; France loves it."]
    assert results[0].matched_tokens == 2 and results[0].session_id == "chat"
    assert len(await stack.recall("paris france", session_id="chat", top_k=1)) == 1
    assert await stack.recall("   ", session_id="chat") == []
    assert await stack.recall("quantum", session_id="chat") == []
    assert await stack.recall("paris", session_id="elsewhere") == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"top_k": 0},
        {"top_k": True},
        {"scope": "everywhere"},
        {"scope": []},
        {"query_type": "NOPE"},
        {"datasets": "main_dataset"},
        {"datasets": ["no_such_dataset"]},
        {"response_model": dict},
    ],
)
async def test_recall_rejects_bad_options(stack, kwargs):
    with pytest.raises(ValidationError):
        await stack.recall("paris", session_id="chat", **kwargs)


async def test_sessions_are_per_user(stack):
    alice = await stack.users.create("alice")
    bob = await stack.users.create("bob")
    await stack.remember("alice's note", session_id="shared-name", user=alice)
    assert [e.answer for e in await stack.session.get_session(session_id="shared-name", user=alice)] == ["alice's note"]
    assert await stack.session.get_session(session_id="shared-name", user=bob) == []
    assert await stack.recall("note", session_id="shared-name", user=bob) == []


async def test_default_session_needs_main_dataset(stack):
    with pytest.raises(SessionPreconditionError, match="main_dataset"):
        await stack.session.get_session()
    dataset = await stack.datasets.create("main_dataset")
    await stack.remember("scoped", session_id=f"default_session_{dataset.id}")
    assert [e.answer for e in await stack.session.get_session()] == ["scoped"]
    await stack.remember("legacy", session_id="default_session")
    assert [e.answer for e in await stack.session.get_session(session_id="default_session")] == ["legacy"]


async def test_feedback_api(stack):
    await stack.remember("answer", session_id="chat")
    [entry] = await stack.session.get_session(session_id="chat")
    assert await stack.session.add_feedback("chat", entry.qa_id, "helpful", 4)
    with pytest.raises(SessionQAEntryValidationError):
        await stack.session.add_feedback("chat", entry.qa_id, "bad", 9)
    [after] = await stack.session.get_session(session_id="chat")
    assert (after.feedback_text, after.feedback_score) == ("helpful", 4)
    assert await stack.session.add_feedback("chat", "no-such-id", "x", 3) is False
    assert await stack.session.delete_feedback("chat", entry.qa_id)
    with pytest.raises(SessionParameterValidationError):
        await stack.session.get_session(session_id="chat", last_n=0)


async def test_users_and_datasets(stack):
    default = await stack.users.default()
    assert default.is_default and (await stack.users.default()).id == default.id
    agent = await stack.users.create("agent-7", parent_user_id=default.id)
    assert agent.parent_user_id == default.id
    with pytest.raises(ValidationError):
        await stack.users.create("orphan", parent_user_id=uuid.uuid4())
    with pytest.raises(ValidationError):
        await stack.users.create("  ")
    first = await stack.datasets.create("docs")
    assert (await stack.datasets.create("docs")).id == first.id
    assert (await stack.datasets.create("docs", user=agent)).id != first.id
    assert await stack.datasets.get("missing") is None

    class NoId:
        pass

    with pytest.raises(SessionPreconditionError):
        await stack.session.get_session(session_id="s", user=NoId())


async def test_caching_off(tmp_path):
    config = StackConfig(data_root=tmp_path, cache=CacheConfig(enabled=False))
    async with MemoryStack.from_config(config) as stack:
        assert stack.cache is None
        assert (await stack.remember("x", session_id="s")).status == "cache_unavailable"
        assert await stack.session.get_session(session_id="s") == []
        assert await stack.session.add_feedback("s", "qa", "t", 3) is False
        assert await stack.recall("x", session_id="s") == []


async def test_unreachable_cache_never_raises(tmp_path, caplog):
    blocker = tmp_path / "blocker"
    blocker.write_text("file")
    config = StackConfig(data_root=tmp_path / "root", cache=CacheConfig(db_url=f"sqlite:///{blocker}/cache.db"))
    async with MemoryStack.from_config(config) as stack:
        assert "unavailable" in caplog.text
        assert (await stack.remember("x", session_id="s")).status == "cache_unavailable"
        assert await stack.session.get_session(session_id="s") == []
        assert await stack.recall("x", session_id="s") == []


async def test_unwritable_data_root_names_the_path(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("file")
    stack = MemoryStack.from_config(StackConfig(data_root=blocker / "root"))
    with pytest.raises(ConfigError, match="not-a-dir"):
        await stack.open()


async def test_lifecycle(tmp_path):
    stack = MemoryStack.from_config(StackConfig(data_root=tmp_path))
    with pytest.raises(StackStateError):
        await stack.remember("x", session_id="s")
    await stack.open()
    await stack.open()  # idempotent
    await stack.close()
    await stack.close()
    with pytest.raises(StackStateError):
        await stack.open()


async def test_data_survives_reopen(tmp_path):
    async with MemoryStack.from_config(StackConfig(data_root=tmp_path)) as stack:
        await stack.remember("durable", session_id="s")
        user = await stack.users.default()
    async with MemoryStack.from_config(StackConfig(data_root=tmp_path)) as stack:
        assert (await stack.users.default()).id == user.id
        assert [e.answer for e in await stack.session.get_session(session_id="s")] == ["durable"]


async def test_prune_empties_the_cache(stack):
    await stack.remember("x", session_id="s")
    await stack.prune(cache=True)
    assert await stack.session.get_session(session_id="s") == []


async def test_ttl_through_the_stack(tmp_path):
    clock = FakeClock(datetime(2026, 1, 1, tzinfo=timezone.utc))
    config = StackConfig(data_root=tmp_path, ttl={"seconds": 100, "policy": "sliding"})
    async with MemoryStack.from_config(config, clock=clock) as stack:
        await stack.remember("short-lived", session_id="s")
        clock.advance(99)
        assert len(await stack.session.get_session(session_id="s")) == 1
        clock.advance(1)
        assert await stack.session.get_session(session_id="s") == []


async def test_frames_entries(stack):
    await stack.remember("one", session_id="s")
    await stack.remember("two", session_id="s")
    frame = await stack.frames.entries("s")
    assert list(frame["answer"]) == ["one", "two"]
    assert str(frame["time"].dtype).startswith("datetime64")
    assert str(frame["feedback_score"].dtype) == "Int64"
    empty = await stack.frames.entries("nothing-here")
    assert empty.empty and "answer" in empty.columns


async def test_module_level_functions_use_a_default_stack(tmp_path, monkeypatch):
    from memlab._default import reset_default_stack

    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path))
    await reset_default_stack()
    try:
        await memlab.remember("module level", session_id="m")
        assert [r.answer for r in await memlab.recall("module", session_id="m")] == ["module level"]
        [entry] = await memlab.session.get_session(session_id="m")
        assert await memlab.session.add_feedback("m", entry.qa_id, "ok", 3)
        assert await memlab.session.delete_feedback("m", entry.qa_id)
        trace_id = await memlab.session.add_trace("m", {"origin_function": "step", "status": "success"})
        assert [step.trace_id for step in await memlab.session.get_traces("m")] == [trace_id]
        assert (tmp_path / "cache.db").exists()
    finally:
        await reset_default_stack()
