"""Agent traces (issue 24, deliverable 2): the trace model, the session API, ``traced``, recall's ``trace`` source,
``frames.traces()`` and deletes. Storage on every backend is the conformance suite's (``test_traces_*``)."""

from __future__ import annotations

import json

import pydantic
import pytest

from memlab import MemoryStack, SearchType, ValidationError
from memlab.config import CacheConfig, TTLConfig
from memlab.exceptions import SessionParameterValidationError, StackStateError
from memlab.frames import TRACE_TYPES
from memlab.models import KEPT_TRACE_REASON, SessionAgentTraceEntry, SessionContextEntry, TraceRecallResponse
from memlab.session import traced
from memlab.testing import FakeClock, fast_config

CURIE = "Marie Curie discovered Polonium in 1898. Marie Curie worked in Paris."
TURING = "Alan Turing worked at Bletchley Park in 1941. Alan Turing described the Turing machine."


def _step(origin: str, status: str = "success", **fields) -> SessionAgentTraceEntry:
    return SessionAgentTraceEntry(origin_function=origin, status=status, **fields)


# -- the model ----------------------------------------------------------------------------


def test_the_model_validates_normalises_and_fills_feedback() -> None:
    step = _step("  search_web ", " ERROR ", error_message=" rate limited. ", method_params={"q": "x"})
    assert (step.origin_function, step.status, step.error_message) == ("search_web", "error", "rate limited.")
    assert step.session_feedback == "search_web failed. Reason: rate limited."
    assert _step("f", "error").session_feedback == "f failed."
    assert _step("f").session_feedback == "f succeeded."
    assert _step("f", session_feedback="kept as given").session_feedback == "kept as given"
    assert step.row_id == "trace:" + step.trace_id and step.as_row()["id"] == step.row_id


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "ok"},
        {"origin_function": "   "},
        {"trace_id": ""},
        {"trace_id": "a\nb"},
        {"trace_id": "x" * 250},
        {"method_params": ["not", "a", "dict"]},
        {"memory_query": "\ud800"},
        {"memory_context": 3},
    ],
    ids=["status", "blank_origin", "empty_id", "control_char_id", "long_id", "params_list", "surrogate", "context_int"],
)
def test_invalid_fields_are_refused(fields) -> None:
    with pytest.raises(pydantic.ValidationError):
        SessionAgentTraceEntry.model_validate({"origin_function": "f", "status": "success", **fields})


def test_params_and_return_values_become_bounded_json() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    nested: dict = {}
    deepest = nested
    for _ in range(12):
        deepest["next"] = {}
        deepest = deepest["next"]
    step = _step(
        "f",
        method_params={"text": "x" * 5000, "many": list(range(50)), "nan": float("nan"), "obj": Opaque(), 7: {"b", "a"}, "deep": nested},
        method_return_value=("a", Opaque()),
    )
    params = step.method_params
    assert len(params["text"]) == 1000 and params["text"].endswith("...")
    assert params["many"] == list(range(20)) and params["nan"] == "nan" and params["obj"] == "<opaque>" and params["7"] == ["a", "b"]
    assert step.method_return_value == ["a", "<opaque>"]
    json.dumps(step.as_row(), allow_nan=False)  # every backend can store it


# -- the session API --------------------------------------------------------------------------


async def test_add_and_get_traces_in_order_with_timestamps(stack) -> None:
    first = await stack.session.add_trace("agent", _step("plan", memory_query="trip to Paris"))
    stack.clock.advance(5)
    second = await stack.session.add_trace("agent", {"origin_function": "book", "status": "error", "error_message": "full"})
    steps = await stack.session.get_traces("agent")
    assert [step.trace_id for step in steps] == [first, second]
    assert [step.origin_function for step in steps] == ["plan", "book"]
    assert steps[0].created_at == steps[0].updated_at < steps[1].created_at
    stack.clock.advance(5)
    again = _step("plan", trace_id=first, session_feedback="replanned", created_at=steps[0].created_at)
    assert await stack.session.add_trace("agent", again) == first  # same id: replaced in place
    steps = await stack.session.get_traces("agent")
    assert [step.session_feedback for step in steps] == ["replanned", "book failed. Reason: full."]
    assert steps[0].created_at < steps[0].updated_at
    assert await stack.session.get_traces("other") == []
    assert (await stack.usage.get("agent")) is not None  # a trace step is session activity


async def test_the_default_session_resolves_as_get_session(stack) -> None:
    await stack.remember(CURIE)  # the user's main_dataset
    trace_id = await stack.session.add_trace(None, _step("lookup"))
    [step] = await stack.session.get_traces()
    assert step.trace_id == trace_id
    user_id, session = await stack.session.resolve(None, None)
    assert session.startswith("default_session_")
    assert [s.trace_id for s in await stack.session_manager.get_traces(user_id, session)] == [trace_id]


