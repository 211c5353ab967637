"""Session distillation (SPEC §10, memlab's rules in :mod:`memlab.flows.distill`), on a real stack with the offline LLM."""

from __future__ import annotations

import json

import pytest

from memlab import (
    ConfigError,
    DistillationCallsFailedError,
    DistillResult,
    LLMError,
    MemoryStack,
    SessionContextEntry,
    SessionDistillationError,
    SessionParameterValidationError,
    StackConfig,
    ValidationError,
)
from memlab.config import CacheConfig, SessionConfig
from memlab.flows.distill import (
    LESSON_TAG,
    WATERMARK_KIND,
    DistillFlow,
    ProposedLesson,
    SessionLessonProposals,
    SessionLessonVerdict,
    lesson_document,
    offline_curator,
    offline_writer,
)
from memlab.session import SessionManager
from memlab.testing import FakeClock, fast_config

CURATOR = SessionLessonProposals.__name__
WRITER = SessionLessonVerdict.__name__


async def _open(tmp_path, backend="memory", **sections):
    return await MemoryStack.from_config(fast_config(tmp_path, cache=CacheConfig(backend=backend), **sections), clock=FakeClock()).open()


@pytest.fixture
async def stack(tmp_path):
    opened = await _open(tmp_path)
    await opened.datasets.create("notes")
    yield opened
    await opened.close()


async def _user_id(stack):
    return (await stack.users.default()).id


async def add_entry(stack, content, *, session="s1", section="rules", confidence=0.9, harmful=0, helpful=0, entry_id=None):
    """One guidance entry, one clock second after the previous write."""
    stack.clock.advance(1)
    extra = {"id": entry_id} if entry_id else {}
    entry = SessionContextEntry(
        section=section,
        content=content,
        confidence=confidence,
        harmful_count=harmful,
        helpful_count=helpful,
        created_at=stack.clock.now().isoformat(),
        **extra,
    )
    await stack.session_manager.add_context_entry(await _user_id(stack), entry, session_id=session)
    return entry


async def add_turn(stack, question, answer, *, session="s1"):
    stack.clock.advance(1)
    return await stack.session_manager.add_qa(await _user_id(stack), question=question, answer=answer, session_id=session)


def counting(stack, name, fallback):
    """Register a handler that records each request and answers like ``fallback``; returns the list of requests."""
    requests = []

    def handler(request):
        requests.append(request)
        return fallback(request)

    stack.llm.handlers.register(name, handler)
    return requests


def _timeline(request):
    return request.messages[-1]["content"]


# -- arguments --------------------------------------------------------------------------------------


class _NoIO:
    def __getattr__(self, name):
        raise AssertionError(f"I/O before validation: {name}")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"session_id": ""}, SessionParameterValidationError, "session_id"),
        ({"session_id": 7}, SessionParameterValidationError, "session_id"),
        ({"session_id": None}, SessionParameterValidationError, "session_id"),
        ({"max_batches": -1}, ValidationError, "max_batches"),
        ({"max_batches": True}, ValidationError, "max_batches"),
        ({"max_batches": 1.5}, ValidationError, "max_batches"),
        ({"max_batches": "2"}, ValidationError, "max_batches"),
        ({"dataset": None}, SessionDistillationError, "dataset"),
        ({"dataset": 42}, SessionDistillationError, "42"),
    ],
)
async def test_bad_arguments_raise_before_any_io(kwargs, error, match):
    flow = DistillFlow(
        users=_NoIO(), datasets=_NoIO(), sessions=SessionManager(None), memory=_NoIO, llm=_NoIO(), config=SessionConfig()
    )
    arguments = {"session_id": "s1", "dataset": "notes", **kwargs}
    with pytest.raises(error, match=match):
        await flow.distill(arguments.pop("session_id"), **arguments)


async def test_unknown_and_unwritable_datasets_are_distillation_errors(stack):
    await add_entry(stack, "Always answer in English.")
    with pytest.raises(SessionDistillationError, match="nowhere"):
        await stack.session.distill_session("s1", dataset="nowhere")
    bob = await stack.users.create("bob")
    theirs = await stack.datasets.create("theirs", bob)
    with pytest.raises(SessionDistillationError, match="may not write"):
        await stack.session.distill_session("s1", dataset=theirs.id)
    await stack.datasets.grant(theirs.id, await stack.users.default(), "read", by=bob)
    with pytest.raises(SessionDistillationError):
        await stack.session.distill_session("s1", dataset=theirs.id)
    assert issubclass(SessionDistillationError, ValidationError)
    assert await stack.datasets.get("nowhere") is None  # distillation never creates a dataset


