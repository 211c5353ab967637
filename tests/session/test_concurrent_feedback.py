import asyncio

from memlab.cache import SQLCache
from memlab.session import SessionManager


async def test_fifty_concurrent_feedbacks_leave_a_valid_entry(tmp_path):
    cache = SQLCache(f"sqlite:///{tmp_path}/cache.db")
    manager = SessionManager(cache)
    qa_id = await manager.add_qa("u", "q", "a", session_id="s")
    results = await asyncio.gather(
        *(manager.add_feedback("u", qa_id, f"note {i}", i % 5 + 1, session_id="s") for i in range(50))
    )
    assert all(results)
    [entry] = await manager.get_session("u", session_id="s")
    assert entry.feedback_text.startswith("note ") and 1 <= entry.feedback_score <= 5
    assert int(entry.feedback_text.split()[1]) % 5 + 1 == entry.feedback_score  # one writer's pair, not a mix
    await cache.close()
