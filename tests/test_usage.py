"""Session lifecycle and usage (SPEC §8): what is recorded, how it is priced, who sees it (stack.usage, frames)."""

from __future__ import annotations

import asyncio

import pytest

from memlab import MemoryStack, ValidationError
from memlab.config import LLMConfig, SessionConfig
from memlab.testing import FakeClock, fast_config, postgres_database

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."


@pytest.fixture
async def clock():
    return FakeClock()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.server)])
async def metadata_url(request):
    """None (memlab.db in the data root) or the URL of a throw-away PostgreSQL metadata database."""
    if request.param == "sqlite":
        yield None
        return
    async with postgres_database("memlab_usage") as url:
        yield url


@pytest.fixture
async def stack(tmp_path, clock, metadata_url):
    config = fast_config(tmp_path).model_copy(update={"db_url": metadata_url})
    async with MemoryStack.from_config(config, clock=clock) as opened:
        await opened.remember(CURIE, dataset="science")
        yield opened


async def _turns(stack, session, *questions, user=None, datasets=("science",)):
    return [(await stack.search(question, datasets=list(datasets), session_id=session, user=user))[0] for question in questions]


async def test_a_turn_records_its_llm_and_embedding_calls_with_their_source(stack):
    answers = await _turns(stack, "chat", "Who discovered Polonium?", "Where did she work?")
    record = await stack.usage.get("chat")
    assert record is not None and record.status == record.effective_status == "running"
    assert record.tokens_in == sum(answer.raw["turn"]["tokens_in"] for answer in answers) > 0
    assert record.tokens_out == sum(answer.raw["turn"]["tokens_out"] for answer in answers) > 0
    models = {model.kind: model for model in record.models}
    llm, embedding = models["llm"], models["embedding"]
    assert llm.model == "memlab/offline" and llm.usage_source == "provider"  # the offline provider reports usage
    assert llm.calls == sum(answer.raw["turn"]["llm_calls"]["answer"] + answer.raw["turn"]["llm_calls"]["analysis"] for answer in answers)
    assert (llm.tokens_in, llm.tokens_out) == (record.tokens_in, record.tokens_out)
    assert embedding.calls >= 2 and embedding.tokens_in == record.embedding_tokens > 0 and embedding.usage_source == "estimate"
    assert record.last_model == "memlab/offline" and record.dataset_id is not None


async def test_an_unknown_model_is_unpriced_with_its_tokens_never_a_silent_zero(stack):
    await _turns(stack, "chat", "Who discovered Polonium?")
    record = await stack.usage.get("chat")
    assert record.cost_usd is None and not record.partially_priced and (record.unpriced_tokens_in, record.unpriced_tokens_out) == (record.tokens_in, record.tokens_out)
    [llm] = [model for model in record.models if model.kind == "llm"]
    assert llm.priced is False and llm.cost_usd is None
    by_model = {row.model: row for row in await stack.usage.cost_by_model("all")}
    assert by_model["memlab/offline"].cost_usd is None and by_model["memlab/offline"].tokens_in == record.tokens_in


async def test_price_as_charges_litellm_cost_map_prices(tmp_path):
    from memlab.llm import load_litellm

    config = fast_config(tmp_path, llm=LLMConfig(price_as="gpt-4o-mini"))
    async with MemoryStack.from_config(config) as stack:
        await stack.remember(CURIE, dataset="science")
        await _turns(stack, "chat", "Who discovered Polonium?", "Where did she work?")
        record = await stack.usage.get("chat")
        prompt, completion = load_litellm().cost_per_token(model="gpt-4o-mini", prompt_tokens=record.tokens_in, completion_tokens=record.tokens_out)
        assert record.cost_usd == pytest.approx(prompt + completion) and record.cost_usd > 0
        assert record.unpriced_tokens_in == 0
        [llm] = [model for model in record.models if model.kind == "llm"]
        assert llm.priced and llm.cost_usd == pytest.approx(record.cost_usd)
        stats = await stack.usage.stats("all")
        assert stats.cost_usd == pytest.approx(record.cost_usd)