# -- gate and watermark ----------------------------------------------------------------------------


async def test_no_gated_entries_makes_no_call(stack):
    curator = counting(stack, CURATOR, offline_curator)
    result = await stack.session.distill_session("s1", dataset="notes")
    assert (result.status, result.llm_calls, result.batches) == ("no_gated_entries", 0, 0)
    await add_entry(stack, "Never guess a date.", harmful=1, helpful=3)  # cognee would pass this one
    await add_entry(stack, "Always list sources.", confidence=0.74)
    result = await stack.session.distill_session("s1", dataset="notes")
    assert (result.status, result.llm_calls) == ("no_gated_entries", 0)
    assert curator == []


async def test_the_gate_keeps_never_harmful_entries_at_075_or_more(stack):
    await add_entry(stack, "Never guess a date.", harmful=1)
    await add_entry(stack, "Always list sources.", confidence=0.74)
    await add_entry(stack, "Prefer short answers.", section="preferences", confidence=0.75)
    result = await stack.session.distill_session("s1", dataset="notes")
    assert result.status == "completed"
    assert (result.entries_considered, result.entries_sealed, result.proposed) == (1, 1, ["Prefer short answers."])


async def test_watermark_seals_entries_per_dataset(stack):
    await add_entry(stack, "Always cite the source document.")
    first = await stack.session.distill_session("s1", dataset="notes")
    assert (first.status, first.batches, first.llm_calls) == ("completed", 1, 2)
    curator = counting(stack, CURATOR, offline_curator)
    writer = counting(stack, WRITER, offline_writer)
    again = await stack.session.distill_session("s1", dataset="notes")
    assert (again.status, again.llm_calls, again.entries_considered) == ("no_new_entries", 0, 0)
    assert curator == [] and writer == []
    # the watermark is a context row of its own kind, which guidance never serves
    rows = await stack.session_manager.get_context_entries(await _user_id(stack), session_id="s1")
    [mark] = [row for row in rows if row["kind"] == WATERMARK_KIND]
    assert mark["id"] == f"{WATERMARK_KIND}:{first.dataset_id}"
    loaded = await stack.session_manager.guidance.load(str(await _user_id(stack)), "s1")
    assert [entry.content for entry in loaded] == ["Always cite the source document."]
    # a new entry is the only one considered next time; another dataset has its own watermark
    await add_entry(stack, "Prefer tables for comparisons.", section="preferences")
    later = await stack.session.distill_session("s1", dataset="notes")
    assert (later.entries_considered, later.proposed) == (1, ["Prefer tables for comparisons."])
    await stack.datasets.create("other")
    elsewhere = await stack.session.distill_session("s1", dataset="other")
    assert elsewhere.entries_considered == 2 and elsewhere.status == "completed"


# -- the timeline ----------------------------------------------------------------------------------


async def test_timeline_blocks_lead_in_and_caps(stack):
    await add_turn(stack, "first question", "first answer")
    second = await add_turn(stack, "second   question", "second\nanswer " + "x" * 2000)
    await stack.session_manager.add_feedback(await _user_id(stack), second, feedback_text="too long " * 50, session_id="s1")
    entry = await add_entry(stack, "Keep   answers short.")
    await add_turn(stack, "third question", "third answer")
    curator = counting(stack, CURATOR, offline_curator)
    result = await stack.session.distill_session("s1", dataset="notes")
    assert result.status == "completed"
    [request] = curator
    text = _timeline(request)
    assert "first question" not in text  # only one turn of lead-in before the earliest new entry
    blocks = json.loads(text.split("\n", 1)[1])
    assert len(blocks) == 3
    assert blocks[0].startswith("User: second question\nAssistant: second answer xxx")
    lead, feedback = blocks[0].split("\nUser feedback on this answer: ")
    assert len(lead.split("\nAssistant: ")[1]) == 1200 and len(feedback) == 200
    assert blocks[1] == f"Candidate {entry.id} [qa/rules]: Keep answers short."
    assert blocks[2] == "User: third question\nAssistant: third answer"
    assert result.documents == ['# Session learning (session s1)\n\nKeep answers short. (the user said "second question" in this session.)\n']


