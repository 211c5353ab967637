import uuid

import pytest

from memlab import SessionParameterValidationError, SessionQAEntryValidationError
from memlab.cache import MemoryCache
from memlab.models import SessionContextEntry
from memlab.session import HISTORY_LAST_N, SessionManager, tokenize
from memlab.testing import FakeClock


@pytest.fixture
def manager():
    return SessionManager(MemoryCache(clock=FakeClock()))


def test_resolve_session_id():
    dataset = uuid.uuid4()
    manager = SessionManager(None)
    assert manager.resolve_session_id("mine") == "mine"
    assert manager.resolve_session_id(None, dataset) == f"default_session_{dataset}"
    assert manager.resolve_session_id(None) == "default_session"
    scoped = SessionManager(None, dataset_id=dataset)
    assert scoped.resolve_session_id(None) == f"default_session_{dataset}"
    assert scoped.resolve_session_id("default_session") == "default_session"


@pytest.mark.parametrize("bad", ["main_dataset", 42, str(uuid.uuid4())])
def test_dataset_id_must_be_uuid(bad):
    with pytest.raises(SessionParameterValidationError, match="dataset_id"):
        SessionManager(None, dataset_id=bad)
    with pytest.raises(SessionParameterValidationError):
        SessionManager(None).resolve_session_id(None, bad)


@pytest.mark.parametrize("kwargs", [{"user_id": " "}, {"user_id": "u", "session_id": "\t"}, {"user_id": "u", "last_n": 0}, {"user_id": "u", "last_n": True}, {"user_id": "u", "last_n": 2.0}])
async def test_bad_parameters_raise_even_without_cache(kwargs):
    for mgr in (SessionManager(None), SessionManager(MemoryCache())):
        with pytest.raises(SessionParameterValidationError):
            await mgr.get_session(**kwargs)


async def test_add_and_read(manager):
    qa_id = await manager.add_qa("u", "What is 2+2?", "4", session_id="s", context="math")
    entries = await manager.get_session("u", session_id="s")
    assert [e.qa_id for e in entries] == [qa_id]
    assert entries[0].question == "What is 2+2?" and entries[0].context == "math"
    assert await manager.get_session("other-user", session_id="s") == []


async def test_format_entries_exact():
    rows = [{"time": "T1", "question": "q1", "context": "c1", "answer": "a1"}, {"question": "q2", "answer": "a2"}]
    assert SessionManager.format_entries(rows) == (
        "Previous conversation:\n\n"
        "[T1]\nQUESTION: q1\nCONTEXT: c1\nANSWER: a1\n\n"
        "[Unknown time]\nQUESTION: q2\nCONTEXT: \nANSWER: a2\n\n"
    )
    assert "CONTEXT" not in SessionManager.format_entries(rows, include_context=False)
    assert SessionManager.format_entries([]) == ""


async def test_history_window_is_last_ten_without_context(manager):
    for i in range(HISTORY_LAST_N + 3):
        await manager.add_qa("u", f"q{i}", f"a{i}", session_id="s", context="ctx")
    history = await manager.get_history("u", session_id="s")
    assert history.count("QUESTION:") == 10
    assert "q2\n" not in history and "q3\n" in history and "q12\n" in history
    assert "CONTEXT" not in history
    formatted = await manager.get_session("u", session_id="s", formatted=True, last_n=2)
    assert formatted.count("CONTEXT: ctx") == 2


async def test_feedback_flow(manager):
    qa_id = await manager.add_qa("u", "q", "a", session_id="s")
    assert await manager.add_feedback("u", qa_id, "nice", 5, session_id="s")
    entry = (await manager.get_session("u", session_id="s"))[0]
    assert (entry.feedback_text, entry.feedback_score) == ("nice", 5)
    assert entry.memify_metadata == {"feedback_weights_applied": False}
    for bad in (0, 6, True):
        with pytest.raises(SessionQAEntryValidationError):
            await manager.add_feedback("u", qa_id, "x", bad, session_id="s")
    assert (await manager.get_session("u", session_id="s"))[0].feedback_score == 5
    assert await manager.add_feedback("u", "missing", "x", 3, session_id="s") is False
    assert await manager.add_feedback("u", qa_id, session_id="s") is True  # only resets the flag
    assert await manager.delete_feedback("u", qa_id, session_id="s") is True
    entry = (await manager.get_session("u", session_id="s"))[0]
    assert entry.feedback_text is None and entry.feedback_score is None
    assert await manager.delete_feedback("u", qa_id, session_id="s") is True  # exists, had no feedback
    assert await manager.delete_feedback("u", "missing", session_id="s") is False
    with pytest.raises(SessionParameterValidationError):
        await manager.add_feedback("u", " ", "x", 3, session_id="s")


