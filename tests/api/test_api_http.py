"""The HTTP API's read routes against a real uvicorn server: authentication, visibility, errors, pagination, ranges."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from datetime import datetime, timezone

import httpx
import pytest
import uvicorn

from memlab import MemoryStack
from memlab.api import create_app
from memlab.testing import FakeClock, fast_config

START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)

ENDPOINTS = ["/api/v1/sessions", "/api/v1/sessions/stats", "/api/v1/sessions/cost-by-model", "/api/v1/sessions/s1"]


def _ids(page: dict) -> set[tuple[str, str]]:
    return {(item["user_id"], item["session_id"]) for item in page["items"]}


async def test_healthz_needs_no_key(live):
    response = await live.client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok" and response.json()["stack"] == "open"


# -- authentication -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENDPOINTS)
async def test_401_without_a_usable_key(live, path):
    alice = await live.stack.users.create("alice")
    revoked = await live.key(alice)
    assert await live.stack.users.revoke_api_key(revoked)
    attempts = [
        {},
        {"Authorization": "Basic YWxpY2U6cHc="},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer mlk_" + "A" * 43},
        {"Authorization": "Bearer not a key"},
        {"Authorization": "Bearer " + "x" * 5000},
        {"Authorization": f"Bearer {revoked}"},
        {"Authorization": b"Bearer mlk_\xff\xfe"},
    ]
    bodies = set()
    for headers in attempts:
        response = await live.client.get(path, headers=headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer"), headers
        bodies.add(response.text)
    assert len(bodies) <= 2  # "required" or "unknown or revoked": never which user or why


async def test_a_key_works_until_revoked(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    assert (await live.get("/api/v1/sessions", key)).status_code == 200
    await live.stack.users.revoke_api_key(key)
    assert (await live.get("/api/v1/sessions", key)).status_code == 401


# -- visibility -----------------------------------------------------------------------------------


async def _world(live):
    """alice (the caller), her agent, a grand-agent, carol (shares one dataset with alice for reading), dave (write-only grant), bob + his agent."""
    users = live.stack.users
    alice = await users.create("alice")
    agent = await users.create("alice-agent", parent_user_id=alice.id)
    grand = await users.create("agent-of-agent", parent_user_id=agent.id)
    carol, dave, bob = await users.create("carol"), await users.create("dave"), await users.create("bob")
    bobs_agent = await users.create("bob-agent", parent_user_id=bob.id)
    for owner, name in ((carol, "shared"), (carol, "private"), (dave, "writable"), (alice, "mine")):
        await live.stack.datasets.create(name, user=owner)
    await live.stack.datasets.grant("shared", alice, "read", by=carol)
    await live.stack.datasets.grant("writable", alice, "write", by=dave)
    sessions = [
        (alice, "s1", None),
        (alice, "s2", "mine"),
        (agent, "agent-1", None),
        (carol, "shared-1", "shared"),
        (carol, "private-1", "private"),
        (carol, "loose", None),
        (dave, "write-only", "writable"),
        (bob, "s1", None),  # the same id as alice's: another session
        (bob, "bob-1", None),
        (bobs_agent, "bob-agent-1", None),
        (grand, "grand-1", None),
    ]
    for user, session_id, dataset in sessions:
        await live.session(user, session_id, dataset)
    seen = {(alice.id, "s1"), (alice.id, "s2"), (agent.id, "agent-1"), (carol.id, "shared-1")}
    visible = {(str(user.id), sid) for user, sid, _ in sessions if (user.id, sid) in seen}
    everything = {(str(user.id), sid) for user, sid, _ in sessions}
    return alice, visible, everything


async def test_a_caller_sees_its_own_its_agents_and_readable_datasets_sessions_only(live):
    alice, visible, everything = await _world(live)
    key = await live.key(alice)

    page = await live.ok("/api/v1/sessions", key, limit=1000)
    assert _ids(page) == visible and page["total"] == len(visible) and page["has_more"] is False

    by_id = {}
    for user_id, session_id in everything:
        response = await live.get(f"/api/v1/sessions/{session_id}", key)
        if any(sid == session_id for _, sid in visible):
            assert response.status_code == 200, (session_id, response.text)
            assert (response.json()["user_id"], session_id) in visible
        else:
            assert response.status_code == 404, session_id
            by_id[session_id] = response.text
    unknown = await live.get("/api/v1/sessions/no-such-session", key)
    assert unknown.status_code == 404
    assert set(by_id.values()) == {unknown.text}  # invisible and unknown answer alike
    assert set(by_id) == {"private-1", "loose", "write-only", "bob-1", "bob-agent-1", "grand-1"}

    # bob's "s1" never leaks through alice's "s1"
    mine = await live.ok("/api/v1/sessions/s1", key)
    assert mine["user_id"] == str(alice.id)

    items = page["items"]
    for window in ("24h", "7d", "30d", "all"):
        stats = await live.ok("/api/v1/sessions/stats", key, range=window)
        assert stats["range"] == window and stats["sessions"] == len(visible)
        assert stats["tokens_in"] == sum(item["tokens_in"] for item in items)
        assert stats["tokens_out"] == sum(item["tokens_out"] for item in items)
        assert sum(stats["by_status"].values()) == len(visible)
        costs = await live.ok("/api/v1/sessions/cost-by-model", key, range=window)
        llm = [row for row in costs if row["kind"] == "llm"]
        assert sum(row["tokens_in"] for row in llm) == stats["tokens_in"]
        assert all(row["sessions"] <= len(visible) for row in costs)


async def test_an_outsider_sees_none_of_it(live):
    alice, visible, everything = await _world(live)
    eve = await live.stack.users.create("eve")
    key = await live.key(eve)
    page = await live.ok("/api/v1/sessions", key)
    assert page["items"] == [] and page["total"] == 0 and page["has_more"] is False
    assert (await live.ok("/api/v1/sessions/stats", key, range="all"))["sessions"] == 0
    costs = await live.ok("/api/v1/sessions/cost-by-model", key, range="all")
    assert all(row["sessions"] == 0 for row in costs)
    for _, session_id in everything:
        assert (await live.get(f"/api/v1/sessions/{session_id}", key)).status_code == 404


async def test_an_agent_sees_its_own_and_what_its_parent_may_read_but_not_the_parents_private_sessions(live):
    alice, visible, everything = await _world(live)
    (agent,) = await live.stack.users.by_name("alice-agent")
    page = await live.ok("/api/v1/sessions", await live.key(agent), limit=1000)
    ids = {sid for _, sid in _ids(page)}
    # its own, its agent's, and the datasets alice may read (agents act with their parent's permissions)
    assert ids == {"agent-1", "grand-1", "s2", "shared-1"}


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/v1/sessions/stats", {"range": "2d"}, "range"),
        ("/api/v1/sessions/stats", {"range": ""}, "range"),
        ("/api/v1/sessions/cost-by-model", {"range": "forever"}, "range"),
        ("/api/v1/sessions", {"limit": "-1"}, "limit"),
        ("/api/v1/sessions", {"limit": "0"}, "limit"),
        ("/api/v1/sessions", {"limit": "1001"}, "limit"),
        ("/api/v1/sessions", {"limit": "ten"}, "limit"),
        ("/api/v1/sessions", {"offset": "-5"}, "offset"),
        ("/api/v1/sessions", {"offset": str(10**30)}, "offset"),
        ("/api/v1/sessions", {"order_by": "name"}, "order_by"),
        ("/api/v1/sessions", {"order_by": "tokens_in; DROP TABLE users"}, "order_by"),
        ("/api/v1/sessions", {"status": "zombie"}, "status"),
        ("/api/v1/sessions", {"status": "ABANDONED"}, "status"),
        ("/api/v1/sessions", {"descending": "sideways"}, "descending"),
    ],
)
async def test_bad_query_values_are_422_naming_the_field(live, path, params, field):
    key = await live.key(await live.stack.users.create("alice"))
    response = await live.get(path, key, **params)
    assert response.status_code == 422, response.text
    assert any(error["loc"][-1] == field for error in response.json()["detail"]), response.text


async def test_bad_session_ids_are_not_500(live):
    key = await live.key(await live.stack.users.create("alice"))
    too_long = await live.get("/api/v1/sessions/" + "x" * 300, key)
    assert too_long.status_code == 422  # memlab's ValidationError, in FastAPI's shape
    (error,) = too_long.json()["detail"]
    assert error["loc"] == ["path", "session_id"] and "255" in error["msg"]
    for session_id in ("x" * 300, "a%01b", "%7F", "%C3%28", "%00"):
        response = await live.client.get(f"/api/v1/sessions/{session_id}", headers={"Authorization": f"Bearer {key}"})
        assert response.status_code in (404, 422), (session_id, response.status_code, response.text)


async def test_session_ids_with_slashes_and_unicode_round_trip(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    for session_id in ("team/chat 1", "café:☕", "stats-not"):
        await live.session(alice, session_id)
        found = await live.ok(f"/api/v1/sessions/{httpx.URL(path='/' + session_id).raw_path.decode()[1:]}", key)
        assert found["session_id"] == session_id


# -- pagination, ordering, status -----------------------------------------------------------------


async def test_pages_cover_every_visible_session_once(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    for index in range(7):
        await live.session(alice, f"p{index}")
        live.clock.advance(60)
    seen: list[str] = []
    for offset in (0, 3, 6):
        page = await live.ok("/api/v1/sessions", key, limit=3, offset=offset)
        assert page["total"] == 7 and page["limit"] == 3 and page["offset"] == offset
        assert page["has_more"] is (offset + 3 < 7)
        seen += [item["session_id"] for item in page["items"]]
    assert seen == [f"p{index}" for index in reversed(range(7))]  # newest activity first
    beyond = await live.ok("/api/v1/sessions", key, limit=3, offset=50)
    assert beyond["items"] == [] and beyond["total"] == 7 and beyond["has_more"] is False
    ascending = await live.ok("/api/v1/sessions", key, descending="false", order_by="started_at", limit=1000)
    assert [item["session_id"] for item in ascending["items"]] == [f"p{index}" for index in range(7)]


async def test_status_filter_uses_the_effective_status(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    for session_id in ("idle", "done", "broken"):
        await live.session(alice, session_id)
    live.clock.advance(3600)  # past SESSION_ABANDON_AFTER_SECONDS (1800)
    await live.session(alice, "active")
    await live.stack.session.end("done", status="completed", user=alice)
    await live.stack.session.end("broken", status="failed", user=alice)

    def names(page):
        return {item["session_id"] for item in page["items"]}

    assert names(await live.ok("/api/v1/sessions", key, status="abandoned")) == {"idle"}
    assert names(await live.ok("/api/v1/sessions", key, status="running")) == {"active"}
    assert names(await live.ok("/api/v1/sessions", key, status="completed")) == {"done"}
    assert names(await live.ok("/api/v1/sessions", key, status="failed")) == {"broken"}
    idle = await live.ok("/api/v1/sessions/idle", key)
    assert idle["status"] == "running" and idle["effective_status"] == "abandoned"
    stats = await live.ok("/api/v1/sessions/stats", key, range="all")
    assert stats["by_status"].get("abandoned") == 1 and stats["by_status"].get("completed") == 1
    assert stats["sessions"] == 4


# -- ranges ---------------------------------------------------------------------------------------


async def test_ranges_count_sessions_by_age(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    await live.session(alice, "forty-days", "d")  # each session: one turn, so started = last activity
    live.clock.advance(20 * 86400)
    await live.session(alice, "twenty-days", "d")
    live.clock.advance(17 * 86400)
    await live.session(alice, "three-days", "d")
    live.clock.advance(3 * 86400 - 600)
    await live.session(alice, "ten-minutes", "d")
    live.clock.advance(600)

    expected = {"24h": 1, "7d": 2, "30d": 3, "all": 4}
    for window, count in expected.items():
        stats = await live.ok("/api/v1/sessions/stats", key, range=window)
        assert stats["sessions"] == count, (window, stats)
        costs = await live.ok("/api/v1/sessions/cost-by-model", key, range=window)
        llm = [row for row in costs if row["kind"] == "llm"]
        assert llm and max(row["sessions"] for row in llm) == count, (window, costs)
    default = await live.ok("/api/v1/sessions/stats", key)
    assert default["range"] == "30d" and default["sessions"] == 3


# -- one session ----------------------------------------------------------------------------------


async def test_one_session_has_its_tokens_cost_and_per_model_usage(live):
    alice = await live.stack.users.create("alice")
    key = await live.key(alice)
    await live.session(alice, "chat", "notes")
    await live.stack.search("And who runs payroll?", datasets=["notes"], session_id="chat", user=alice)
    found = await live.ok("/api/v1/sessions/chat", key)
    assert found["session_id"] == "chat" and found["user_id"] == str(alice.id)
    assert found["tokens_in"] > 0 and found["tokens_out"] > 0
    assert found["cost_usd"] is None and found["partially_priced"] is False  # the offline model is unpriced: no silent $0
    assert found["unpriced_tokens_in"] == found["tokens_in"] and found["effective_status"] == "running"
    assert found["dataset_id"] is not None and found["last_model"] == "memlab/offline"
    llm = [row for row in found["models"] if row["kind"] == "llm"]
    assert [row["model"] for row in llm] == ["memlab/offline"]
    assert llm[0]["calls"] >= 2
    assert sum(row["tokens_in"] for row in llm) == found["tokens_in"]
    assert sum(row["tokens_out"] for row in llm) == found["tokens_out"]
    # the list carries the same totals (per-model rows only in the single-session answer)
    (listed,) = (await live.ok("/api/v1/sessions", key))["items"]
    assert (listed["tokens_in"], listed["tokens_out"]) == (found["tokens_in"], found["tokens_out"])


# -- schema and lifespan --------------------------------------------------------------------------


async def test_openapi_describes_the_endpoints_with_typed_models(live):
    schema = (await live.client.get("/openapi.json")).json()
    paths = schema["paths"]
    assert set(paths) == {
        "/healthz",
        "/api/v1/sessions",
        "/api/v1/sessions/stats",
        "/api/v1/sessions/cost-by-model",
        "/api/v1/sessions/{session_id}",
        "/api/v1/remember",
        "/api/v1/recall",
        "/api/v1/search",
        "/api/v1/forget",
        "/api/v1/sessions/{session_id}/feedback",
        "/api/v1/sessions/{session_id}/end",
    }
    components = schema["components"]["schemas"]
    for model in ("SessionPage", "SessionUsage", "ModelUsage", "UsageStats", "ModelCost", "Health", "ErrorBody"):
        assert model in components, model
    ok = paths["/api/v1/sessions/{session_id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/SessionUsage"}
    assert "404" in paths["/api/v1/sessions/{session_id}"]["get"]["responses"]
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    params = {param["name"]: param for param in paths["/api/v1/sessions/stats"]["get"]["parameters"]}
    assert params["range"]["schema"]["enum"] == ["24h", "7d", "30d", "all"]


def test_the_app_opens_an_unopened_stack_and_closes_it(tmp_path, serve_app):
    stack = MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START))
    with serve_app(create_app(stack)) as url:
        assert stack.state.value == "open"
        assert httpx.get(f"{url}/healthz").json()["stack"] == "open"
    assert stack.state.value == "closed"


@asynccontextmanager
async def _served_on_this_loop(app):
    """uvicorn as a task beside the test (the app's stack stays on the test's loop); yields an httpx client."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", ws="none"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not task.done(), "the server exited during startup"
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        server.should_exit = True
        await task