# -- the cap ---------------------------------------------------------------------------------------


async def test_max_batches_cap_leaves_overflow_pending_for_the_next_run(stack):
    entries = [await add_entry(stack, f"Rule number {index} always applies.", confidence=0.8 + index / 100) for index in range(8)]
    first = await stack.session.distill_session("s1", dataset="notes", max_batches=1)
    assert (first.status, first.batches, first.entries_considered, first.entries_sealed) == ("completed", 1, 8, 6)
    assert sorted(first.proposed) == sorted(entry.content for entry in entries[2:])  # the six most confident
    second = await stack.session.distill_session("s1", dataset="notes", max_batches=1)
    assert (second.status, second.entries_considered, second.entries_sealed) == ("completed", 2, 2)
    assert sorted(second.proposed) == sorted(entry.content for entry in entries[:2])
    assert (await stack.session.distill_session("s1", dataset="notes", max_batches=1)).status == "no_new_entries"


async def test_recent_turns_fill_the_budget_and_zero_means_no_cap(stack):
    await add_entry(stack, "Always say which document you used.")
    for index in range(7):
        await add_turn(stack, f"question {index}", f"answer {index}")
    curator = counting(stack, CURATOR, offline_curator)
    capped = await stack.session.distill_session("s1", dataset="notes", max_batches=1)
    assert capped.batches == 1
    text = _timeline(curator[0])
    assert "question 0" not in text and "question 1" not in text and "question 6" in text  # 1 entry + the 5 latest turns
    await add_entry(stack, "Never reveal internal ids.")
    for index in range(12):
        await add_turn(stack, f"later {index}", f"reply {index}")
    uncapped = await stack.session.distill_session("s1", dataset="notes", max_batches=0)
    assert uncapped.batches == 3  # 1 lead-in turn + 1 entry + 12 turns = 14 blocks


async def test_the_configured_default_cap(tmp_path):
    assert StackConfig.from_env({"IMPROVE_DISTILL_MAX_BATCHES_PER_RUN": "3"}).session.distill_max_batches_per_run == 3
    assert StackConfig().session.distill_max_batches_per_run == 10
    with pytest.raises(ConfigError, match="IMPROVE_DISTILL_MAX_BATCHES_PER_RUN"):
        StackConfig.from_env({"IMPROVE_DISTILL_MAX_BATCHES_PER_RUN": "-1"})
    stack = await _open(tmp_path, session=SessionConfig(distill_max_batches_per_run=1))
    try:
        await stack.datasets.create("notes")
        for index in range(7):
            await add_entry(stack, f"Guideline {index} holds.")
        result = await stack.session.distill_session("s1", dataset="notes")
        assert (result.batches, result.entries_sealed) == (1, 6)
    finally:
        await stack.close()


# -- failures --------------------------------------------------------------------------------------


async def test_a_failed_curator_batch_seals_only_the_completed_batches(stack):
    entries = [await add_entry(stack, f"Lesson {index} is durable.") for index in range(12)]
    doomed = entries[7].id

    def flaky(request):
        if doomed in _timeline(request):
            raise RuntimeError("curator down")
        return offline_curator(request)

    stack.llm.handlers.register(CURATOR, flaky)
    with pytest.raises(DistillationCallsFailedError, match="1 of 2 curator call") as caught:
        await stack.session.distill_session("s1", dataset="notes", max_batches=0)
    error = caught.value
    assert isinstance(error, LLMError) and isinstance(error.__cause__, LLMError)
    partial = error.result
    assert isinstance(partial, DistillResult)
    assert (partial.status, partial.batches, partial.llm_calls, partial.entries_sealed) == ("failed", 2, 8, 6)
    assert partial.accepted == [entry.content for entry in entries[:6]] and len(partial.data_ids) == 6
    assert "curator down" in partial.error
    stack.llm.handlers.register(CURATOR, offline_curator)
    retry = await stack.session.distill_session("s1", dataset="notes", max_batches=0)
    assert (retry.status, retry.entries_considered, retry.accepted) == ("completed", 6, [entry.content for entry in entries[6:]])


