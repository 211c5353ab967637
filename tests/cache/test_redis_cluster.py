"""RedisCache on a Redis Cluster: key layout, every primary swept and pruned, errors, a node restart.

The shared cluster comes from ``MEMLAB_TEST_REDIS_CLUSTER_URL`` (``scripts/with-servers.sh``
starts three primaries); without it those cases skip, except under ``CI=true``. The
node-restart case starts its own three-node cluster (it needs ``redis-server`` and
``redis-cli``). The conformance suite and the state machine run on the cluster through
the ``redis-cluster`` supplier.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
import redis
from redis.asyncio.cluster import RedisCluster

from memlab.cache import RedisCache, redis_client, redis_connection_kwargs
from memlab.cache._redis import PREFIXES
from memlab.config import StackConfig, build_cache_backend
from memlab.exceptions import CacheConnectionError, ConfigError
from memlab.testing import FakeClock
from memlab.testing.suppliers import missing, server_url
from memlab.ttl import SlidingTTL

TTL = 600.0


def cluster_url() -> str:
    return server_url("MEMLAB_TEST_REDIS_CLUSTER_URL")


async def qa(cache, user, session, qa_id):
    return await cache.create_qa_entry(user, session, question="q", answer="a", qa_id=qa_id)


async def ids(cache, user, session):
    return [entry.qa_id for entry in await cache.get_all_qa_entries(user, session)]


@pytest.fixture
async def cache():
    backend = RedisCache(cluster_url(), cluster=True, clock=FakeClock(), ttl=SlidingTTL(TTL), purge_interval_seconds=0)
    await backend.open()
    yield backend
    await backend.prune()
    await backend.close()


def sessions_on_every_primary(client: RedisCluster, user: str) -> dict[str, str]:
    """primary name -> a session id whose keys live on that primary."""
    found: dict[str, str] = {}
    primaries = {node.name for node in client.get_primaries()}
    layout = RedisCache(cluster=True)
    for i in range(10_000):
        session = f"s{i}"
        node = client.get_node_from_key(layout._session_keys(user, session).meta)
        found.setdefault(node.name, session)
        if set(found) == primaries:
            return found
    raise AssertionError("no session id found for every primary")  # pragma: no cover


async def keys_per_primary(client: RedisCluster, pattern: str) -> dict[str, list[str]]:
    return {node.name: sorted(await client.keys(pattern, target_nodes=node)) for node in client.get_primaries()}


# -- without a server ------------------------------------------------------------------------


def test_cluster_flag_from_the_environment_and_config():
    config = StackConfig.from_env({"CACHE_BACKEND": "redis", "CACHE_REDIS_CLUSTER": "yes", "CACHE_PORT": "7000"})
    assert config.cache.redis_cluster is True
    backend = build_cache_backend(config, FakeClock())
    assert isinstance(backend, RedisCache) and backend.cluster and "localhost:7000 (cluster)" in repr(backend)
    assert not build_cache_backend(StackConfig.from_env({"CACHE_BACKEND": "redis"}), FakeClock()).cluster
    with pytest.raises(ConfigError, match="CACHE_REDIS_CLUSTER must be true or false"):
        StackConfig.from_env({"CACHE_REDIS_CLUSTER": "maybe"})


async def test_cluster_settings_that_a_cluster_cannot_have_are_refused():
    with pytest.raises(ConfigError, match="only database 0"):
        RedisCache("redis://127.0.0.1:7000/2", cluster=True)
    with pytest.raises(ConfigError, match="unix socket"):
        RedisCache("unix:///tmp/redis.sock", cluster=True)
    plain = redis.asyncio.Redis()
    with pytest.raises(ConfigError, match="RedisCluster client"):
        RedisCache(client=plain, cluster=True)
    await plain.aclose()


async def test_redis_client_builds_the_cluster_client_when_asked():
    kwargs = redis_connection_kwargs("redis://127.0.0.1:7000/0")
    client = redis_client(kwargs, cluster=True)
    try:
        assert isinstance(client, RedisCluster)
        assert client.retry.get_retries() == 0  # scripts are not idempotent: no retries, as on one server
    finally:
        await client.aclose()
    plain = redis_client(kwargs)
    assert not isinstance(plain, RedisCluster)
    await plain.aclose()


def test_cluster_layout_is_hash_tagged_and_escapes_braces():
    plain, tagged = RedisCache(), RedisCache(cluster=True)
    assert plain._session_keys("u", "s").qa == "agent_sessions:u:s"  # the plain layout is unchanged
    assert plain._session_keys("a{b", "c}").qa == "agent_sessions:a{b:c}"
    keys = tagged._session_keys("u", "s")
    assert keys == ("memlab_meta:{u:s}", "agent_sessions:{u:s}", "memlab_qa_index:{u:s}", "session_context:{u:s}",
                    "memlab_ctx_order:{u:s}")
    assert tagged._session_keys("a}b{", "c:d%").qa == "agent_sessions:{a%7Db%7B:c%3Ad%25}"
    assert tagged._session_keys("a:b", "c") != tagged._session_keys("a", "b:c")
    assert tagged._session_keys("a}", "b") != tagged._session_keys("a", "}b")


async def test_unreachable_cluster_fails_fast_and_names_the_address():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cache = RedisCache(host="127.0.0.1", port=port, cluster=True)
    started = time.monotonic()
    with pytest.raises(CacheConnectionError, match=f"127.0.0.1:{port} \\(cluster\\): no cluster node reachable"):
        await cache.open()
    assert time.monotonic() - started < 5


# -- on the shared cluster ------------------------------------------------------------------


@pytest.mark.server
async def test_cluster_keys_of_a_session_share_one_slot(cache):
    client = cache._client
    user = f"cl-{uuid.uuid4().hex[:8]}"
    for session in ("s", "with}brace", "{tag}", "a:b%c"):
        await qa(cache, user, session, "q0")
        await cache.create_session_context_entry(user, session, {"id": "c0"})
        keys = cache._session_keys(user, session)
        assert {await client.type(key) for key in keys} == {"hash", "list", "zset"}
        assert len({client.keyslot(key) for key in keys}) == 1, keys
        assert await ids(cache, user, session) == ["q0"]
    assert cache.sync_client().llen(cache._session_keys(user, "s").qa) == 1
    assert await ids(cache, user, "with") == []  # "with}brace" did not end the tag early


@pytest.mark.server
async def test_cluster_sweep_and_prune_cover_every_primary(cache):
    client = cache._client
    user = f"cl-{uuid.uuid4().hex[:8]}"
    sessions = sessions_on_every_primary(client, user)
    assert len(sessions) == len(client.get_primaries()) >= 3
    for session in sessions.values():
        await qa(cache, user, session, "q0")
        await qa(cache, user, session, "q1")
        await cache.create_session_context_entry(user, session, {"id": "c0"})
    mine = f"*{{{user}:*"
    assert all(len(found) == 5 for found in (await keys_per_primary(client, mine)).values())

    cache.clock.advance(TTL + 1)
    assert await cache.sweep() == 3 * len(sessions)  # two turns and one context entry per session, on each primary
    assert all(found == [] for found in (await keys_per_primary(client, mine)).values())

    for session in sessions.values():
        await qa(cache, user, session, "q2")
    foreign = {f"someone_else:{{{user}}}:{name}": name for name in sessions}
    for key in foreign:
        await client.set(key, "v")
    await cache.prune()
    left = await keys_per_primary(client, f"*{user}*")
    assert sorted(key for found in left.values() for key in found) == sorted(foreign)
    for key in foreign:
        await client.delete(key)
    for prefix in PREFIXES:
        assert [key async for key in client.scan_iter(match=f"{prefix}*{user}*")] == []


# -- a node of a cluster of our own goes away and comes back ------------------------------


class OwnCluster:
    """Three redis-server primaries on free loopback ports, joined with ``redis-cli --cluster create``."""

    def __init__(self) -> None:
        cluster_url()  # this case belongs to the real-server run
        self.binary, self.cli = shutil.which("redis-server"), shutil.which("redis-cli")
        if self.binary is None or self.cli is None:
            missing("redis-server and redis-cli are needed to start a cluster (scripts/with-servers.sh installs them)")
        self.dir = tempfile.mkdtemp(prefix="memlab-cluster-")
        self.ports = self._free_ports(3)
        self.procs: dict[int, subprocess.Popen] = {}

    @staticmethod
    def _free_ports(n: int) -> list[int]:
        ports: list[int] = []
        while len(ports) < n:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            if port + 10000 <= 65535 and port not in ports:
                with socket.socket() as bus:  # the cluster bus port must be free too
                    try:
                        bus.bind(("127.0.0.1", port + 10000))
                    except OSError:
                        continue
                ports.append(port)
        return ports

    def start(self, port: int) -> None:
        self.procs[port] = subprocess.Popen(
            [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--cluster-enabled", "yes", "--cluster-config-file", f"{self.dir}/nodes-{port}.conf", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._until(lambda: self._ask(port, "ping") == "PONG", f"node {port} did not answer")

    def create(self) -> None:
        for port in self.ports:
            self.start(port)
        subprocess.run([self.cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.ports),
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=30)
        for port in self.ports:
            self.wait_ok(port)

    def wait_ok(self, port: int) -> None:
        self._until(lambda: "cluster_state:ok" in self._ask(port, "cluster", "info"), f"node {port} not ok")

    def stop(self, port: int) -> None:
        proc = self.procs.pop(port, None)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def cleanup(self) -> None:
        for port in list(self.procs):
            self.stop(port)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _ask(self, port: int, *command: str) -> str:
        done = subprocess.run([self.cli, "-p", str(port), *command], capture_output=True, text=True, timeout=5)
        return done.stdout.strip()

    @staticmethod
    def _until(check, message: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                pytest.fail(message)
            time.sleep(0.05)


@pytest.fixture
def own_cluster():
    cluster = OwnCluster()
    try:
        cluster.create()
        yield cluster
    finally:
        cluster.cleanup()


@pytest.mark.server
async def test_cluster_node_restart_fails_only_its_sessions_then_recovers(own_cluster):
    cache = RedisCache(host="127.0.0.1", port=own_cluster.ports[0], cluster=True, clock=FakeClock())
    await cache.open()
    try:
        sessions = sessions_on_every_primary(cache._client, "u")
        victim = own_cluster.ports[1]
        lost = sessions.pop(f"127.0.0.1:{victim}")
        for session in (lost, *sessions.values()):
            await qa(cache, "u", session, "q0")

        own_cluster.stop(victim)
        with pytest.raises(CacheConnectionError, match=f"127.0.0.1:{victim}"):
            await qa(cache, "u", lost, "q1")
        with pytest.raises(CacheConnectionError):
            await cache.get_all_qa_entries("u", lost)
        for session in sessions.values():  # the other primaries keep serving their sessions
            assert await ids(cache, "u", session) == ["q0"]

        own_cluster.start(victim)  # same node id and slots (nodes.conf), empty data (no persistence)
        own_cluster.wait_ok(victim)
        await qa(cache, "u", lost, "q1")  # same instance, no reopen
        assert await ids(cache, "u", lost) == ["q1"]
        for session in sessions.values():
            assert await ids(cache, "u", session) == ["q0"]
    finally:
        await cache.close()