def test_token_figures_fall_back_from_the_tokenizer_to_the_estimate():
    from memlab.llm._client import _counted_usage

    chat = [{"role": "user", "content": "How many tokens is this sentence?"}]
    tokens_in, tokens_out, source = _counted_usage("gpt-4o-mini", chat, "Seven.")
    assert source == "tokenizer" and tokens_in > 0 and tokens_out > 0
    weird = [{"role": "user", "content": [{"type": "hologram"}]}]  # content the counter cannot read
    assert _counted_usage("gpt-4o-mini", weird, "abcdefgh")[2] == "estimate"


async def test_without_a_session_id_usage_goes_to_the_datasets_default_session(stack):
    dataset = await stack.datasets.get("science")
    await stack.search("Who discovered Polonium?", datasets=["science"])
    await stack.recall("Who discovered Polonium?", datasets=["science"], query_type="GRAPH_COMPLETION")
    record = await stack.usage.get(f"default_session_{dataset.id}")
    assert record is not None and record.dataset_id == dataset.id
    [llm] = [model for model in record.models if model.kind == "llm"]
    assert llm.calls >= 3  # the search turn (answer + analysis) and the recall completion
    await stack.recall("Polonium", datasets=["science"], query_type="CHUNKS")  # retrieval only: no usage
    assert (await stack.usage.get(f"default_session_{dataset.id}")).models == record.models


async def test_a_terminal_session_is_never_resurrected(stack):
    await _turns(stack, "chat", "Who discovered Polonium?")
    before = await stack.usage.get("chat")
    assert await stack.session.end("chat", status="failed") is True
    await _turns(stack, "chat", "Where did she work?")
    after = await stack.usage.get("chat")
    assert after.status == after.effective_status == "failed" and after.ended_at is not None
    assert (after.tokens_in, after.tokens_out, after.last_activity_at) == (before.tokens_in, before.tokens_out, before.last_activity_at)
    assert await stack.session.end("never-used") is False
    with pytest.raises(ValidationError, match="status"):
        await stack.session.end("chat", status="abandoned")


async def test_abandoned_is_computed_at_read_time_with_a_strict_threshold(stack, clock):
    await _turns(stack, "chat", "Who discovered Polonium?")
    threshold = stack.config.session.abandon_after_seconds
    clock.advance(threshold)
    assert (await stack.usage.get("chat")).effective_status == "running"  # exactly at the threshold: not older
    clock.advance(0.001)
    record = await stack.usage.get("chat")
    assert record.effective_status == "abandoned" and record.status == "running"  # never stored
    assert [item.session_id for item in (await stack.usage.list_sessions(status="abandoned")).items] == ["chat"]
    assert (await stack.usage.list_sessions(status="running")).items == []
    await _turns(stack, "chat", "Where did she work?")
    assert (await stack.usage.get("chat")).effective_status == "running"


async def test_pages_orders_and_ranges(stack, clock):
    for index in range(5):
        await stack.remember(f"note {index}", session_id=f"s{index}", self_improvement=False)
        clock.advance(3600)
    page = await stack.usage.list_sessions(limit=2)
    assert [item.session_id for item in page.items] == ["s4", "s3"] and page.total == 5 and page.has_more
    last = await stack.usage.list_sessions(limit=2, offset=4)
    assert [item.session_id for item in last.items] == ["s0"] and not last.has_more
    oldest = await stack.usage.list_sessions(order_by="started_at", descending=False, limit=1)
    assert oldest.items[0].session_id == "s0"
    assert (await stack.usage.stats("all")).sessions == 5
    clock.advance(22.5 * 3600)  # now 27.5 h after s0's write, 23.5 h after s4's
    assert (await stack.usage.stats("24h")).sessions == 1  # only s4 was active in the last 24 hours
    assert (await stack.usage.stats("7d")).by_status == {"running": 0, "completed": 0, "failed": 0, "abandoned": 5}  # idle > 30 min


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda usage: usage.list_sessions(limit=0), "limit"),
        (lambda usage: usage.list_sessions(limit=-1), "limit"),
        (lambda usage: usage.list_sessions(limit=True), "limit"),
        (lambda usage: usage.list_sessions(offset=-5), "offset"),
        (lambda usage: usage.list_sessions(offset=2**63), "offset"),
        (lambda usage: usage.list_sessions(order_by="name"), "order_by"),
        (lambda usage: usage.list_sessions(status="lost"), "status"),
        (lambda usage: usage.list_sessions(descending="yes"), "descending"),
        (lambda usage: usage.stats("2d"), "range"),
        (lambda usage: usage.cost_by_model("forever"), "range"),
        (lambda usage: usage.get(""), "session_id"),
    ],
)
async def test_bad_arguments_name_the_value(stack, call, named):
    with pytest.raises(ValidationError, match=named):
        await call(stack.usage)