async def test_traces_stay_out_of_guidance_turns_and_the_context_frame(stack) -> None:
    user = str((await stack.users.default()).id)
    rule = SessionContextEntry(section="rules", content="Always cite the source.", confidence=0.9)
    await stack.session_manager.add_context_entry(user, rule, session_id="chat")
    await stack.session.add_trace("chat", _step("search", memory_context="Always cite the source."))
    assert [entry.id for entry in await stack.session_manager.guidance.load(user, "chat")] == [rule.id]
    assert await stack.session.get_session("chat") == []
    context = await stack.frames.context("chat")
    assert list(context["id"]) == [rule.id]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.session.add_trace("chat", {"origin_function": "f", "status": "maybe"}),
        lambda s: s.session.add_trace("chat", "not an entry"),
        lambda s: s.session.add_trace("bad\x00id", _step("f")),
        lambda s: s.session.get_traces("bad\x00id"),
        lambda s: s.session_manager.add_trace("", "chat", _step("f")),
    ],
    ids=["bad_status", "not_a_mapping", "bad_session", "bad_session_read", "bad_user"],
)
async def test_wrong_arguments_raise_a_memlab_error_before_any_write(stack, call) -> None:
    with pytest.raises(SessionParameterValidationError) as raised:
        await call(stack)
    assert any(value in str(raised.value) for value in ("'maybe'", "'not an entry'", "\\x00", "user_id"))
    assert await stack.session.get_traces("chat") == []


async def test_caching_off_stores_nothing_and_reads_empty(tmp_path) -> None:
    async with MemoryStack.from_config(fast_config(tmp_path, cache=CacheConfig(enabled=False))) as stack:
        assert await stack.session.add_trace("chat", _step("f")) is None
        assert await stack.session.get_traces("chat") == []


async def test_a_closed_stack_refuses(tmp_path) -> None:
    stack = MemoryStack.from_config(fast_config(tmp_path))
    with pytest.raises(StackStateError):
        await stack.session.add_trace("chat", _step("f"))


# -- traced ---------------------------------------------------------------------------------------


async def test_traced_records_success_and_error_and_reraises(stack) -> None:
    @traced(stack, session_id="agent", memory_query="weather", memory_context="Paris is in France.")
    async def fetch_weather(city: str, units: str = "metric") -> dict:
        if city == "Atlantis":
            raise LookupError(f"no such city: {city}")
        return {"city": city, "temp": 21}

    assert fetch_weather.__name__ == "fetch_weather"
    assert await fetch_weather("Paris") == {"city": "Paris", "temp": 21}
    with pytest.raises(LookupError, match="Atlantis"):
        await fetch_weather("Atlantis", units="imperial")
    ok, failed = await stack.session.get_traces("agent")
    assert ok.origin_function.endswith("fetch_weather") and ok.status == "success"
    assert ok.method_params == {"city": "Paris", "units": "metric"} and ok.method_return_value == {"city": "Paris", "temp": 21}
    assert (ok.memory_query, ok.memory_context) == ("weather", "Paris is in France.")
    assert failed.status == "error" and failed.method_return_value is None
    assert failed.method_params == {"city": "Atlantis", "units": "imperial"}
    assert failed.error_message == "LookupError: no such city: Atlantis"
    assert failed.session_feedback.endswith("failed. Reason: LookupError: no such city: Atlantis.")


async def test_traced_methods_leave_self_out(stack) -> None:
    class Agent:
        @traced(stack, session_id="agent", origin_function="Agent.act")
        async def act(self, goal: str) -> str:
            return goal.upper()

    assert await Agent().act("go") == "GO"
    [step] = await stack.session.get_traces("agent")
    assert (step.origin_function, step.method_params, step.method_return_value) == ("Agent.act", {"goal": "go"}, "GO")


async def test_traced_as_a_context_manager(stack) -> None:
    async with traced(stack, session_id="agent", origin_function="plan") as step:
        step.params["goal"] = "book a table"
        step.returned(["call", "confirm"])
    with pytest.raises(RuntimeError):
        async with traced(stack.session, session_id="agent", origin_function="call") as failing:
            raise RuntimeError("line busy")
    planned, called = await stack.session.get_traces("agent")
    assert (planned.status, planned.method_params, planned.method_return_value) == ("success", {"goal": "book a table"}, ["call", "confirm"])
    assert (called.status, called.error_message) == ("error", "RuntimeError: line busy")
    assert (step.trace_id, failing.trace_id) == (planned.trace_id, called.trace_id)


