"""Usage that adds up (issue 24, deliverable 5): after end() nothing moves, no tracking without caching,
no silent $0 for unpriced usage, an expired session is not running; and a property test over random
sequences of turns, ends, expiries and price settings that every total agrees with every other."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab import MemoryStack
from memlab.config import CacheConfig, LLMConfig, TTLConfig
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
PRICED = "gpt-4o-mini"  # in litellm's bundled cost map
TTL = 2.0


def _config(root, *, priced: bool = False, **sections):
    return fast_config(root, llm=LLMConfig(price_as=PRICED if priced else None), ttl=TTLConfig(seconds=TTL), **sections)


async def _agree(stack: MemoryStack, session: str, recorded_turns: list[dict]) -> None:
    """The session's record, its per-model rows, stats and cost_by_model tell one story (one session in the store)."""
    record = await stack.usage.get(session)
    assert record is not None
    llm_rows = [row for row in record.models if row.kind == "llm"]
    assert sum(row.tokens_in for row in llm_rows) == record.tokens_in
    assert sum(row.tokens_out for row in llm_rows) == record.tokens_out
    assert sum(turn["tokens_in"] for turn in recorded_turns) == record.tokens_in
    assert sum(turn["tokens_out"] for turn in recorded_turns) == record.tokens_out
    assert (record.unpriced_tokens_in, record.unpriced_tokens_out) == (
        sum(row.unpriced_tokens_in for row in llm_rows), sum(row.unpriced_tokens_out for row in llm_rows)
    )
    priced_cost = sum(row.cost_usd or 0.0 for row in llm_rows)
    if llm_rows and all(row.cost_usd is None for row in llm_rows):
        assert record.cost_usd is None and not record.partially_priced  # no silent $0
    else:
        assert record.cost_usd == pytest.approx(priced_cost)
        assert record.partially_priced == any(not row.priced for row in llm_rows)
    embedding_rows = [row for row in record.models if row.kind == "embedding"]
    assert sum(row.tokens_in for row in embedding_rows) == record.embedding_tokens
    assert sum(row.unpriced_tokens_in for row in embedding_rows) == record.unpriced_embedding_tokens
    assert (record.embedding_cost_usd is None) == bool(embedding_rows and all(row.cost_usd is None for row in embedding_rows))
    stats = await stack.usage.stats("all")
    assert (stats.tokens_in, stats.tokens_out) == (record.tokens_in, record.tokens_out)
    assert (stats.cost_usd is None) == (record.cost_usd is None) and stats.partially_priced == record.partially_priced
    if stats.cost_usd is not None:
        assert stats.cost_usd == pytest.approx(record.cost_usd)
    by_model = [row for row in await stack.usage.cost_by_model("all") if row.kind == "llm"]
    assert sum(row.tokens_in for row in by_model) == record.tokens_in
    assert sum(row.tokens_out for row in by_model) == record.tokens_out
    assert sum(row.unpriced_tokens_in for row in by_model) == record.unpriced_tokens_in
    assert sum(row.cost_usd or 0.0 for row in by_model) == pytest.approx(record.cost_usd or 0.0)
    frame = await stack.frames.sessions()
    [row] = frame.to_dict("records")
    assert (row["cost_usd"] is None or row["cost_usd"] != row["cost_usd"]) == (record.cost_usd is None)  # NA when unpriced


async def test_after_end_every_counter_stops_and_the_turn_says_post_end(tmp_path):
    async with MemoryStack.from_config(_config(tmp_path), clock=FakeClock()) as stack:
        await stack.remember(CURIE)
        [first] = await stack.search("Who discovered Polonium?", session_id="s")
        assert first.raw["turn"]["usage"] == "recorded"
        assert await stack.session.end("s")
        [after] = await stack.search("And when?", session_id="s")
        assert after.text and after.raw["turn"]["usage"] == "post_end" and after.raw["turn"]["tokens_in"] > 0
        [_, stored] = await stack.session.get_session("s")
        assert stored.qa_id == after.raw["qa_id"] and stored.memify_metadata["turn_usage"] == "post_end"
        assert "turn_usage" not in (await stack.session.get_session("s"))[0].memify_metadata  # recorded: the default
        await _agree(stack, "s", [first.raw["turn"]])
        frame = await stack.frames.turns("s")
        assert list(frame["usage"]) == ["recorded", "post_end"]