async def test_visibility_own_agents_and_readable_datasets_only(stack):
    alice = await stack.users.default()
    bot = await stack.users.create("alice-bot", parent_user_id=alice.id)
    bob = await stack.users.create("bob")
    carol = await stack.users.create("carol")
    await stack.remember("Bob's own notes about Lisbon.", dataset="bobs", user=bob)
    await stack.remember("Carol's secret notes.", dataset="carols", user=carol)
    await stack.datasets.grant("bobs", alice, "read", by=bob)
    await _turns(stack, "mine", "Who discovered Polonium?")
    await stack.remember("an agent turn", session_id="agent", user=bot, self_improvement=False)
    await _turns(stack, "shared", "What about Lisbon?", user=bob, datasets=("bobs",))
    await _turns(stack, "hidden", "Secret?", user=carol, datasets=("carols",))
    await stack.remember("bob's private chat", session_id="private", user=bob, self_improvement=False)

    seen = {item.session_id for item in (await stack.usage.list_sessions()).items}
    assert seen == {"mine", "agent", "shared"}
    assert await stack.usage.get("hidden") is None and await stack.usage.get("private") is None
    assert (await stack.usage.stats("all")).sessions == 3
    hidden = await stack.usage.get("hidden", user=carol)
    visible_models = {(row.model, row.kind): row.sessions for row in await stack.usage.cost_by_model("all")}
    assert visible_models[("memlab/offline", "llm")] == 2  # mine and shared: the agent's turn made no LLM call, carol's is hidden
    assert hidden is not None and hidden.user_id == carol.id
    # an agent acts with its parent's dataset permissions: its own session, and those of the datasets alice may read
    assert {item.session_id for item in (await stack.usage.list_sessions(user=bot)).items} == {"agent", "mine", "shared"}
    assert {item.session_id for item in (await stack.usage.list_sessions(user=bob)).items} == {"shared", "private"}


async def test_concurrent_turns_lose_no_usage(stack):
    questions = [f"Who discovered Polonium, question {index}?" for index in range(12)]
    answers = await asyncio.gather(*(stack.search(question, datasets=["science"], session_id=f"c{index % 3}") for index, question in enumerate(questions)))
    expected: dict[str, int] = {}
    for index, [answer] in enumerate(answers):
        expected[f"c{index % 3}"] = expected.get(f"c{index % 3}", 0) + answer.raw["turn"]["tokens_in"]
    for session, tokens in expected.items():
        assert (await stack.usage.get(session)).tokens_in == tokens


async def test_a_failing_usage_write_never_fails_the_answer(stack, caplog):
    from memlab.relational import RelationalStore

    stack.usage.recorder.store = RelationalStore(stack._relational.path, stack.clock, url=stack.config.db_url)  # never opened: every write fails
    [answer] = await stack.search("Who discovered Polonium?", datasets=["science"], session_id="chat")
    assert answer.text and stack.usage.recorder.failures == 1
    assert "usage of session 'chat' could not be recorded" in caplog.text
    assert (await stack.usage.get("chat")).tokens_in == 0  # the turn's record exists (touched), its usage is missing


async def test_usage_tracking_can_be_turned_off(tmp_path):
    config = fast_config(tmp_path, session=SessionConfig(track_usage=False))
    async with MemoryStack.from_config(config) as stack:
        await stack.remember(CURIE, dataset="science")
        await _turns(stack, "chat", "Who discovered Polonium?")
        record = await stack.usage.get("chat")
        assert record is not None and record.tokens_in == 0 and record.models == []  # the session is recorded, not its usage