@pytest.mark.parametrize(
    "make",
    [
        lambda s: traced(object()),
        lambda s: traced(s, session_id=""),
        lambda s: traced(s, memory_query=5),
        lambda s: traced(s, origin_function="  "),
        lambda s: traced(s)(lambda: None),
    ],
    ids=["not_a_stack", "blank_session", "query_not_text", "blank_origin", "sync_function"],
)
async def test_traced_refuses_wrong_arguments_up_front(stack, make) -> None:
    with pytest.raises(ValidationError):
        make(stack)


async def test_traced_block_needs_a_name(stack) -> None:
    with pytest.raises(ValidationError, match="origin_function"):
        async with traced(stack, session_id="agent"):
            pass
    assert await stack.session.get_traces("agent") == []


# -- recall's trace source ------------------------------------------------------------------------


async def test_recall_trace_ranks_by_overlap_ties_oldest_first(stack) -> None:
    add = stack.session.add_trace
    await add("agent", _step("book_hotel", "error", error_message="no rooms in Paris"))  # 1: paris
    await add("agent", _step("lookup_city", method_params={"city": "Paris"}, memory_context="weather report"))  # 2: params JSON + context
    await add("agent", _step("fetch_weather", memory_query="weather", method_return_value={"forecast": "rain in Paris"}))  # 2
    await add("agent", _step("unrelated", memory_query="train times"))  # 0 ("fetch_weather" is one token)
    results = await stack.recall("Paris weather?", scope="trace", session_id="agent")
    assert all(isinstance(result, TraceRecallResponse) and result.source == "trace" for result in results)
    assert [(r.origin_function, r.matched_tokens, r.score) for r in results] == [
        ("lookup_city", 2, 2.0),
        ("fetch_weather", 2, 2.0),
        ("book_hotel", 1, 1.0),
    ]
    assert results[0].session_id == "agent" and results[0].method_params == {"city": "Paris"}
    [top] = await stack.recall("Paris weather?", scope="trace", session_id="agent", top_k=1)
    assert top.origin_function == "lookup_city"
    assert await stack.recall("fetch", scope="trace", session_id="agent") == []  # whole tokens only
    assert [r.origin_function for r in await stack.recall("error rooms", scope="trace", session_id="agent")] == ["book_hotel"]
    assert await stack.recall("? !", scope="trace", session_id="agent") == []  # no tokens
    assert await stack.recall("Paris", scope="trace", session_id="other") == []


async def test_recall_trace_beside_session_and_all(stack) -> None:
    await stack.remember("Paris is lovely in spring.", session_id="agent", self_improvement=False)
    await stack.session.add_trace("agent", _step("lookup_city", method_params={"city": "Paris"}))
    sources = [result.source for result in await stack.recall("Paris", scope=["session", "trace"], session_id="agent")]
    assert sources == ["session", "trace"]
    assert "trace" in [result.source for result in await stack.recall("Paris", scope="all", session_id="agent")]


# -- frames ---------------------------------------------------------------------------------------


async def test_frames_traces_typed_rows_in_order(stack) -> None:
    await stack.session.add_trace("agent", _step("plan", method_params={"goal": "x"}, method_return_value=[1, 2]))
    await stack.session.add_trace("agent", _step("act", "error", error_message="boom"))
    frame = await stack.frames.traces("agent")
    assert list(frame.columns) == list(TRACE_TYPES)
    assert {column: str(dtype) for column, dtype in frame.dtypes.items()}["status"] == "category"
    assert list(frame["origin_function"]) == ["plan", "act"] and list(frame["status"]) == ["success", "error"]
    assert json.loads(frame["method_params"][0]) == {"goal": "x"} and json.loads(frame["method_return_value"][0]) == [1, 2]
    assert str(frame["created_at"].dtype) == "datetime64[us, UTC]" and frame["created_at"].notna().all()
    empty = await stack.frames.traces("nothing-here")
    assert list(empty.columns) == list(TRACE_TYPES) and len(empty) == 0
    recall = await stack.frames.recall("boom", scope="trace", session_id="agent")
    assert list(recall["text"]) == ["act failed. Reason: boom."]


# -- deletes --------------------------------------------------------------------------------------


@pytest.fixture
async def science(stack):
    curie = await stack.remember(CURIE, dataset="science")
    await stack.remember(TURING, dataset="science")
    [answer] = await stack.search("Who discovered Polonium?", SearchType.GRAPH_COMPLETION, datasets=["science"], session_id="chat")
    trace_id = await stack.session.add_trace("chat", _step("cite", memory_context=answer.text))
    return stack, curie, trace_id


async def test_a_targeted_delete_keeps_traces_and_says_why(science) -> None:
    stack, curie, trace_id = science
    result = await stack.forget(data_id=curie.data_ids[0], dataset="science")
    [cleaned] = result.cleanup.sessions
    assert cleaned.qa_ids and not cleaned.whole_session
    assert (cleaned.kept_trace_ids, cleaned.kept_trace_reason) == ([trace_id], KEPT_TRACE_REASON)
    assert result.cleanup.kept_trace_ids == [trace_id] and result.cleanup.trace_ids == []
    assert [step.trace_id for step in await stack.session.get_traces("chat")] == [trace_id]
    assert "trace" not in set(result.cleanup.to_frame()["entry_type"])
    assert "kept_trace_ids" in result.cleanup._repr_html_()