async def test_caching_off_fails_open():
    manager = SessionManager(None)
    assert await manager.add_qa("u", "q", "a", session_id="s") is None
    assert await manager.get_session("u", session_id="s") == []
    assert await manager.get_session("u", session_id="s", formatted=True) == ""
    assert await manager.add_feedback("u", "x", "t", 3, session_id="s") is False
    assert await manager.delete_feedback("u", "x", session_id="s") is False
    assert await manager.search("u", "anything", session_id="s") == []
    assert await manager.get_context_entries("u", session_id="s") == []


async def test_unreachable_backend_fails_open(tmp_path, caplog):
    from memlab.cache import SQLCache

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    manager = SessionManager(SQLCache(f"sqlite:///{blocker}/cache.db"))
    assert await manager.add_qa("u", "q", "a", session_id="s") is None
    assert await manager.get_session("u", session_id="s") == []
    assert await manager.add_feedback("u", "x", "t", 3, session_id="s") is False
    assert "failed open" in caplog.text


async def test_context_entries(manager):
    entry = SessionContextEntry(section="rules", content="Answer in French", confidence=0.9)
    assert await manager.add_context_entry("u", entry, session_id="s") == entry.id
    rows = await manager.get_context_entries("u", session_id="s")
    assert rows[0]["content"] == "Answer in French" and rows[0]["kind"] == "context"
    assert await manager.update_context_entry("u", entry.id, {"helpful_count": 1}, session_id="s")
    assert (await manager.get_context_entries("u", session_id="s"))[0]["helpful_count"] == 1
    assert await manager.delete_context_entry("u", entry.id, session_id="s")
    assert await manager.get_context_entries("u", session_id="s") == []


def test_tokenize():
    assert tokenize("Hello, hello WORLD! a I x_y well-known don't 北京 déjà") == {
        "hello", "world", "x_y", "well", "known", "don", "北京", "déjà"
    }
    assert tokenize("a b c !") == set()


async def test_keyword_search_ranking(manager):
    ids = []
    for question, answer in [
        ("where is paris", "in france"),
        ("capital of france", "paris"),
        ("weather", "sunny"),
        ("paris france trip", "book trains"),
    ]:
        ids.append(await manager.add_qa("u", question, answer, session_id="s"))
    hits = await manager.search("u", "Paris, France?", session_id="s", top_k=10)
    assert [(e.qa_id, n) for e, n in hits] == [(ids[0], 2), (ids[1], 2), (ids[3], 2)]
    assert [e.qa_id for e, _ in await manager.search("u", "paris france trip", session_id="s", top_k=1)] == [ids[3]]
    assert await manager.search("u", "!! ?", session_id="s") == []
    assert await manager.search("u", "nothing matches", session_id="s") == []


async def test_keyword_index_follows_updates_deletes_and_new_turns(manager):
    first = await manager.add_qa("u", "alpha", "one", session_id="s")
    assert len(await manager.search("u", "alpha", session_id="s")) == 1
    await manager.add_qa("u", "alpha", "two", session_id="s")
    assert len(await manager.search("u", "alpha", session_id="s")) == 2
    await manager.update_qa("u", first, session_id="s", question="beta")
    assert [e.answer for e, _ in await manager.search("u", "alpha", session_id="s")] == ["two"]
    await manager.delete_qa("u", first, session_id="s")
    assert await manager.search("u", "beta", session_id="s") == []
    await manager.delete_session("u", session_id="s")
    assert await manager.search("u", "alpha", session_id="s") == []