async def test_frames_have_typed_columns(stack):
    import pandas as pd

    await _turns(stack, "chat", "Who discovered Polonium?")
    await stack.session.end("chat")
    sessions = await stack.frames.sessions()
    assert sessions["session_id"].tolist() == ["chat"]
    for column in ("started_at", "last_activity_at", "ended_at"):
        assert isinstance(sessions[column].dtype, pd.DatetimeTZDtype) and str(sessions[column].dtype.tz) == "UTC"
    assert str(sessions["tokens_in"].dtype) == "Int64" and str(sessions["cost_usd"].dtype) == "Float64"
    usage = await stack.frames.usage("chat")
    assert set(usage["kind"]) == {"llm", "embedding"} and str(usage["cost_usd"].dtype) == "Float64"
    assert usage["cost_usd"].isna().all() and not usage["priced"].any()  # memlab/offline and the hashing embedder are unpriced
    assert (await stack.frames.usage()).equals(usage)
    costs = await stack.frames.cost_by_model("all")
    assert set(costs["model"]) == {"memlab/offline", "hashing-256"} and str(costs["calls"].dtype) == "Int64"
    empty = await stack.frames.usage("nothing-here")
    assert list(empty.columns) == list(usage.columns) and empty.empty


async def test_distillation_calls_count_as_the_sessions_usage(stack):
    from memlab.models import SessionContextEntry

    user = str((await stack.users.default()).id)
    entry = SessionContextEntry(section="rules", content="Always name the year of a discovery.", confidence=0.9, created_at="2026-01-01T00:00:00+00:00")
    await stack.session_manager.add_context_entry(user, entry, session_id="chat")
    result = await stack.session.distill_session("chat", dataset="science")
    record = await stack.usage.get("chat")
    [llm] = [model for model in record.models if model.kind == "llm"]
    assert result.llm_calls >= 1 and llm.calls == result.llm_calls


class _Writes:
    """Counts the metadata write transactions of a stack's session-record and usage repositories."""

    def __init__(self, stack) -> None:
        self.count = 0
        for repository in (stack._relational.sessions, stack._relational.usage):
            run = repository._run

            async def counted(fn, *, write, _run=run):
                self.count += write
                return await _run(fn, write=write)

            repository._run = counted


@pytest.mark.parametrize("track", [True, False])
async def test_a_turn_in_a_known_session_writes_its_metadata_once_and_its_activity_moves(tmp_path, clock, metadata_url, track):
    config = fast_config(tmp_path).model_copy(update={"db_url": metadata_url, "session": SessionConfig(track_usage=track)})
    async with MemoryStack.from_config(config, clock=clock) as stack:
        await stack.remember(CURIE, dataset="science")
        writes = _Writes(stack)
        await _turns(stack, "chat", "Who discovered Polonium?")
        assert writes.count == (2 if track else 1)  # new session: on record before retrieval (memlab.provenance), then usage
        first = (await stack._relational.sessions.of_user((await stack.users.default()).id))[0]
        clock.advance(60)
        writes.count = 0
        [result] = await _turns(stack, "chat", "Where did she work?")
        assert writes.count == 1  # known session and reads: one transaction (the usage write, or the activity alone untracked)
        assert result.raw["turn"]["usage"] == ("recorded" if track else "off")
        [record] = await stack._relational.sessions.of_user((await stack.users.default()).id)
        assert record.last_activity_at > first.last_activity_at and record.last_activity_at == clock.now()
        if track:
            usage = await stack.usage.get("chat")
            assert usage.last_activity_at == clock.now() and sum(model.calls for model in usage.models) >= 4  # both turns counted
        await stack.remember("Pierre Curie worked with Marie Curie.", dataset="physics")
        writes.count = 0
        await _turns(stack, "chat", "Who worked with her?", datasets=("science", "physics"))  # a dataset this session has not read
        assert writes.count == (2 if track else 1)
        readers = await stack._relational.sessions.reading((await stack.datasets.get("physics", await stack.users.default())).id)
        assert ("chat" in [session for _, session in readers])
