"""memlab.SyncMemoryStack: the async suite's calls, blocking, on a loop the object owns (issue 27, deliverable 2).

Plain (non-async) tests on purpose: a blocking call from inside pytest-asyncio's loop is
exactly what SyncMemoryStack refuses (see ``test_a_call_inside_a_running_loop_...``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import memlab
from memlab import (
    MemoryStack,
    SessionParameterValidationError,
    SessionQAEntryValidationError,
    StackStateError,
    SyncInEventLoopError,
    SyncMemoryStack,
    ValidationError,
)
from memlab.sync import SyncSessionAPI
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. She worked in Paris."
TURING = "Alan Turing proposed the Turing machine in 1936 in Cambridge."


def _loop_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("memlab-sync")]


@pytest.fixture
def sync_stack(tmp_path):
    with SyncMemoryStack.from_config(fast_config(tmp_path), clock=FakeClock()) as opened:
        yield opened


def test_it_is_exported_lazily_and_mirrors_the_async_signatures() -> None:
    assert "SyncMemoryStack" in memlab.__all__ and memlab.SyncMemoryStack is SyncMemoryStack
    stack = SyncMemoryStack.from_config(fast_config("/nonexistent-never-opened"))
    for name in ("remember", "recall", "search", "forget", "improve"):
        assert inspect.signature(getattr(stack, name)) == inspect.signature(getattr(stack.stack, name))
        assert getattr(stack, name).__doc__ == getattr(MemoryStack, name).__doc__
    assert inspect.signature(stack.session.get_session) == inspect.signature(stack.stack.session.get_session)
    assert isinstance(stack.session, SyncSessionAPI)
    stack.close()


def test_remember_recall_session_round_trip(sync_stack) -> None:
    result = sync_stack.remember("Einstein was born in Ulm.", session_id="chat", self_improvement=False)
    assert result.status == "session_stored" and result.session_id == "chat"
    sync_stack.remember("Berlin is in Germany.", session_id="chat")
    [entry, _] = sync_stack.session.get_session(session_id="chat")
    assert entry.answer == "Einstein was born in Ulm." and entry.qa_id == result.data_ids[0]
    [hit] = sync_stack.recall("where was einstein born", session_id="chat")
    assert (hit.source, hit.answer, hit.session_id) == ("session", "Einstein was born in Ulm.", "chat")


def test_permanent_memory_remember_search_recall_forget(sync_stack) -> None:
    result = sync_stack.remember([CURIE, TURING], dataset="science", self_improvement=False)
    assert result.status == "completed" and len(result.data_ids) == 2
    chunks = sync_stack.search("Who discovered Polonium?", "CHUNKS", datasets=["science"], top_k=1)
    assert "Polonium" in chunks[0].text
    answer = sync_stack.recall("Who discovered Polonium?", datasets=["science"])
    assert answer and "Curie" in answer[0].text
    assert [record.id for record in sync_stack.datasets.list_data("science")] != []
    preview = sync_stack.forget(dataset="science", dry_run=True)
    assert len(sync_stack.datasets.list_data("science")) == 2  # a dry run changes nothing
    removed = sync_stack.forget(dataset="science")
    assert type(removed) is type(preview)
    assert sync_stack.datasets.get("science") is None


def test_improve_bridges_a_session_into_the_graph(sync_stack) -> None:
    sync_stack.remember("Ada Lovelace wrote the first program.", session_id="notes", dataset="bridge", self_improvement=False)
    improved = sync_stack.improve(dataset="bridge", session_ids=["notes"])
    assert improved.status in {"completed", "nothing_to_improve"}


def test_session_ops_feedback_traces_and_end(sync_stack) -> None:
    sync_stack.remember("answer", session_id="chat")
    [entry] = sync_stack.session.get_session(session_id="chat")
    assert sync_stack.session.add_feedback("chat", entry.qa_id, "helpful", 4)
    with pytest.raises(SessionQAEntryValidationError):  # memlab's errors come through unchanged
        sync_stack.session.add_feedback("chat", entry.qa_id, "bad", 9)
    [after] = sync_stack.session.get_session(session_id="chat")
    assert (after.feedback_text, after.feedback_score) == ("helpful", 4)
    assert sync_stack.session.delete_feedback("chat", entry.qa_id)
    with pytest.raises(SessionParameterValidationError):
        sync_stack.session.get_session(session_id="chat", last_n=0)
    assert sync_stack.session.end("chat", status="completed")
    assert sync_stack.usage.get("chat").status == "completed"


def test_users_datasets_usage_and_frames(sync_stack) -> None:
    default = sync_stack.users.default()
    agent = sync_stack.users.create("agent-7", parent_user_id=default.id)
    assert agent.parent_user_id == default.id
    with pytest.raises(ValidationError):
        sync_stack.users.create("  ")
    docs = sync_stack.datasets.create("docs")
    assert sync_stack.datasets.create("docs").id == docs.id
    sync_stack.datasets.grant("docs", agent, "read")
    assert sync_stack.datasets.can(agent, docs, "read")
    sync_stack.remember("one", session_id="s")
    sync_stack.remember("two", session_id="s")
    page = sync_stack.usage.list_sessions()
    assert [item.session_id for item in page.items] == ["s"]
    assert sync_stack.usage.stats(range="30d") is not None
    assert isinstance(sync_stack.usage.cost_by_model(), list)
    assert list(sync_stack.frames.entries("s")["answer"]) == ["one", "two"]
    key = sync_stack.users.create_api_key(default)
    assert sync_stack.users.user_for_api_key(key).id == default.id


def test_undeclared_attributes_are_mirrored_generically(sync_stack) -> None:
    """Attributes the class does not name are looked up on the async stack: coroutine methods block, services are views."""
    sync_stack.remember("x", session_id="s")
    assert sync_stack.wait_for_background(timeout=60) == 0  # the loop ran the background bridging meanwhile
    assert sync_stack.pending_background == 0
    assert sync_stack.config.data_root == sync_stack.stack.config.data_root
    entries = sync_stack.session_manager.get_session(user_id=str(sync_stack.users.default().id), session_id="s")
    assert [e.answer for e in entries] == ["x"]
    assert inspect.iscoroutinefunction(sync_stack.stack.cache.prune) and not inspect.iscoroutinefunction(sync_stack.cache.prune)
    assert "prune" in dir(sync_stack.cache)
    sync_stack.prune(cache=True)
    assert sync_stack.session.get_session(session_id="s") == []


def test_several_threads_at_once(sync_stack) -> None:
    def worker(n: int) -> list[str]:
        session = f"thread-{n % 4}"
        for turn in range(5):
            sync_stack.remember(f"worker {n} turn {turn}", session_id=session, self_improvement=False)
        sync_stack.recall(f"worker {n}", session_id=session)
        return [e.answer for e in sync_stack.session.get_session(session_id=session, last_n=100)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(worker, range(8)))
    for session in range(4):
        answers = sync_stack.session.get_session(session_id=f"thread-{session}", last_n=100)
        assert len(answers) == 10  # two workers x five turns, none lost
    assert len(_loop_threads()) == 1  # every thread's calls ran on the one loop thread


def test_a_call_inside_a_running_loop_names_the_async_api(sync_stack) -> None:
    async def inside() -> None:
        with pytest.raises(SyncInEventLoopError, match=r"await stack\.session\.get_session"):
            sync_stack.session.get_session(session_id="s")
        with pytest.raises(SyncInEventLoopError, match=r"await stack\.recall"):
            sync_stack.recall("x", session_id="s")

    asyncio.run(inside())
    assert issubclass(SyncInEventLoopError, StackStateError)
    assert sync_stack.recall("x", session_id="s") == []  # outside the loop it works again


def test_lifecycle_close_is_idempotent_and_stops_the_thread(tmp_path) -> None:
    before = len(_loop_threads())
    stack = SyncMemoryStack.from_config(fast_config(tmp_path))
    with pytest.raises(StackStateError, match="open"):  # the async stack's own error, before open()
        stack.remember("x", session_id="s")
    assert stack.open() is stack and stack.open() is stack
    stack.remember("durable", session_id="s")
    stack.close()
    stack.close()
    assert stack.state.value == "closed" and len(_loop_threads()) == before
    with pytest.raises(StackStateError, match="closed"):
        stack.recall("durable", session_id="s")
    with pytest.raises(StackStateError):
        stack.open()
    with SyncMemoryStack.from_config(fast_config(tmp_path)) as again:  # the data is on disk
        assert [e.answer for e in again.session.get_session(session_id="s")] == ["durable"]
    again.close()
    never_opened = SyncMemoryStack.from_config(fast_config(tmp_path))
    never_opened.close()  # nothing started, nothing to stop


def test_from_env_and_the_strategy_keywords(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    clock = FakeClock()
    with SyncMemoryStack.from_env(clock=clock) as stack:
        assert stack.clock is clock and str(stack.config.data_root) == str(tmp_path)
        assert stack.remember("hello", session_id="s").status == "session_stored"


def test_an_unclosed_stack_is_closed_at_interpreter_exit(tmp_path) -> None:
    """No hang at exit: the loop thread is stopped and the stack closed by the finalizer."""
    import subprocess
    import sys

    code = (
        "from memlab import SyncMemoryStack\n"
        "from memlab.testing import fast_config\n"
        f"stack = SyncMemoryStack.from_config(fast_config({str(tmp_path)!r})).open()\n"
        "stack.remember('kept', session_id='s')\n"
        "print('done')\n"
    )
    finished = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "done"
    with SyncMemoryStack.from_config(fast_config(tmp_path)) as stack:
        assert [e.answer for e in stack.session.get_session(session_id="s")] == ["kept"]
