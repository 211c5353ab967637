"""The HTTP API's POST routes against a real uvicorn server: each route, the permission model, errors, the schema.

The server writes through its own stack; the test reads back through the writer stack on
the same data root (``live.stack``), so every "nothing changed" is checked in the store,
not in the answer.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timezone

import httpx
import pytest

from memlab import MemoryStack, exceptions
from memlab.api import create_app
from memlab.testing import FakeClock, fast_config

START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
ROUTES = ["/api/v1/remember", "/api/v1/recall", "/api/v1/search", "/api/v1/forget", "/api/v1/sessions/s1/feedback", "/api/v1/sessions/s1/end"]
BODIES = {
    "/api/v1/remember": {"text": "x"},
    "/api/v1/recall": {"query": "x"},
    "/api/v1/search": {"query": "x"},
    "/api/v1/forget": {"dataset": "main_dataset", "dry_run": True},
    "/api/v1/sessions/s1/feedback": {"qa_id": "q", "feedback_score": 3},
    "/api/v1/sessions/s1/end": {"status": "completed"},
}
FACT = "Marie Curie discovered Polonium in 1898."


async def _data(live, dataset, owner) -> list[str]:
    return sorted(str(record.id) for record in await live.stack.datasets.list_data(dataset, owner))


async def _people(live):
    """alice (the caller), her agent, bob, carol (owns "plans" with one document, alice may read it), dave (owns "inbox", alice may write it)."""
    users = live.stack.users
    alice = await users.create("alice")
    agent = await users.create("alice-agent", parent_user_id=alice.id)
    bob, carol, dave = await users.create("bob"), await users.create("carol"), await users.create("dave")
    await live.stack.remember("Carol's launch plan: Friday.", dataset="plans", user=carol)
    plans = await live.stack.datasets.get("plans", carol)
    inbox = await live.stack.datasets.create("inbox", user=dave)
    await live.stack.datasets.grant(plans, alice, "read", by=carol)
    await live.stack.datasets.grant(inbox, alice, "write", by=dave)
    return alice, agent, bob, carol, dave, plans, inbox


# -- each route's happy path ----------------------------------------------------------------------


async def test_remember_permanent_memory_then_recall_and_search_it(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    stored = await live.posted("/api/v1/remember", key, {"text": [FACT, "Pierre Curie was her husband."], "dataset": "notes", "tags": ["history"]})
    assert stored["status"] == "completed" and len(stored["data_ids"]) == 2 and stored["node_count"] > 0
    notes = await live.stack.datasets.get("notes", alice)
    assert notes is not None and stored["dataset_id"] == str(notes.id)
    assert await _data(live, notes, alice) == sorted(stored["data_ids"])

    hits = await live.posted("/api/v1/recall", key, {"query": "Who discovered Polonium?", "query_type": "CHUNKS", "datasets": ["notes"], "top_k": 3})
    assert hits and all(hit["source"] == "graph" and hit["search_type"] == "CHUNKS" for hit in hits) and len(hits) <= 3
    assert "Polonium" in hits[0]["text"]
    by_id = await live.posted("/api/v1/recall", key, {"query": "Polonium", "query_type": "CHUNKS", "dataset_ids": [str(notes.id)]})
    assert by_id and "Polonium" in by_id[0]["text"]

    answered = await live.posted("/api/v1/search", key, {"query": "Who discovered Polonium?", "datasets": ["notes"], "session_id": "chat"})
    assert answered[0]["source"] == "graph" and answered[0]["kind"] == "answer" and "Curie" in answered[0]["text"]
    (turn,) = await live.stack.session.get_session("chat", user=alice)  # a completion search stores its turn
    assert turn.question == "Who discovered Polonium?"
    context = await live.posted("/api/v1/search", key, {"query": "Polonium", "query_type": "CHUNKS", "datasets": ["notes"], "only_context": True})
    assert context and context[0]["search_type"] == "CHUNKS"
    assert len(await live.stack.session.get_session("chat", user=alice)) == 1


async def test_a_session_turn_its_feedback_and_its_end(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    stored = await live.posted("/api/v1/remember", key, {"text": "Alice owns the billing service.", "session_id": "team/chat 1", "self_improvement": False})
    assert stored["status"] == "session_stored" and stored["session_id"] == "team/chat 1" and stored["dataset_id"] is None
    (qa_id,) = stored["data_ids"]
    hits = await live.posted("/api/v1/recall", key, {"query": "Who owns billing?", "session_id": "team/chat 1"})
    assert hits[0]["source"] == "session" and hits[0]["qa_id"] == qa_id

    path = "/api/v1/sessions/team%2Fchat%201"
    rated = await live.posted(f"{path}/feedback", key, {"qa_id": qa_id, "feedback_score": 5, "feedback_text": "right"})
    assert rated == {"stored": True, "session_id": "team/chat 1", "qa_id": qa_id}
    (turn,) = await live.stack.session.get_session("team/chat 1", user=alice)
    assert (turn.feedback_score, turn.feedback_text) == (5, "right")
    missing = await live.post(f"{path}/feedback", key, {"qa_id": "no-such-turn", "feedback_score": 1})
    assert missing.status_code == 404 and missing.json() == {"detail": "turn not found"}

    assert await live.posted(f"{path}/end", key, {"status": "failed"}) == {"ended": True, "session_id": "team/chat 1", "status": "failed"}
    assert (await live.ok(path, key))["status"] == "failed"
    assert (await live.posted(f"{path}/end", key))["status"] == "completed"  # no body: completed; ending again re-ends it
    assert (await live.ok(path, key))["status"] == "completed"
    never = await live.post("/api/v1/sessions/never-used/end", key)
    assert never.status_code == 404 and never.json() == {"detail": "session not found"}

    blank = await live.posted("/api/v1/remember", key, {"text": "   ", "session_id": "quiet", "self_improvement": False})
    assert blank["status"] == "skipped_blank" and await live.stack.session.get_session("quiet", user=alice) == []


async def test_self_improvement_runs_in_the_background_on_the_servers_stack(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    stored = await live.posted("/api/v1/remember", key, {"text": FACT, "session_id": "chat", "dataset": "learned"})
    assert stored["status"] == "session_stored"
    for _ in range(600):  # the bridge runs after the answer: its document appears in the dataset
        learned = await live.stack.datasets.get("learned", alice)
        if learned is not None and await _data(live, learned, alice):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the session was not bridged into 'learned'")


def test_the_server_waits_for_background_self_improvement_when_it_stops(tmp_path, serve_app):
    async def key() -> str:
        async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START)) as stack:
            return await stack.users.create_api_key(await stack.users.create("alice"))

    token = asyncio.run(key())
    stack = MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START))
    with serve_app(create_app(stack)) as url:
        answer = httpx.post(f"{url}/api/v1/remember", json={"text": FACT, "session_id": "chat", "dataset": "learned"}, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.text
    assert stack.state.value == "closed" and stack.pending_background == 0

    async def bridged() -> int:
        async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START)) as reader:
            (alice,) = await reader.users.by_name("alice")
            return len(await reader.datasets.list_data("learned", alice))

    assert asyncio.run(bridged()) == 1  # closing the app's stack finished the run: nothing orphaned


async def test_forget_dry_run_changes_nothing_then_forget_deletes(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    stored = await live.posted("/api/v1/remember", key, {"text": [FACT, "Radium glows."], "dataset": "notes"})
    await live.posted("/api/v1/search", key, {"query": "Who discovered Polonium?", "datasets": ["notes"], "session_id": "chat"})
    notes = await live.stack.datasets.get("notes", alice)
    before = (await _data(live, notes, alice), await live.stack.session.get_session("chat", user=alice))
    data_id = stored["data_ids"][0]

    for body in ({"dataset": "notes", "data_id": data_id, "dry_run": True}, {"dataset": str(notes.id), "dry_run": True}, {"everything": True, "dry_run": True}):
        preview = await live.posted("/api/v1/forget", key, body)
        assert preview["dry_run"] is True and data_id in preview["data_ids"], body
    assert (await _data(live, notes, alice), await live.stack.session.get_session("chat", user=alice)) == before

    one = await live.posted("/api/v1/forget", key, {"dataset": "notes", "data_id": data_id})
    assert one["dry_run"] is False and one["data_ids"] == [data_id] and one["dataset_ids"] == []
    assert await _data(live, notes, alice) == [stored["data_ids"][1]]
    gone = await live.post("/api/v1/forget", key, {"dataset": "notes", "data_id": data_id})
    assert gone.status_code == 404 and gone.json() == {"detail": "document not found"}
    whole = await live.posted("/api/v1/forget", key, {"dataset": "notes"})
    assert whole["dataset_ids"] == [str(notes.id)] and whole["data_ids"] == [stored["data_ids"][1]]
    assert await live.stack.datasets.get("notes", alice) is None and await live.stack.session.get_session("chat", user=alice) == []


# -- permissions ----------------------------------------------------------------------------------


async def test_a_read_only_grant_is_403_and_writes_nothing(live):
    alice, _, _, carol, _, plans, _ = await _people(live)
    key = await live.key(alice)
    before = await _data(live, plans, carol)
    refused = [
        {"text": "alice was here", "dataset": str(plans.id)},
        {"text": "a turn", "dataset": str(plans.id), "session_id": "chat"},  # self-improvement would write plans
    ]
    for body in refused:
        response = await live.post("/api/v1/remember", key, body)
        assert response.status_code == 403, (body, response.text)
        assert response.json() == {"detail": "the caller may read this dataset but not write it"}
    for body in ({"dataset": str(plans.id)}, {"dataset": str(plans.id), "dry_run": True}, {"dataset": str(plans.id), "data_id": before[0]},
                 {"dataset": str(plans.id), "memory_only": True}):
        assert (await live.post("/api/v1/forget", key, body)).status_code == 403, body
    assert await _data(live, plans, carol) == before  # ... and nothing was written
    assert await live.stack.session.get_session("chat", user=alice) == []
    hits = await live.posted("/api/v1/recall", key, {"query": "launch plan", "query_type": "CHUNKS", "dataset_ids": [str(plans.id)]})
    assert "launch plan" in hits[0]["text"]  # reading is what the grant allows
    # a turn without self-improvement writes only the caller's session, so the dataset is not checked
    turn = await live.posted("/api/v1/remember", key, {"text": "a turn", "dataset": str(plans.id), "session_id": "chat", "self_improvement": False})
    assert turn["status"] == "session_stored"


async def test_a_dataset_the_caller_cannot_read_or_that_does_not_exist_is_404_alike(live):
    alice, agent, bob, carol, dave, plans, inbox = await _people(live)
    hidden = await live.stack.datasets.create("bobs", user=bob)
    await live.stack.remember("Bob's secret.", dataset=hidden, user=bob)
    key = await live.key(alice)
    bodies = set()
    attempts = [
        ("/api/v1/remember", {"text": "x", "dataset": str(hidden.id)}),
        ("/api/v1/remember", {"text": "x", "dataset": str(uuid.uuid4())}),
        ("/api/v1/remember", {"text": "x", "dataset": str(hidden.id), "session_id": "chat"}),
        ("/api/v1/forget", {"dataset": str(hidden.id), "dry_run": True}),
        ("/api/v1/forget", {"dataset": str(uuid.uuid4())}),
        ("/api/v1/forget", {"dataset": "plans"}),  # carol's name: alice has no dataset of that name
        ("/api/v1/recall", {"query": "secret", "query_type": "CHUNKS", "dataset_ids": [str(hidden.id)]}),
        ("/api/v1/recall", {"query": "secret", "query_type": "CHUNKS", "dataset_ids": [str(uuid.uuid4())]}),
        ("/api/v1/recall", {"query": "secret", "query_type": "CHUNKS", "datasets": ["bobs"]}),
        ("/api/v1/search", {"query": "secret", "dataset_ids": [str(hidden.id)], "session_id": "chat"}),
        ("/api/v1/recall", {"query": "x", "query_type": "CHUNKS", "dataset_ids": [str(inbox.id)]}),  # write-only: not readable
    ]
    for path, body in attempts:
        response = await live.post(path, key, body)
        assert response.status_code == 404, (path, body, response.text)
        bodies.add(response.text)
    assert bodies == {'{"detail":"dataset not found"}'}  # existence never leaks
    assert len(await live.stack.datasets.list_data(hidden, bob)) == 1
    assert await live.stack.session.get_session("chat", user=alice) == []

    # a write grant without read: writing works, reading does not
    wrote = await live.posted("/api/v1/remember", key, {"text": "a note for dave", "dataset": str(inbox.id)})
    assert wrote["status"] == "completed" and wrote["dataset_id"] == str(inbox.id)
    assert (await live.posted("/api/v1/forget", key, {"dataset": str(inbox.id), "dry_run": True}))["dry_run"] is True
    # an agent acts with its parent's permissions: carol's plans are readable, not writable
    agent_key = await live.key(agent)
    assert (await live.post("/api/v1/remember", agent_key, {"text": "x", "dataset": str(plans.id)})).status_code == 403
    assert (await live.posted("/api/v1/remember", agent_key, {"text": "from the agent", "dataset": str(inbox.id)}))["status"] == "completed"


async def test_another_users_session_is_404_and_stays_unchanged(live):
    alice, agent, bob, *_ = await _people(live)
    bobs = await live.stack.remember("bob's turn", session_id="s1", user=bob, self_improvement=False)
    await live.stack.remember("the agent's turn", session_id="agent-1", user=agent, self_improvement=False)
    (bob_qa,) = bobs.data_ids
    key = await live.key(alice)
    for session_id, qa_id in (("s1", bob_qa), ("agent-1", "any")):
        feedback = await live.post(f"/api/v1/sessions/{session_id}/feedback", key, {"qa_id": qa_id, "feedback_score": 1})
        assert feedback.status_code == 404 and feedback.json() == {"detail": "turn not found"}
        ended = await live.post(f"/api/v1/sessions/{session_id}/end", key, {"status": "failed"})
        assert ended.status_code == 404 and ended.json() == {"detail": "session not found"}
    (turn,) = await live.stack.session.get_session("s1", user=bob)
    assert turn.feedback_score is None and turn.feedback_text is None
    assert (await live.stack.usage.get("s1", user=bob)).status == "running"
    assert (await live.stack.usage.get("agent-1", user=agent)).status == "running"
    assert await live.stack.session.get_session("s1", user=alice) == []  # and no session of alice's appeared
    # alice's own "s1" is hers to end; bob's stays running
    await live.posted("/api/v1/remember", key, {"text": "alice's turn", "session_id": "s1", "self_improvement": False})
    assert (await live.posted("/api/v1/sessions/s1/end", key))["ended"] is True
    assert (await live.stack.usage.get("s1", user=bob)).status == "running"


@pytest.mark.parametrize("path", ROUTES)
async def test_401_on_every_post_route_without_a_live_key(live, path):
    alice = await live.stack.users.create("alice")
    revoked = await live.key(alice)
    assert await live.stack.users.revoke_api_key(revoked)
    for key in (None, revoked, "mlk_" + "A" * 43):
        response = await live.post(path, key, BODIES[path])
        assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer"), (key, response.text)
    assert (await live.stack.usage.list_sessions(alice)).total == 0 and await live.stack.datasets.list(alice) == []


async def test_a_key_writes_until_it_is_revoked(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    await live.posted("/api/v1/remember", key, {"text": "one", "session_id": "chat", "self_improvement": False})
    await live.stack.users.revoke_api_key(key)
    assert (await live.post("/api/v1/remember", key, {"text": "two", "session_id": "chat", "self_improvement": False})).status_code == 401
    assert [turn.answer for turn in await live.stack.session.get_session("chat", user=alice)] == ["one"]


# -- bad bodies -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/api/v1/remember", {}, ["body", "text"]),
        ("/api/v1/remember", {"text": 5}, ["body", "text"]),
        ("/api/v1/remember", {"text": []}, ["body", "text"]),
        ("/api/v1/remember", {"text": "x", "self_improvement": "yes"}, ["body", "self_improvement"]),
        ("/api/v1/remember", {"text": "x", "self_improvement": 1}, ["body", "self_improvement"]),
        ("/api/v1/remember", {"text": "x", "owner": "bob"}, ["body", "owner"]),
        ("/api/v1/remember", {"text": "file:///etc/passwd"}, ["body", "text"]),
        ("/api/v1/remember", {"text": ["fine", " FILE://etc/passwd"]}, ["body", "text"]),
        ("/api/v1/remember", b'{"text": "\\ud800"}', ["body", "text"]),
        ("/api/v1/remember", b'{"text": ["ok", "\\udfff"]}', ["body", "text"]),
        ("/api/v1/remember", {"text": "x", "session_id": "a\x00b"}, ["body", "session_id"]),
        ("/api/v1/remember", {"text": "x", "session_id": "x" * 256}, ["body", "session_id"]),
        ("/api/v1/remember", {"text": "x", "dataset": ""}, ["body", "dataset"]),
        ("/api/v1/remember", {"text": "x", "tags": [" "]}, ["body", "tags"]),
        ("/api/v1/recall", {"query": "x", "top_k": 0}, ["body", "top_k"]),
        ("/api/v1/recall", {"query": "x", "top_k": 1001}, ["body", "top_k"]),
        ("/api/v1/recall", {"query": "x", "top_k": 5.0}, ["body", "top_k"]),
        ("/api/v1/recall", {"query": "x", "scope": "nowhere"}, ["body", "scope"]),
        ("/api/v1/recall", {"query": "x", "scope": []}, ["body", "scope"]),
        ("/api/v1/recall", {"query": "x", "query_type": "chunks please"}, ["body", "query_type"]),
        ("/api/v1/recall", b'{"query": "\\ud800"}', ["body", "query"]),
        ("/api/v1/sessions/s1/feedback", b'{"qa_id": "q", "feedback_text": "\\ud800"}', ["body", "feedback_text"]),
        ("/api/v1/recall", {"query": "x", "dataset_ids": ["not-a-uuid"]}, ["body", "dataset_ids"]),
        ("/api/v1/search", {"query": "x", "query_type": None}, ["body", "query_type"]),
        ("/api/v1/forget", {}, ["body"]),
        ("/api/v1/forget", {"everything": True, "dataset": "notes"}, ["body"]),
        ("/api/v1/forget", {"data_id": "not-a-uuid"}, ["body", "data_id"]),
        ("/api/v1/forget", {"dataset": " "}, ["body", "dataset"]),
        ("/api/v1/remember", {"text": "x", "dataset": "a\x01b", "session_id": "s"}, ["body", "dataset"]),
        ("/api/v1/forget", {"dataset": "notes", "dry_run": "true"}, ["body", "dry_run"]),
        ("/api/v1/sessions/s1/feedback", {"qa_id": "q", "feedback_score": 9}, ["body", "feedback_score"]),
        ("/api/v1/sessions/s1/feedback", {"qa_id": "q", "feedback_score": True}, ["body", "feedback_score"]),
        ("/api/v1/sessions/s1/feedback", {"feedback_score": 3}, ["body", "qa_id"]),
        ("/api/v1/sessions/s1/feedback", {"qa_id": "q\x7f"}, ["body", "qa_id"]),
        ("/api/v1/sessions/s1/end", {"status": "paused"}, ["body", "status"]),
        ("/api/v1/sessions/" + "x" * 300 + "/end", None, ["path", "session_id"]),
        ("/api/v1/sessions/%20/feedback", {"qa_id": "q"}, ["path", "session_id"]),
    ],
)
async def test_bad_bodies_are_422_at_the_field_and_write_nothing(live, path, body, loc):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    if isinstance(body, bytes):  # JSON that httpx would not encode: a lone surrogate
        response = await live.client.post(path, content=body, headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    else:
        response = await live.post(path, key, body)
    assert response.status_code == 422, response.text
    assert any(error["loc"][: len(loc)] == loc for error in response.json()["detail"]), response.text
    assert (await live.stack.usage.list_sessions(alice)).total == 0 and await live.stack.datasets.list(alice) == []


async def test_bodies_that_are_not_json_objects_are_4xx(live):
    key = await live.key(await live.stack.users.create("alice"))
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    for content in (b"", b"null", b"[]", b'"text"', b"{", b"\xff\xfe", b"[" * 50000, b'{"text": NaN}'):
        response = await live.client.post("/api/v1/remember", content=content, headers=headers)
        assert 400 <= response.status_code < 500, (content[:20], response.status_code, response.text)
    plain = await live.client.post("/api/v1/remember", content=b'{"text": "x"}', headers={**headers, "Content-Type": "text/plain"})
    assert plain.status_code == 422


async def test_a_session_cache_that_is_off_answers_503_for_a_turn(tmp_path, serve_app):
    from memlab.config import CacheConfig

    config = fast_config(tmp_path, cache=CacheConfig(enabled=False))
    async with MemoryStack.from_config(config) as writer:
        key = await writer.users.create_api_key(await writer.users.create("alice"))
        with serve_app(create_app(MemoryStack.from_config(config))) as url:
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}) as client:
                turn = await client.post("/api/v1/remember", json={"text": "x", "session_id": "chat", "self_improvement": False})
                assert turn.status_code == 503 and "not stored" in turn.json()["detail"]
                assert (await client.post("/api/v1/remember", json={"text": FACT})).status_code == 200  # permanent memory needs no cache


# -- the status of every memlab error ---------------------------------------------------------------


def test_every_memlab_error_has_a_status_that_is_not_500():
    from memlab.api._errors import status_of

    expected = {
        "ValidationError": 422, "SessionParameterValidationError": 422, "SessionQAEntryValidationError": 422, "StructuredOutputError": 422,
        "SessionDistillationError": 422, "SessionPreconditionError": 409, "NotFoundError": 404, "PermissionDeniedError": 404,
        "BackendError": 503, "CacheConnectionError": 503, "MigrationError": 503, "SnapshotConflict": 503, "SessionLockTimeout": 503,
        "StackStateError": 503, "SyncInEventLoopError": 503, "ConfigError": 503, "LLMError": 502, "DistillationCallsFailedError": 502,
        "EmbeddingError": 502, "MemlabError": 503,
    }
    assert set(expected) == set(exceptions.__all__)
    for name, status in expected.items():
        cls = getattr(exceptions, name)
        if name == "NotFoundError":
            error = cls("x", what="dataset")
        elif name == "StructuredOutputError":
            error = cls("x", raw_text="")
        else:
            error = cls("x")
        assert status_of(error) == status, name


# -- the schema -----------------------------------------------------------------------------------


async def test_openapi_lists_the_request_and_response_models(live):
    schema = (await live.client.get("/openapi.json")).json()
    paths, components = schema["paths"], schema["components"]["schemas"]
    expected = {
        "/api/v1/remember": ("RememberRequest", {"$ref": "#/components/schemas/RememberResult"}),
        "/api/v1/recall": ("RecallRequest", None),
        "/api/v1/search": ("SearchRequest", None),
        "/api/v1/forget": ("ForgetRequest", {"$ref": "#/components/schemas/ForgetResult"}),
        "/api/v1/sessions/{session_id}/feedback": ("FeedbackRequest", {"$ref": "#/components/schemas/FeedbackResult"}),
        "/api/v1/sessions/{session_id}/end": ("EndRequest", {"$ref": "#/components/schemas/EndResult"}),
    }
    for path, (request, response) in expected.items():
        operation = paths[path]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        assert request in str(body), (path, body)
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        if response is not None:
            assert ok == response, (path, ok)
        else:
            assert ok["type"] == "array" and "discriminator" in ok["items"], ok
        assert {"401", "404", "422", "503"} <= set(operation["responses"]), path
        assert operation["security"] == [{"HTTPBearer": []}], path
        model = components[request]
        assert model["additionalProperties"] is False, request
        assert all(field.get("description") or field.get("$ref") or name in ("status",) for name, field in model["properties"].items()), request
    assert paths["/api/v1/remember"]["post"]["responses"].keys() >= {"403"} and paths["/api/v1/forget"]["post"]["responses"].keys() >= {"403"}
    assert paths["/api/v1/sessions/{session_id}/end"]["post"]["requestBody"].get("required") is not True
    recall = components["RecallRequest"]["properties"]
    assert (recall["top_k"]["minimum"], recall["top_k"]["maximum"]) == (1, 1000) and components["RecallRequest"]["required"] == ["query"]
    assert components["FeedbackRequest"]["properties"]["feedback_score"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert components["RememberRequest"]["properties"]["session_id"]["anyOf"][0]["maxLength"] == 255
    for model in ("RememberResult", "ForgetResult", "CleanupReceipt", "FeedbackResult", "EndResult", "SessionRecallResponse", "GraphRecallResponse"):
        assert model in components, model


def test_the_declared_scopes_are_memlabs():
    from typing import get_args

    from memlab.api._bodies import ScopeName
    from memlab.retrievers._scope import SCOPE_NAMES

    assert set(get_args(ScopeName)) == set(SCOPE_NAMES) - {"tools", "code", "graph_context"}