async def test_the_app_leaves_an_open_stack_open(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START)) as stack:
        key = await stack.users.create_api_key(await stack.users.create("alice"))
        async with _served_on_this_loop(create_app(stack)) as client:
            assert (await client.get("/healthz")).json()["stack"] == "open"
            assert (await client.get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}"})).status_code == 200
        assert stack.state.value == "open"  # not the app's to close


async def test_a_closed_stack_answers_503(tmp_path):
    stack = MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START))
    await stack.open()
    key = await stack.users.create_api_key(await stack.users.create("alice"))
    async with _served_on_this_loop(create_app(stack)) as client:
        await stack.close()
        health = await client.get("/healthz")
        assert health.status_code == 503 and health.json()["stack"] == "closed" and health.json()["status"] == "unavailable"
        for path in ENDPOINTS:
            response = await client.get(path, headers={"Authorization": f"Bearer {key}"})
            assert response.status_code == 503 and response.json() == {"detail": "the memory stack is not open"}


def test_the_declared_query_values_are_stack_usages():
    from typing import get_args

    from memlab import usage
    from memlab.api import _app

    assert get_args(_app.SessionStatus) == usage.STATUSES  # memlab.remote's, for the read routes and the MCP tools alike
    assert get_args(_app.OrderBy) == usage.SESSION_ORDER_COLUMNS
    assert get_args(_app.UsageRange) == tuple(usage.RANGES)
