"""The ceiling app of ``memlab bench serve`` answers what memlab answers, with the SQL memlab runs.

Both apps run in process (httpx's ASGI transport) over the same seeded stores: the
bench's own seed, on PostgreSQL and Redis under ``scripts/with-servers.sh``, else SQLite.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memlab.api import create_app
from memlab.bench import _serve_ceiling
from memlab.bench.serve import ENDPOINTS, ServeBenchSpec, _Load, _maybe_database, _seed, server_environment
from memlab.config import StackConfig
from memlab.stack import MemoryStack


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def both(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    """memlab's app and the ceiling app over one seeded world (seeded once), with the seed's caller key and its request mix."""
    async with _maybe_database(os.environ.get("MEMLAB_TEST_POSTGRES_URL", "").strip() or None) as db_url:
        env = server_environment(tmp_path_factory.mktemp("ceiling"), db_url=db_url)  # SQLite cache: not what these read
        with pytest.MonkeyPatch.context() as monkeypatch:
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            ceiling = _serve_ceiling.app_from_env()  # reads the environment's stores
        config = StackConfig.from_env(env)
        world = await _seed(config, ServeBenchSpec(sessions=21), random.Random(3), lambda line: None)
        async with MemoryStack.from_config(config) as stack:
            async with ceiling.router.lifespan_context(ceiling):
                apps = {"memlab": create_app(stack), "ceiling": ceiling}
                clients = {name: httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") for name, app in apps.items()}
                try:
                    yield {"clients": clients, "apps": apps, "stack": stack, "key": world.key, "load": _Load(world, stack), "dialect": "postgresql" if db_url else "sqlite"}
                finally:
                    for client in clients.values():
                        await client.aclose()


async def _answers(both: dict[str, Any], path: str, params: dict[str, Any], key: str | None) -> dict[str, httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return {name: await client.get(path, params=params, headers=headers) for name, client in both["clients"].items()}


async def test_the_ceiling_answers_the_same_json_for_every_endpoint(both):
    rng = random.Random(11)
    seen: dict[str, int] = {}
    for op in ENDPOINTS:
        for _ in range(25):
            _, path, params = both["load"].request(rng, op)
            answers = await _answers(both, path, params, both["key"])
            assert answers["memlab"].status_code == 200, answers["memlab"].text
            assert answers["ceiling"].status_code == 200, answers["ceiling"].text
            assert answers["memlab"].json() == answers["ceiling"].json(), (path, params)
            body = answers["memlab"].json()
            seen[op] = seen.get(op, 0) + (len(body["items"]) if op == "list" else len(body) if op == "cost" else 1)
    assert all(count > 0 for count in seen.values()), seen  # every endpoint answered with rows, not only empty pages


async def test_the_ceiling_refuses_and_misses_like_memlab(both):
    for key in (None, "mlk_not-a-key"):
        answers = await _answers(both, "/api/v1/sessions/stats", {"range": "7d"}, key)
        assert answers["memlab"].status_code == answers["ceiling"].status_code == 401
        assert answers["memlab"].json() == answers["ceiling"].json()
        assert answers["memlab"].headers["www-authenticate"] == answers["ceiling"].headers["www-authenticate"]
    answers = await _answers(both, "/api/v1/sessions/no-such-session", {}, both["key"])
    assert answers["memlab"].status_code == answers["ceiling"].status_code == 404
    assert answers["memlab"].json() == answers["ceiling"].json()


def _normalised(statements: list[str]) -> list[str]:
    """The statements without their bound string values (the cutoff differs by microseconds) and without BEGIN/COMMIT."""
    return [re.sub(r"'[^']*'", "?", sql) for sql in statements if sql not in ("BEGIN", "COMMIT", "BEGIN IMMEDIATE")]


async def test_the_ceiling_runs_the_sql_memlab_runs(both):
    if both["dialect"] != "sqlite":
        pytest.skip("the statements are traced on SQLite's connection (the ceiling compiles the same statements for PostgreSQL)")
    traced: dict[str, list[str]] = {"memlab": [], "ceiling": []}
    both["stack"]._relational._runner._inline.set_trace_callback(traced["memlab"].append)
    both["apps"]["ceiling"].state.db.conn.set_trace_callback(traced["ceiling"].append)
    rng = random.Random(5)
    for op in ENDPOINTS:
        _, path, params = both["load"].request(rng, op)
        for name in traced:
            traced[name].clear()
        answers = await _answers(both, path, params, both["key"])
        assert answers["memlab"].json() == answers["ceiling"].json()
        assert _normalised(traced["memlab"]) == _normalised(traced["ceiling"]), op
        assert len(_normalised(traced["memlab"])) == (3 if op in ("list", "session") else 2)  # the key, then the endpoint's own
