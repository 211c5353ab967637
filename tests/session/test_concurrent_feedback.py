import asyncio

import pytest

from memlab.session import SessionManager
from memlab.testing.suppliers import BACKENDS, supply_backend


@pytest.mark.parametrize("name", BACKENDS)
async def test_fifty_concurrent_feedbacks_leave_a_valid_entry(name, tmp_path):
    async with supply_backend(name, tmp_path=tmp_path) as cache:
        manager = SessionManager(cache)
        qa_id = await manager.add_qa("u", "q", "a", session_id="s")
        results = await asyncio.gather(
            *(manager.add_feedback("u", qa_id, f"note {i}", i % 5 + 1, session_id="s") for i in range(50))
        )
        assert all(results)
        [entry] = await manager.get_session("u", session_id="s")
        assert entry.feedback_text.startswith("note ") and 1 <= entry.feedback_score <= 5
        assert int(entry.feedback_text.split()[1]) % 5 + 1 == entry.feedback_score  # one writer's pair, not a mix
        assert entry.memify_metadata == {"feedback_weights_applied": False}
