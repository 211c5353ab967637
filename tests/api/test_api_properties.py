"""Properties: no caller ever sees a session outside its visibility set; no generated query makes the API answer 5xx.

The visibility model is the seed's rule written out independently of memlab:

* a caller sees its own sessions, the sessions of its agents (users whose
  ``parent_user_id`` is the caller, one level), and
* the sessions attributed to a dataset it may read: one owned by the caller or its
  parent, or with a ``read`` grant to the caller or its parent (``write`` does not
  imply ``read``; agents act with their parent's permissions too, as in
  :mod:`memlab.datasets`).

Generated worlds (users, agents, datasets, grants, sessions) are built through the
public API; each example adds fresh users to one stack, so earlier examples' sessions
are present and must stay invisible. ``stack.usage`` is checked on many worlds, the
HTTP endpoints on fewer, and the OpenAPI run draws query values from the schema's own
parameter types plus garbage strings.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx
import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab import MemoryStack
from memlab.api import create_app
from memlab.testing import FakeClock, fast_config

START = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
SESSION_IDS = ("s0", "s1", "s2", "s3")
_worlds = itertools.count()


@dataclass(frozen=True)
class World:
    parents: tuple[int | None, ...]  # parents[i]: index of user i's parent (always < i), or None
    dataset_owners: tuple[int, ...]  # dataset j belongs to user dataset_owners[j]
    grants: frozenset[tuple[int, int, str]]  # (dataset, grantee, permission)
    sessions: tuple[tuple[int, str, int | None], ...]  # (user, session id, dataset of that user or None), in order


@st.composite
def worlds(draw: Any, max_users: int = 5, max_sessions: int = 8) -> World:
    count = draw(st.integers(2, max_users))
    parents = tuple([None] + [draw(st.none() | st.integers(0, index - 1)) for index in range(1, count)])
    owners = tuple(draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=4)))
    grants = frozenset(
        draw(
            st.sets(
                st.tuples(st.integers(0, len(owners) - 1), st.integers(0, count - 1), st.sampled_from(["read", "write"])),
                max_size=6,
            )
        )
    )
    steps = []
    for _ in range(draw(st.integers(1, max_sessions))):
        user = draw(st.integers(0, count - 1))
        own = [index for index, owner in enumerate(owners) if owner == user]
        dataset = draw(st.sampled_from(own) | st.none()) if own else None
        steps.append((user, draw(st.sampled_from(SESSION_IDS)), dataset))
    return World(parents, owners, grants, tuple(steps))


@dataclass
class Built:
    """A world as stored: its users, and per user index the (user id, session id) pairs it may see."""

    users: list[Any]
    visible: dict[int, set[tuple[str, str]]] = field(default_factory=dict)
    session_ids: set[str] = field(default_factory=set)


def expected_visibility(world: World) -> dict[int, set[tuple[int, str]]]:
    """caller index -> {(user index, session id)}: the model of the rule (see the module docstring)."""
    attributed: dict[tuple[int, str], int | None] = {}
    for user, session_id, dataset in world.sessions:  # the first dataset a session is recorded with sticks
        if attributed.get((user, session_id)) is None:
            attributed[(user, session_id)] = dataset
    visible = {}
    for caller, parent in enumerate(world.parents):
        principals = {caller} | ({parent} if parent is not None else set())
        readable = {
            index
            for index, owner in enumerate(world.dataset_owners)
            if owner in principals or any((index, principal, "read") in world.grants for principal in principals)
        }
        visible[caller] = {
            (user, session_id)
            for (user, session_id), dataset in attributed.items()
            if user == caller or world.parents[user] == caller or (dataset is not None and dataset in readable)
        }
    return visible


async def build(stack: MemoryStack, world: World) -> Built:
    tag = next(_worlds)
    users: list[Any] = []
    for index, parent in enumerate(world.parents):
        users.append(await stack.users.create(f"w{tag}-u{index}", parent_user_id=users[parent].id if parent is not None else None))
    names = [f"w{tag}-d{index}" for index in range(len(world.dataset_owners))]
    for name, owner in zip(names, world.dataset_owners):
        await stack.datasets.create(name, user=users[owner])
    for dataset, grantee, permission in world.grants:
        await stack.datasets.grant(names[dataset], users[grantee], permission, by=users[world.dataset_owners[dataset]])
    for user, session_id, dataset in world.sessions:
        if dataset is None:
            await stack.remember("a note", session_id=session_id, user=users[user], self_improvement=False)
        else:
            await stack.search("Who owns billing?", datasets=[names[dataset]], session_id=session_id, user=users[user])
    built = Built(users, session_ids={session_id for _, session_id, _ in world.sessions})
    for caller, pairs in expected_visibility(world).items():
        built.visible[caller] = {(str(users[user].id), session_id) for user, session_id in pairs}
    return built


def _pairs(items: list[Any]) -> set[tuple[str, str]]:
    return {(str(item["user_id"]), item["session_id"]) if isinstance(item, dict) else (str(item.user_id), item.session_id) for item in items}


# -- the Python API, many worlds ------------------------------------------------------------------


async def _check_python(stack: MemoryStack, world: World) -> None:
    built = await build(stack, world)
    for caller, user in enumerate(built.users):
        visible = built.visible[caller]
        page = await stack.usage.list_sessions(user, limit=1000)
        assert _pairs(page.items) == visible, (caller, world)
        assert page.total == len(visible) and not page.has_more
        for status in ("running", "completed", "failed", "abandoned"):
            assert _pairs((await stack.usage.list_sessions(user, status=status, limit=1000)).items) <= visible
        for session_id in sorted(built.session_ids | {"never-used"}):
            found = await stack.usage.get(session_id, user=user)
            if any(sid == session_id for _, sid in visible):
                assert found is not None and (str(found.user_id), session_id) in visible, (caller, session_id, world)
            else:
                assert found is None, (caller, session_id, world)
        stats = await stack.usage.stats(range="all", user=user)
        assert stats.sessions == len(visible)
        assert stats.tokens_in == sum(item.tokens_in for item in page.items)
        assert stats.tokens_out == sum(item.tokens_out for item in page.items)
        costs = await stack.usage.cost_by_model(range="all", user=user)
        assert sum(row.tokens_in for row in costs if row.kind == "llm") == stats.tokens_in
        assert all(row.sessions <= len(visible) for row in costs)


def test_visibility_through_the_python_api(tmp_path):
    runner = asyncio.Runner()
    stack = MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock(START))
    runner.run(stack.open())
    try:

        @settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(world=worlds())
        def check(world: World) -> None:
            runner.run(_check_python(stack, world))

        check()
    finally:
        runner.run(stack.close())
        runner.close()


# -- the same over HTTP, fewer worlds -------------------------------------------------------------


class _Served:
    """A writer stack on a private loop, and a server (its own stack, same data root and clock) in a thread."""

    def __init__(self, root: Any, serve_app: Any) -> None:
        self.clock = FakeClock(START)
        self.runner = asyncio.Runner()
        self.stack = MemoryStack.from_config(fast_config(root), clock=self.clock)
        self.runner.run(self.stack.open())
        self._server = serve_app(create_app(MemoryStack.from_config(fast_config(root), clock=self.clock)))
        self.client = httpx.Client(base_url=self._server.__enter__(), timeout=60)

    def close(self) -> None:
        self.client.close()
        self._server.__exit__(None, None, None)
        self.runner.run(self.stack.close())
        self.runner.close()

    def get(self, key: str, path: str, **params: Any) -> httpx.Response:
        return self.client.get(path, params=params, headers={"Authorization": f"Bearer {key}"})


def _check_http(served: _Served, world: World) -> None:
    built = served.runner.run(build(served.stack, world))
    for caller, user in enumerate(built.users):
        visible = built.visible[caller]
        key = served.runner.run(served.stack.users.create_api_key(user))
        page = served.get(key, "/api/v1/sessions", limit=1000).json()
        assert _pairs(page["items"]) == visible and page["total"] == len(visible), (caller, world)
        small = served.get(key, "/api/v1/sessions", limit=1, offset=0).json()
        assert small["total"] == len(visible) and small["has_more"] is (len(visible) > 1)
        for session_id in sorted(built.session_ids | {"never-used"}):
            response = served.get(key, f"/api/v1/sessions/{session_id}")
            if any(sid == session_id for _, sid in visible):
                assert response.status_code == 200 and (response.json()["user_id"], session_id) in visible
            else:
                assert response.status_code == 404 and response.json() == {"detail": "session not found"}
        stats = served.get(key, "/api/v1/sessions/stats", range="all").json()
        assert stats["sessions"] == len(visible)
        assert stats["tokens_in"] == sum(item["tokens_in"] for item in page["items"])
        costs = served.get(key, "/api/v1/sessions/cost-by-model", range="all").json()
        assert sum(row["tokens_in"] for row in costs if row["kind"] == "llm") == stats["tokens_in"]


def test_visibility_over_http(tmp_path, serve_app):
    served = _Served(tmp_path, serve_app)
    try:

        @settings(max_examples=8, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(world=worlds(max_users=4, max_sessions=6))
        def check(world: World) -> None:
            _check_http(served, world)

        check()
    finally:
        served.close()


# -- the OpenAPI schema: no generated request is a 5xx --------------------------------------------

_GARBAGE = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_TRUTHY = ["true", "false", "True", "0", "1", "yes", "no", "on", "off"]


def _values(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    """Strings for a query parameter of ``schema``: valid ones of its type, edge values, and garbage."""
    if "anyOf" in schema:
        return st.one_of(*(_values(option) for option in schema["anyOf"] if option.get("type") != "null"), _GARBAGE)
    if "enum" in schema:
        return st.sampled_from([str(value) for value in schema["enum"]]) | _GARBAGE
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        valid = st.integers(low, high)
        edges = st.sampled_from([value for value in (low, high) if value is not None] + [-1, 0, 2**31, 2**63, -(2**63) - 1, 10**40])
        return st.one_of(valid, edges, st.integers()).map(str) | st.sampled_from(["1.5", "1e3", " 7", "0x10", "NaN", ""]) | _GARBAGE
    if kind == "boolean":
        return st.sampled_from(_TRUTHY) | _GARBAGE
    return _GARBAGE


def _operations(schema: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(path, item["get"].get("parameters", [])) for path, item in schema["paths"].items() if "get" in item]


def _response_schema(openapi: dict[str, Any], path: str) -> dict[str, Any]:
    content = openapi["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return {**content, "components": openapi["components"]}


def test_no_request_drawn_from_the_openapi_schema_is_a_5xx(tmp_path, serve_app):
    served = _Served(tmp_path, serve_app)
    try:
        world = World(parents=(None, 0, None), dataset_owners=(0, 2), grants=frozenset({(1, 0, "read")}), sessions=((0, "s0", 0), (1, "s1", None), (2, "s2", 1), (2, "s3", None)))
        built = served.runner.run(build(served.stack, world))
        key = served.runner.run(served.stack.users.create_api_key(built.users[0]))
        openapi = served.client.get("/openapi.json").json()
        operations = _operations(openapi)
        assert {path for path, _ in operations} >= {"/api/v1/sessions", "/api/v1/sessions/{session_id}", "/api/v1/sessions/stats"}
        validators = {path: jsonschema.Draft202012Validator(_response_schema(openapi, path)) for path, _ in operations}
        session_ids = st.sampled_from(sorted(built.session_ids)) | st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300)
        statuses: dict[int, int] = {}

        @settings(max_examples=250, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(data=st.data())
        def check(data: st.DataObject) -> None:
            path, parameters = data.draw(st.sampled_from(operations))
            url, query = path, {}
            for parameter in parameters:
                if parameter["in"] == "path":
                    url = url.replace("{" + parameter["name"] + "}", quote(data.draw(session_ids), safe=""))
                elif parameter["in"] == "query" and data.draw(st.booleans()):
                    query[parameter["name"]] = data.draw(_values(parameter["schema"]))
            response = served.get(key, url, **query)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code < 500, (url, query, response.text)
            body = response.json()  # every answer is JSON
            if response.status_code == 200:
                validators[path].validate(body)

        check()
        assert statuses.get(200, 0) > 20 and statuses.get(422, 0) > 20, statuses  # both valid and invalid requests were drawn
    finally:
        served.close()