async def test_a_failed_writer_call_seals_everything_and_raises(stack):
    await add_entry(stack, "Always double-check numbers.")
    await add_entry(stack, "Never skip the summary.")

    def picky(request):
        if "skip the summary" in _timeline(request):
            raise RuntimeError("writer down")
        return offline_writer(request)

    stack.llm.handlers.register(WRITER, picky)
    with pytest.raises(DistillationCallsFailedError, match="1 of 2 writer call") as caught:
        await stack.session.distill_session("s1", dataset="notes")
    partial = caught.value.result
    assert (partial.status, partial.entries_sealed, partial.accepted, partial.rejected) == (
        "failed", 2, ["Always double-check numbers."], []
    )
    assert len(partial.documents) == 1
    assert (await stack.session.distill_session("s1", dataset="notes")).status == "no_new_entries"


async def test_an_exhausted_budget_seals_nothing_and_reraises(stack, monkeypatch):
    await add_entry(stack, "Always answer politely.")

    async def broke(*args, **kwargs):
        raise LLMError("quota", model=stack.llm.model, provider_error="PaymentRequiredError")

    with monkeypatch.context() as patched:
        patched.setattr(stack.llm, "complete", broke)
        with pytest.raises(LLMError) as caught:
            await stack.session.distill_session("s1", dataset="notes")
    assert not isinstance(caught.value, DistillationCallsFailedError)
    again = await stack.session.distill_session("s1", dataset="notes")
    assert (again.status, again.entries_considered) == ("completed", 1)


# -- outcomes --------------------------------------------------------------------------------------


async def test_no_proposed_lessons_seals_everything(stack):
    await add_entry(stack, "Always use metric units.")
    stack.llm.handlers.register(CURATOR, lambda request: {"lessons": []})
    result = await stack.session.distill_session("s1", dataset="notes")
    assert (result.status, result.entries_sealed, result.llm_calls, result.documents) == ("no_proposed_lessons", 1, 1, [])
    assert (await stack.session.distill_session("s1", dataset="notes")).status == "no_new_entries"


async def test_no_accepted_lessons_when_the_writer_rejects(stack):
    await add_entry(stack, "Always use metric units.")
    stack.llm.handlers.register(WRITER, lambda request: {"accept": False, "reason": "not durable"})
    result = await stack.session.distill_session("s1", dataset="notes")
    assert (result.status, result.rejected, result.accepted, result.data_ids) == (
        "no_accepted_lessons", ["Always use metric units."], [], []
    )


async def test_known_lessons_are_rejected(stack):
    await add_entry(stack, "Always use metric units.", session="s1")
    assert (await stack.session.distill_session("s1", dataset="notes")).status == "completed"
    await add_entry(stack, "always use   METRIC units.", session="s2")
    await add_entry(stack, "Prefer bullet lists.", section="preferences", session="s2")
    result = await stack.session.distill_session("s2", dataset="notes")
    assert result.status == "completed"
    assert (result.accepted, result.rejected) == (["Prefer bullet lists."], ["always use METRIC units."])


async def test_lessons_become_tagged_documents_that_recall_finds(stack):
    await add_entry(stack, "Always cite the source document.")
    result = await stack.session.distill_session("s1", dataset="notes")
    assert result.status == "completed" and len(result.data_ids) == 1
    [record] = await stack.datasets.list_data("notes")
    assert str(record.id) == result.data_ids[0]
    assert set(record.tags) == {LESSON_TAG, "session:s1"}
    hits = await stack.recall("cite the source document", datasets=["notes"])
    assert any("cite the source document" in hit.text.lower() for hit in hits)


async def test_the_same_lesson_deduplicates_by_content(stack):
    lesson = ProposedLesson(statement="Always cite sources.", why="the user asked.")
    assert lesson_document("s1", lesson) == "# Session learning (session s1)\n\nAlways cite sources. (the user asked.)\n"
    stack.llm.handlers.register(CURATOR, lambda request: {"lessons": [{"statement": "Always cite sources.", "why": "asked"}]})
    stack.llm.handlers.register(WRITER, lambda request: {"accept": True})
    await add_entry(stack, "Cite sources, always.")
    first = await stack.session.distill_session("s1", dataset="notes")
    await add_entry(stack, "Sources must be cited.")
    second = await stack.session.distill_session("s1", dataset="notes")
    assert first.data_ids == second.data_ids and len(await stack.datasets.list_data("notes")) == 1