async def test_no_usage_is_tracked_when_caching_is_off(tmp_path):
    async with MemoryStack.from_config(_config(tmp_path, cache=CacheConfig(enabled=False)), clock=FakeClock()) as stack:
        await stack.remember(CURIE)
        [answer] = await stack.search("Who discovered Polonium?", session_id="s")
        assert answer.text and answer.raw["turn"]["usage"] == "off"
        assert (await stack.usage.list_sessions()).items == [] and await stack.usage.get("s") is None


async def test_unpriced_usage_has_no_cost_and_mixed_usage_says_it_is_partial(tmp_path):
    clock = FakeClock()
    async with MemoryStack.from_config(_config(tmp_path), clock=clock) as stack:
        await stack.remember(CURIE)
        [first] = await stack.search("Who discovered Polonium?", session_id="s")
        record = await stack.usage.get("s")
        assert record.cost_usd is None and not record.partially_priced and record.unpriced_tokens_in == record.tokens_in > 0
        assert (await stack.usage.stats("all")).cost_usd is None
    async with MemoryStack.from_config(_config(tmp_path, priced=True), clock=clock) as stack:
        [second] = await stack.search("Where did she work?", session_id="s")
        record = await stack.usage.get("s")
        assert record.partially_priced and record.cost_usd is not None and record.cost_usd > 0
        assert record.unpriced_tokens_in == first.raw["turn"]["tokens_in"]
        await _agree(stack, "s", [first.raw["turn"], second.raw["turn"]])


async def test_a_session_whose_entries_expired_is_not_running(tmp_path):
    clock = FakeClock()
    async with MemoryStack.from_config(_config(tmp_path), clock=clock) as stack:
        await stack.remember(CURIE)
        await stack.search("Who discovered Polonium?", session_id="s")
        assert (await stack.usage.get("s")).effective_status == "running"
        clock.advance(TTL + 1.5)
        assert await stack.session.get_session("s") == []
        assert (await stack.usage.get("s")).effective_status == "abandoned"
        assert [item.session_id for item in (await stack.usage.list_sessions(status="abandoned")).items] == ["s"]
        assert stack.usage.idle_limit_seconds == TTL  # min(30 min abandon window, the TTL)


OPS = st.lists(st.sampled_from(["turn", "turn", "end", "expire", "reprice"]), min_size=1, max_size=7)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, start_priced=st.booleans())
async def test_record_models_stats_and_cost_by_model_agree_over_any_sequence(ops, start_priced):
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as root:
        async with contextlib.AsyncExitStack() as opened:
            stacks = {}
            for priced in (False, True):
                stacks[priced] = await opened.enter_async_context(MemoryStack.from_config(_config(Path(root), priced=priced), clock=clock))
            await stacks[False].remember(CURIE)
            priced, ended, recorded = start_priced, False, []
            for op in ops:
                stack = stacks[priced]
                if op == "turn":
                    [answer] = await stack.search("Who discovered Polonium?", session_id="s")
                    record = answer.raw["turn"]
                    assert record["usage"] == ("post_end" if ended else "recorded")
                    if not ended:
                        recorded.append(record)
                elif op == "end":
                    ended = await stack.session.end("s") or ended
                elif op == "expire":
                    clock.advance(TTL + 1)
                    found = await stack.usage.get("s")
                    assert found is None or found.effective_status == ("abandoned" if not ended else found.status)
                else:
                    priced = not priced
                if recorded:
                    await _agree(stack, "s", recorded)