async def test_a_dry_run_says_the_same(science) -> None:
    stack, curie, trace_id = science
    result = await stack.forget(data_id=curie.data_ids[0], dataset="science", dry_run=True)
    assert result.cleanup.kept_trace_ids == [trace_id]


async def test_a_whole_session_delete_removes_traces_and_lists_them(science) -> None:
    stack, _, trace_id = science
    preview = await stack.forget(dataset="science", dry_run=True)
    assert preview.cleanup.trace_ids == [trace_id]
    assert [step.trace_id for step in await stack.session.get_traces("chat")] == [trace_id]
    result = await stack.forget(dataset="science")
    [cleaned] = result.cleanup.sessions
    assert cleaned.whole_session and cleaned.trace_ids == [trace_id] and cleaned.kept_trace_ids == []
    assert trace_id not in cleaned.context_ids
    frame = result.cleanup.to_frame()
    assert list(frame.loc[frame["entry_type"] == "trace", "entry_id"]) == [trace_id]
    assert await stack.session.get_traces("chat") == []


async def test_traces_expire_with_the_session(tmp_path) -> None:
    clock = FakeClock()
    config = fast_config(tmp_path, ttl=TTLConfig(seconds=60))
    async with MemoryStack.from_config(config, clock=clock) as stack:
        await stack.session.add_trace("agent", _step("f"))
        clock.advance(59)
        assert len(await stack.session.get_traces("agent")) == 1
        clock.advance(2)
        assert await stack.session.get_traces("agent") == []


# -- bridging into permanent memory -----------------------------------------------------------------


async def test_improve_bridges_trace_steps_into_the_graph(stack) -> None:
    await stack.session.add_trace("agent", _step("lookup_city", method_params={"city": "Reykjavik"}, method_return_value={"country": "Iceland"}))
    await stack.session.add_trace("agent", _step("book_hotel", "error", error_message="Reykjavik hotels full"))
    result = await stack.improve(dataset="ops", session_ids=["agent"])
    assert (result.status, result.turns, result.traces, len(result.new_data_ids)) == ("completed", 0, 2, 2)
    hits = await stack.recall("Reykjavik Iceland", query_type=SearchType.CHUNKS, datasets=["ops"])
    assert any("Agent step: lookup_city (success)" in hit.text and "Iceland" in hit.text for hit in hits)
    again = await stack.improve(dataset="ops", session_ids=["agent"])
    assert again.traces == 2 and again.new_data_ids == []  # already stored: nothing new
    assert (await stack.improve(dataset="ops", session_ids=["empty"])).status == "nothing_to_improve"


def test_trace_text_leaves_the_memory_context_out() -> None:
    from memlab.flows.remember import trace_text

    text = trace_text(_step("cite", "error", memory_query="who?", memory_context="RETRIEVED FACTS", method_params={"k": 1}, error_message="x"))
    assert text.splitlines() == ["Agent step: cite (error)", "Query: who?", 'Params: {"k": 1}', "Error: x", "Outcome: cite failed. Reason: x."]


async def test_background_self_improvement_bridges_new_steps_once(stack) -> None:
    from memlab.flows.remember import TRACE_WATERMARK_KIND

    first = await stack.session.add_trace("agent", _step("lookup_city", method_params={"city": "Reykjavik"}))
    await stack.remember("We plan a trip to Iceland.", session_id="agent", dataset="ops")
    assert await stack.wait_for_background(timeout=60) == 0
    documents = {record.id for record in await stack.datasets.list_data("ops")}
    assert len(documents) == 2  # the turn and the step
    [mark] = [row for row in await stack.session_manager.get_context_entries((await stack.users.default()).id, "agent")
              if row.get("kind") == TRACE_WATERMARK_KIND]
    assert mark["sealed_ids"] == [first]
    second = await stack.session.add_trace("agent", _step("book_hotel", method_params={"city": "Reykjavik"}))
    await stack.remember("Book two nights.", session_id="agent", dataset="ops")
    assert await stack.wait_for_background(timeout=60) == 0
    assert len({record.id for record in await stack.datasets.list_data("ops")}) == 4  # one more turn, one more step
    marks = [row for row in await stack.session_manager.get_context_entries((await stack.users.default()).id, "agent")
             if row.get("kind") == TRACE_WATERMARK_KIND]
    assert [row["sealed_ids"] for row in marks] == [sorted([first, second])]
    assert "sealed_ids" in (await stack.frames.context("agent")).columns