def test_offline_writer_matches_normalised_known_lessons():
    class Request:
        def __init__(self, statement, known):
            review = {"statement": statement, "known_lessons": known}
            self.messages = ({"role": "user", "content": "Lesson review:\n" + json.dumps(review)},)

    assert offline_writer(Request("Use  Metric.", ["use metric. (the user asked.)"]))["accept"] is False
    assert offline_writer(Request("Use metric.", ["use metric."]))["accept"] is False
    assert offline_writer(Request("Use metric.", ["use metric units. (x.)"]))["accept"] is True


# -- improve() -------------------------------------------------------------------------------------


async def test_improve_distills_each_session(stack):
    await add_turn(stack, "What units?", "Metric.")
    await add_entry(stack, "Always use metric units.")
    await add_entry(stack, "Prefer short answers.", section="preferences", session="s2")
    result = await stack.improve(dataset="notes", session_ids=["s1", "s2", "s1"])
    assert result.status == "completed" and result.turns == 2
    assert [(item.session_id, item.status) for item in result.distilled] == [("s1", "completed"), ("s2", "completed")]
    again = await stack.improve(dataset="notes", session_ids=["s2"])
    assert again.status == "nothing_to_improve" and [item.status for item in again.distilled] == ["no_new_entries"]


async def test_a_failed_distillation_does_not_lose_the_bridging(stack, caplog):
    await add_turn(stack, "What units?", "Metric.")
    await add_entry(stack, "Always use metric units.")

    def down(request):
        raise RuntimeError("curator down")

    stack.llm.handlers.register(CURATOR, down)
    result = await stack.improve(dataset="notes", session_ids=["s1"])
    assert result.status == "completed" and len(result.new_data_ids) == 1
    [failed] = result.distilled
    assert failed.status == "failed" and "curator down" in failed.error and failed.entries_sealed == 0
    assert "distillation of session 's1'" in caplog.text


# -- sqlite ----------------------------------------------------------------------------------------


async def test_the_whole_path_on_the_sqlite_cache(tmp_path):
    stack = await _open(tmp_path, backend="sqlite")
    try:
        await stack.datasets.create("notes")
        await add_turn(stack, "How should I cite?", "With the document name.")
        await add_entry(stack, "Always cite the document name.")
        await add_entry(stack, "Ignore this one.", harmful=1)
        result = await stack.session.distill_session("s1", dataset="notes")
        assert (result.status, result.entries_considered, result.entries_sealed) == ("completed", 1, 1)
        assert (await stack.session.distill_session("s1", dataset="notes")).llm_calls == 0
    finally:
        await stack.close()


# -- background self-improvement -----------------------------------------------------------------


async def test_background_self_improvement_distills_accepted_guidance_with_its_watermark(stack):
    await add_entry(stack, "Always cite the source document.")
    await stack.remember("I prefer answers with sources.", dataset="notes", session_id="s1")
    assert await stack.wait_for_background(60) == 0
    lessons = [record for record in await stack.datasets.list_data("notes") if LESSON_TAG in record.tags]
    assert len(lessons) == 1 and set(lessons[0].tags) == {LESSON_TAG, "session:s1"}
    again = await stack.session.distill_session("s1", dataset="notes")
    assert again.status == "no_new_entries"  # the background run sealed what it distilled
    await add_entry(stack, "Prefer bullet lists.", section="preferences")
    await stack.remember("And keep it short.", dataset="notes", session_id="s1")
    assert await stack.wait_for_background(60) == 0
    assert len([record for record in await stack.datasets.list_data("notes") if LESSON_TAG in record.tags]) == 2


async def test_without_self_improvement_nothing_is_distilled_until_improve(stack):
    await add_entry(stack, "Always cite the source document.")
    await stack.remember("I prefer answers with sources.", dataset="notes", session_id="s1", self_improvement=False)
    assert await stack.wait_for_background(60) == 0
    assert [record for record in await stack.datasets.list_data("notes") if LESSON_TAG in record.tags] == []
    result = await stack.improve(dataset="notes", session_ids=["s1"])
    assert [item.status for item in result.distilled] == ["completed"]
