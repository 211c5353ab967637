"""Redis cache backend on ``redis.asyncio``, on one Redis server or a Redis Cluster.

Key layout (SPEC §3.1), per session ``<u>:<s>`` = ``<user_id>:<session_id>``:

=================================  ======  ==================================================
``agent_sessions:<u>:<s>``         list    QA payloads (JSON), append order; RPUSH per turn
``session_context:<u>:<s>``        hash    context entry id -> payload (JSON)
``memlab_ctx_order:<u>:<s>``       zset    context entry id, scored by first-insert sequence
``memlab_qa_index:<u>:<s>``        hash    qa_id -> list position (O(1) lookup and dedupe)
``memlab_meta:<u>:<s>``            hash    ``qa_epoch qa_exp ctx_seq ctx_exp``
=================================  ======  ==================================================

A ``:`` or ``%`` inside an id is percent-escaped (``%3A``, ``%25``) so that
``("a:b", "c")`` and ``("a", "b:c")`` stay two sessions; other ids appear verbatim.

**Redis Cluster** (``cluster=True``, ``CACHE_REDIS_CLUSTER=true``): the client is a
:class:`redis.asyncio.cluster.RedisCluster` and the session part of every key is a
hash tag, ``agent_sessions:{<u>:<s>}`` and so on, so the five keys of a session
share one hash slot and each script stays one atomic call on one primary. In this
layout ``{`` and ``}`` inside an id are percent-escaped too (``%7B``, ``%7D``), so
an id can neither end the tag early nor start a second one. A plain server keeps
the layout above (no braces), so data written before cluster support stays
readable; the two layouts name different keys, so moving a plain server's
sessions to a cluster means renaming its keys (or starting empty). Atomicity is
per session, as on one server; nothing spans sessions. :meth:`~RedisCache.sweep`
and :meth:`~RedisCache.prune` walk every primary the client knows
(``get_primaries()``, one ``SCAN`` loop per node); a slot that migrates during the
walk may be missed by that walk. No database but 0, no unix socket.

**TTL.** The logical expiry of each kind (``qa_exp``/``ctx_exp``, integer microseconds
of :attr:`CacheBackend.clock`) decides liveness, exactly as in ``MemoryCache``. A write
re-stamps it inside its script by the policy's declared rule, for any policy: unset or
before :meth:`~memlab.ttl.TTLPolicy.restamp_cutoff` becomes
:meth:`~memlab.ttl.TTLPolicy.expiry_after_write`, both computed in Python. Each
write also sets a native ``PEXPIRE`` on the keys it wrote (the remaining logical
lifetime plus one second, so never shorter than the logical expiry; the meta hash
outlives both kinds), so abandoned sessions vanish without a sweep. Native expiry
follows the *server's* clock: with a fake clock, keep TTLs longer than the real
duration of the test.

**Atomicity.** Every session operation is one Lua script, so it is atomic across
processes. Updates run the caller's
Python merge between a read script and a compare-and-set script that retries on
conflict. Appends and reads are O(1) in session length (``RPUSH`` plus an
index ``HSET``; ``LRANGE -n -1``); deleting a QA turn is O(n) inside its script
(it shifts the index). :meth:`sweep` and :meth:`prune` walk the keyspace with
``SCAN``: each session is swept atomically, the walk as a whole is not. On a
cluster, every script touches only keys of one hash slot (see above).

**Shared server.** :meth:`prune` SCANs memlab's key prefixes and UNLINKs them; it
never runs ``FLUSHDB`` (cognee does), because memlab is one tenant of a Redis that
other applications may use.

**Connections.** Everything goes through redis-py's public API on the client's own
pool: scripts are ``register_script`` objects (``EVALSHA``, loaded again on
``NOSCRIPT``), QA reads a non-transactional pipeline. The pool the backend builds
blocks: at most :data:`POOL_MAX_CONNECTIONS` connections, and a call that finds them
all busy waits for one (at most :data:`POOL_WAIT_SECONDS`) instead of failing. An
injected client keeps its own pool; if that one raises once full (redis-py's
default), calls beyond its ``max_connections`` wait for one to finish. A call that
fails or is cancelled mid-reply drops its connection (redis-py disconnects it), so
no late reply reaches the next call. Connection failures are not retried by the
client (a dead server fails fast: 2 s connect timeout, 5 s socket timeout); the next
call reconnects once the server is back. The cluster client has no blocking pool:
at most :data:`POOL_MAX_CONNECTIONS` connections per node, and as many calls at once
(each holds at most one connection per node), the others wait in the backend. It
does not retry either (a failover or a primary going down fails the calls on that
primary's slots with :class:`~memlab.exceptions.CacheConnectionError`; sessions on
the other primaries keep working); after a connection error it reloads the slot
map on the next call, so a restarted node is used again as soon as it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
import ssl as _ssl
from collections.abc import AsyncIterator, Hashable
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, NamedTuple

try:
    import redis
    import redis.asyncio as aioredis
    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.commands.core import AsyncScript
    from redis.connection import SSLConnection, UnixDomainSocketConnection, parse_url
    from redis.exceptions import ClusterDownError, RedisClusterException
    from redis.retry import Retry as SyncRetry
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("RedisCache needs the redis package: pip install 'memlab[redis]'") from exc

from memlab._clock import Clock
from memlab.cache._base import CacheBackend, PayloadChange, config_options
from memlab.ttl import TTLPolicy
from memlab.cache._redis_lua import PRELUDE, READ_QA, SCRIPTS
from memlab.cache._turn_lock import lock_timeout
from memlab.exceptions import (
    CacheConnectionError,
    ConfigError,
    MemlabError,
    SessionLockTimeout,
    SessionQAEntryValidationError,
)

__all__ = ["RedisCache", "redis_client", "redis_connection_kwargs"]

logger = logging.getLogger("memlab.cache")

QA_PREFIX = "agent_sessions:"
CONTEXT_PREFIX = "session_context:"
CONTEXT_ORDER_PREFIX = "memlab_ctx_order:"
QA_INDEX_PREFIX = "memlab_qa_index:"
META_PREFIX = "memlab_meta:"
#: every prefix memlab writes; prune() deletes exactly these
PREFIXES = (QA_PREFIX, CONTEXT_PREFIX, CONTEXT_ORDER_PREFIX, QA_INDEX_PREFIX, META_PREFIX)
#: the key of a session's cross-process turn lock: the holder's token (expires by itself: not pruned)
TURN_LOCK_PREFIX = "memlab_turn_lock:"
#: the session's queue of waiting turns (a ZSET token -> ticket), their heartbeats (token -> deadline ms) and
#: counters (a HASH: tickets issued, locks granted, when the last grant was): these expire by themselves too
TURN_QUEUE_PREFIX = "memlab_turn_queue:"
TURN_ALIVE_PREFIX = "memlab_turn_alive:"
TURN_COUNT_PREFIX = "memlab_turn_count:"
#: a turn lock's lifetime (ms): the holder's heartbeat extends it every quarter of it, so a live turn keeps the
#: lock as long as it runs and a crashed holder blocks its session at most this long
TURN_LOCK_TTL_MS = 10_000
#: a waiting turn that stopped polling for this long (ms) leaves the queue (it rejoins at its old place if alive)
TURN_WAITER_TTL_MS = 2_000
#: how often the turn at the head of the queue polls (seconds); the ones behind it back off to 8x
TURN_POLL_SECONDS = 0.002
#: join the queue (ARGV[4] the caller's ticket, 0 for a new one), drop dead waiters, and take the lock if it is free
#: and the caller heads the queue. Returns {got it, ticket, locks granted so far, turns ahead, holder's hold (ms) or -1}
_TURN_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, life, wttl, ticket = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if ticket == 0 then ticket = redis.call('HINCRBY', KEYS[4], 'next', 1) end
redis.call('ZADD', KEYS[2], ticket, token)
redis.call('ZADD', KEYS[3], now + wttl, token)
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)) do
  redis.call('ZREM', KEYS[2], dead)
  redis.call('ZREM', KEYS[3], dead)
end
local keep = 2 * math.max(life, wttl)
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('PEXPIRE', KEYS[3], keep)
local granted = tonumber(redis.call('HGET', KEYS[4], 'granted') or '0')
if redis.call('EXISTS', KEYS[1]) == 0 then
  if redis.call('ZRANGE', KEYS[2], 0, 0)[1] == token then
    redis.call('SET', KEYS[1], token, 'PX', life)
    redis.call('ZREM', KEYS[2], token)
    redis.call('ZREM', KEYS[3], token)
    redis.call('HSET', KEYS[4], 'granted', granted + 1, 'since', now)
    redis.call('PEXPIRE', KEYS[4], keep)
    return {1, ticket, granted + 1, 0, 0}
  end
  redis.call('PEXPIRE', KEYS[4], keep)
  return {0, ticket, granted, redis.call('ZRANK', KEYS[2], token), -1}
end
redis.call('PEXPIRE', KEYS[4], keep)
local since = redis.call('HGET', KEYS[4], 'since')
return {0, ticket, granted, redis.call('ZRANK', KEYS[2], token), since and (now - tonumber(since)) or -1}
"""
#: the holder's heartbeat: extend the lock while it holds the caller's token (1), else 0 (it was lost)
_TURN_EXTEND = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], 2 * tonumber(ARGV[2]))
return 1
"""
#: leave the queue, and delete the lock only while it holds the caller's token; a session nobody holds or waits for
#: keeps no keys
_TURN_RELEASE = """
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then released = redis.call('DEL', KEYS[1]) end
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0 then redis.call('DEL', KEYS[2], KEYS[3], KEYS[4]) end
return released
"""

CONNECT_TIMEOUT_SECONDS = 2.0
SOCKET_TIMEOUT_SECONDS = 5.0
#: connections one backend opens at most; further concurrent calls wait for one
POOL_MAX_CONNECTIONS = 64
#: longest a call waits for a free pooled connection before it fails
POOL_WAIT_SECONDS = 20.0
_CAS_ATTEMPTS = 64
_DEAD_CURSOR = ("dead",)
_EPOCH0 = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICRO = timedelta(microseconds=1)
_CERT_REQS = {"required": _ssl.CERT_REQUIRED, "optional": _ssl.CERT_OPTIONAL, "none": _ssl.CERT_NONE}
_URL_OPTIONS = {"host", "port", "db", "username", "password", "ssl_cert_reqs", "client_name"}
#: the sweep script's text, for the cluster sweep's pipelined EVAL
_SWEEP_ONE = PRELUDE + SCRIPTS["sweep_one"]


def redis_connection_kwargs(
    url: str | None = None,
    *,
    host: str = "localhost",
    port: int = 6379,
    username: str | None = None,
    password: str | None = None,
    db: int = 0,
    ssl: bool = False,
    ssl_cert_reqs: str | _ssl.VerifyMode = "required",
) -> dict[str, Any]:
    """Keyword arguments for ``redis.Redis`` *and* ``redis.asyncio.Redis``.

    A ``redis://``, ``rediss://`` or ``unix://`` URL overrides host, port, db and
    credentials; ``rediss://`` turns TLS on. ``ssl_cert_reqs`` is ``"required"``,
    ``"optional"`` or ``"none"`` (or an ``ssl.VerifyMode``) and is passed to redis-py
    as the matching ``ssl.CERT_*`` value. Timeouts are short and client-side retries
    are off, so an unreachable server fails fast.
    """
    settings: dict[str, Any] = {"host": host, "port": port, "db": db, "username": username, "password": password}
    settings["ssl_cert_reqs"] = ssl_cert_reqs
    use_ssl, unix_path = bool(ssl), None
    if url:
        try:
            parsed = parse_url(url)
        except ValueError as exc:  # redis-py's messages never echo the URL (which may hold a password)
            raise ConfigError(f"invalid redis URL: {exc}") from None
        connection_class = parsed.pop("connection_class", None)
        use_ssl = use_ssl or connection_class is SSLConnection
        if connection_class is UnixDomainSocketConnection:
            unix_path = parsed.pop("path", None)
        unknown = set(parsed) - _URL_OPTIONS
        if unknown:
            raise ConfigError(f"unsupported redis URL options: {', '.join(sorted(unknown))}")
        settings.update(parsed)
    reqs = settings.pop("ssl_cert_reqs")
    if isinstance(reqs, str):
        if reqs.strip().lower() not in _CERT_REQS:
            raise ConfigError(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, got {reqs!r}")
        reqs = _CERT_REQS[reqs.strip().lower()]
    elif not isinstance(reqs, _ssl.VerifyMode):
        raise ConfigError(f"ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, got {reqs!r}")
    kwargs = {
        **settings,
        "ssl": use_ssl,
        "ssl_cert_reqs": reqs,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
        "retry": None,  # no client-side retries: scripts are not idempotent, and a dead server must fail fast
        "retry_on_error": [],
        "decode_responses": True,
    }
    if unix_path is not None:
        for key in ("host", "port", "ssl", "ssl_cert_reqs"):
            kwargs.pop(key)
        kwargs["unix_socket_path"] = unix_path
    return kwargs


def _cluster_kwargs(connection_kwargs: dict[str, Any], *, sync: bool = False) -> dict[str, Any]:
    """:func:`redis_connection_kwargs` as keyword arguments of ``RedisCluster`` (async or sync).

    The address is the startup node the client discovers the cluster from. A cluster
    has only database 0 and no unix sockets (``ConfigError`` otherwise). Cluster-level
    retries are off, as on one server: a script is not idempotent, and a dead node
    must fail fast. At most :data:`POOL_MAX_CONNECTIONS` connections per node.
    """
    kwargs = dict(connection_kwargs)
    if "unix_socket_path" in kwargs:
        raise ConfigError("a Redis Cluster cannot be reached through a unix socket; give host and port")
    if kwargs.pop("db", 0):
        raise ConfigError(f"a Redis Cluster has only database 0, got db={connection_kwargs['db']}")
    kwargs.pop("retry_on_error", None)
    kwargs["retry"] = (SyncRetry if sync else Retry)(NoBackoff(), 0)
    kwargs["max_connections"] = POOL_MAX_CONNECTIONS
    return kwargs


def redis_client(connection_kwargs: dict[str, Any], *, cluster: bool = False) -> "aioredis.Redis | RedisCluster":
    """A ``redis.asyncio.Redis`` for :func:`redis_connection_kwargs`, on a blocking pool.

    redis-py's default pool raises ``MaxConnectionsError`` as soon as more than its
    limit of calls are in flight, which would turn a burst of writes into failures
    while the server is healthy. A :class:`redis.asyncio.BlockingConnectionPool` of
    :data:`POOL_MAX_CONNECTIONS` makes a call wait for a free connection, at most
    :data:`POOL_WAIT_SECONDS`; only then does it fail. The client owns its pool.

    ``cluster=True``: a :class:`redis.asyncio.cluster.RedisCluster` whose startup node
    is the given address (:func:`_cluster_kwargs`). It has one small pool
    per node that raises once full, not a blocking one: a caller running more than
    :data:`POOL_MAX_CONNECTIONS` calls at once must bound them (``RedisCache`` does).
    """
    if cluster:
        return RedisCluster(**_cluster_kwargs(connection_kwargs))
    settings = aioredis.Redis(**connection_kwargs).connection_pool  # redis-py's own translation of the settings
    pool = aioredis.BlockingConnectionPool(
        connection_class=settings.connection_class,
        max_connections=POOL_MAX_CONNECTIONS,
        timeout=POOL_WAIT_SECONDS,
        **settings.connection_kwargs,
    )
    return aioredis.Redis.from_pool(pool)


def _us(moment: datetime) -> int:
    return (moment - _EPOCH0) // _MICRO


def _new_epoch() -> str:
    return str(secrets.randbits(62))


def _enc(part: Any) -> str:
    part = part if isinstance(part, str) else str(part)
    if ":" in part or "%" in part:
        return part.replace("%", "%25").replace(":", "%3A")
    return part


def _enc_tagged(part: Any) -> str:
    """:func:`_enc`, and braces escaped too: the id goes inside a cluster hash tag."""
    part = _enc(part)
    if "{" in part or "}" in part:
        return part.replace("{", "%7B").replace("}", "%7D")
    return part


def _session_suffix(user_id: str, session_id: str, *, cluster: bool = False) -> str:
    """The session part of every key: ``<u>:<s>``, or the hash tag ``{<u>:<s>}`` on a cluster."""
    if cluster:
        return "{" + _enc_tagged(user_id) + ":" + _enc_tagged(session_id) + "}"
    return f"{_enc(user_id)}:{_enc(session_id)}"


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _texts(values: list) -> list[str]:
    if values and isinstance(values[0], bytes):
        return [value.decode() for value in values]
    return values


class _Keys(NamedTuple):
    meta: str
    qa: str
    qa_index: str
    ctx: str
    ctx_order: str

    @classmethod
    def of(cls, suffix: str) -> "_Keys":
        return cls(META_PREFIX + suffix, QA_PREFIX + suffix, QA_INDEX_PREFIX + suffix, CONTEXT_PREFIX + suffix,
                   CONTEXT_ORDER_PREFIX + suffix)


class _Scripts:
    """The scripts of one client, by name: :class:`redis.commands.core.AsyncScript` objects.

    ``await script(keys=..., args=...)`` runs ``EVALSHA`` and, on ``NOSCRIPT`` (server
    restarted, ``SCRIPT FLUSH``), loads the script and runs it once more.
    """

    append_qa: AsyncScript
    read_qa: AsyncScript
    read_qa_log: AsyncScript
    get_qa: AsyncScript
    set_qa: AsyncScript
    delete_qa: AsyncScript
    upsert_ctx: AsyncScript
    read_ctx: AsyncScript
    get_ctx: AsyncScript
    set_ctx: AsyncScript
    delete_ctx: AsyncScript
    delete_session: AsyncScript
    sweep_one: AsyncScript
    #: a turn lock's queue, heartbeat and release (no prelude: they touch the lock's keys only)
    turn_acquire: AsyncScript
    turn_extend: AsyncScript
    turn_release: AsyncScript

    def __init__(self, client: "aioredis.Redis | RedisCluster") -> None:
        def script(name: str) -> AsyncScript:
            return client.register_script(PRELUDE + SCRIPTS[name])

        self.append_qa = script("append_qa")
        self.read_qa = client.register_script(READ_QA)
        self.read_qa_log = script("read_qa_log")
        self.get_qa = script("get_qa")
        self.set_qa = script("set_qa")
        self.delete_qa = script("delete_qa")
        self.upsert_ctx = script("upsert_ctx")
        self.read_ctx = script("read_ctx")
        self.get_ctx = script("get_ctx")
        self.set_ctx = script("set_ctx")
        self.delete_ctx = script("delete_ctx")
        self.delete_session = script("delete_session")
        self.sweep_one = script("sweep_one")
        self.turn_acquire = client.register_script(_TURN_ACQUIRE)
        self.turn_extend = client.register_script(_TURN_EXTEND)
        self.turn_release = client.register_script(_TURN_RELEASE)
        self._client = client

    async def load(self) -> None:
        """``SCRIPT LOAD`` every script (on a cluster: on every primary)."""
        for script in vars(self).values():
            if isinstance(script, AsyncScript):
                await self._client.script_load(script.script)


class RedisCache(CacheBackend):
    """Session cache in Redis (``redis.asyncio``); many processes may share one server.

    ``url`` (``redis://``, ``rediss://``, ``unix://``) wins over ``host``/``port``/
    ``username``/``password``/``db``. ``cluster=True`` talks to a Redis Cluster through
    ``redis.asyncio.cluster.RedisCluster``, the address being a startup node, with the
    cluster key layout. ``client`` takes a ready ``redis.asyncio.Redis`` (or subclass,
    for example ``fakeredis.aioredis.FakeRedis``) or ``RedisCluster`` (which implies
    ``cluster=True``); the backend then never closes it.
    See the module docstring for key layout, TTL and atomicity.
    """

    name = "redis"
    #: every key prefix this backend writes (``prune()`` deletes exactly these)
    KEY_PREFIXES: ClassVar[tuple[str, ...]] = PREFIXES
    default_ttl_policy = "sliding"

    def __init__(
        self,
        url: str | None = None,
        *,
        host: str = "localhost",
        port: int = 6379,
        username: str | None = None,
        password: str | None = None,
        db: int = 0,
        ssl: bool = False,
        ssl_cert_reqs: str = "required",
        cluster: bool = False,
        client: Any = None,
        **backend_kwargs: Any,
    ) -> None:
        super().__init__(**backend_kwargs)
        if client is not None and not isinstance(client, (aioredis.Redis, RedisCluster)):
            raise ConfigError(
                "client must be a redis.asyncio.Redis (or a subclass such as FakeRedis) or a "
                f"redis.asyncio.cluster.RedisCluster, got {type(client).__name__}"
            )
        if cluster and client is not None and not isinstance(client, RedisCluster):
            raise ConfigError(f"cluster=True needs a redis.asyncio.cluster.RedisCluster client, got {type(client).__name__}")
        self._conn_kwargs = redis_connection_kwargs(
            url, host=host, port=port, username=username, password=password, db=db, ssl=ssl, ssl_cert_reqs=ssl_cert_reqs
        )
        self._cluster = bool(cluster) or isinstance(client, RedisCluster)
        if self._cluster and client is None:
            _cluster_kwargs(self._conn_kwargs)  # refuse a unix socket or a database but 0 now, not at open
        self._secret = self._conn_kwargs.get("password") or None
        self._client: aioredis.Redis | RedisCluster | None = client
        self._owns_client = client is None
        self._injected = client is not None
        self._scripts: _Scripts | None = None
        self._scripts_for: Any = None
        self._sync: redis.Redis | redis.RedisCluster | None = None
        self._gate: asyncio.Semaphore | None = None
        if isinstance(client, RedisCluster):
            node = client.startup_nodes[0] if client.startup_nodes else None
            self.where = f"{node.host}:{node.port} (cluster)" if node else "<cluster>"
        elif client is not None:
            pool_kwargs = client.connection_pool.connection_kwargs
            if "host" in pool_kwargs and "port" in pool_kwargs and "server" not in pool_kwargs:
                self.where = f"{pool_kwargs['host']}:{pool_kwargs['port']}"
            else:
                self.where = f"<{type(client).__module__}.{type(client).__name__}>"
        elif "unix_socket_path" in self._conn_kwargs:
            self.where = f"unix:{self._conn_kwargs['unix_socket_path']}"
        else:
            self.where = f"{self._conn_kwargs['host']}:{self._conn_kwargs['port']}" + (" (cluster)" if self._cluster else "")

    @classmethod
    def from_config(cls, config: Any, *, clock: Clock | None = None, ttl: TTLPolicy | None = None) -> "RedisCache":
        """``redis`` from the config: ``cache.host``, ``port``, ``username``, ``password``, ``ssl``, ``redis_cluster``."""
        cache = config.cache
        return cls(
            host=cache.host,
            port=cache.port,
            username=cache.username,
            password=cache.password.get_secret_value() if cache.password else None,
            ssl=cache.ssl,
            ssl_cert_reqs=cache.ssl_cert_reqs,
            cluster=cache.redis_cluster,
            **config_options(config, clock, ttl),
        )

    def __repr__(self) -> str:
        return f"RedisCache({self.where}, db={self._conn_kwargs.get('db', 0)}, ttl={self.ttl.name}:{self.ttl.seconds})"

    @property
    def cluster(self) -> bool:
        """True when this backend talks to a Redis Cluster (and uses the hash-tagged key layout)."""
        return self._cluster

    def _session_keys(self, user_id: str, session_id: str) -> _Keys:
        """The five keys of one session, in this backend's layout (see the module docstring)."""
        return _Keys.of(_session_suffix(user_id, session_id, cluster=self._cluster))

    # -- connections ---------------------------------------------------------------

    def sync_client(self) -> "redis.Redis | redis.RedisCluster":
        """A synchronous ``redis.Redis`` (``redis.RedisCluster`` on a cluster) with the same settings (TLS included).

        For admin tasks and tests; created on first use and closed by :meth:`close`.
        Not available when the backend was given a ready ``client``.
        """
        if self._injected:
            raise ConfigError("sync_client() needs connection settings; this RedisCache was given a ready client")
        if self._sync is None:
            if self._cluster:
                self._sync = redis.RedisCluster(**_cluster_kwargs(self._conn_kwargs, sync=True))
            else:
                self._sync = redis.Redis(**self._conn_kwargs)
        return self._sync

    def _new_client(self) -> "aioredis.Redis | RedisCluster":
        """The backend's async client: same settings as :meth:`sync_client` (:func:`redis_client`)."""
        return redis_client(self._conn_kwargs, cluster=self._cluster)

    async def _open(self) -> None:
        if self._client is None:
            self._client = self._new_client()
        try:
            await self._client.ping()
            # loaded now, while every node answers: on NOSCRIPT redis-py loads a script on every
            # primary, so a first use after one of them went down would fail on all of them
            await self._run(opening=True).load()
        except BaseException:
            await self._drop_client()
            raise
        if isinstance(self._client, RedisCluster):
            # per-node pools that raise once full; a call holds at most one connection per node
            limit = self._client.connection_kwargs.get("max_connections") or POOL_MAX_CONNECTIONS
            self._gate = asyncio.Semaphore(limit)
            return
        pool = self._client.connection_pool
        limit = getattr(pool, "max_connections", None)
        if not isinstance(pool, aioredis.BlockingConnectionPool) and limit:
            self._gate = asyncio.Semaphore(limit)  # an injected pool that raises once full: see _call

    async def _close(self) -> None:
        if self._sync is not None:
            sync, self._sync = self._sync, None
            sync.close()
        await self._drop_client()

    async def _drop_client(self) -> None:
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            self._scripts = None
            await client.aclose()

    def _open_client(self) -> "aioredis.Redis | RedisCluster":
        """The client, once the backend is open; ``RuntimeError`` otherwise."""
        client = self._client
        if client is None or not self._opened:
            raise RuntimeError(f"redis cache at {self.where} is not open")
        return client

    def _run(self, *, opening: bool = False) -> _Scripts:
        client = self._client if opening else self._open_client()
        if client is None:
            raise RuntimeError(f"redis cache at {self.where} is not open")
        scripts = self._scripts
        if scripts is None or self._scripts_for is not client:
            scripts = _Scripts(client)
            self._scripts, self._scripts_for = scripts, client
        return scripts

    async def _call(self, op: str, fn: Any, *args: Any) -> Any:
        """Run ``fn``, errors described; on a non-blocking pool, at most ``max_connections`` calls at once.

        Each call holds at most one connection at a time, so the others wait here as
        they would for a :class:`redis.asyncio.BlockingConnectionPool`, instead of
        failing with ``MaxConnectionsError``.
        """
        try:
            if self._gate is None:
                return await super()._call(op, fn, *args)
            async with self._gate:
                return await super()._call(op, fn, *args)
        except CacheConnectionError as exc:
            cause = exc.__cause__
            if cause is None or isinstance(cause, MemlabError):
                raise
            raise CacheConnectionError(self._describe(op, cause)) from cause

    def _describe(self, op: str, exc: BaseException) -> str:
        text = f"{type(exc).__name__}: {exc}"
        tls_on = bool(self._conn_kwargs.get("ssl"))
        if isinstance(exc, redis.AuthenticationError) or "NOAUTH" in text or "WRONGPASS" in text:
            cause = "authentication failed (check the username and password)"
        elif isinstance(exc, ClusterDownError):
            cause = "cluster is down (CLUSTERDOWN: a slot has no reachable primary)"
        elif isinstance(exc, RedisClusterException) and "cannot be connected" in text:
            cause = "no cluster node reachable"
        elif "CERTIFICATE_VERIFY_FAILED" in text:
            mode = self._conn_kwargs.get("ssl_cert_reqs")
            reqs = next((name for name, value in _CERT_REQS.items() if value == mode), "?")
            cause = f"TLS certificate not trusted (ssl_cert_reqs={reqs})"
        elif _is_tls_error(exc):
            cause = "TLS handshake failed (ssl is on; does the server speak TLS on this port?)"
        elif tls_on and isinstance(exc, redis.TimeoutError) and "connecting" in text:
            cause = "no answer to the TLS handshake (server unreachable, or it does not speak TLS on this port)"
        elif not tls_on and isinstance(exc, redis.ConnectionError) and ("reset by peer" in text or "closed by server" in text):
            cause = "server unreachable or dropped the connection (a TLS-only server does that: use rediss:// or ssl=True)"
        elif isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
            cause = "server unreachable"
        elif isinstance(exc, RuntimeError) and "is not open" in text:
            cause = "backend is not open"
        else:
            cause = "command failed"
        node = getattr(exc, "connection", None)  # the cluster client tags an error with the node it came from
        where = f" on node {node.name}" if isinstance(node, ClusterNode) else ""
        message = f"redis cache at {self.where}: {cause} during {op}{where} ({text})"
        if self._secret:
            message = message.replace(self._secret, "***")
        return message

    # -- TTL stamping ----------------------------------------------------------------

    def _rule(self, now: datetime) -> tuple[str, str, str]:
        """The scripts' stamp rule for a write at ``now``, from the policy's declaration.

        ``("N", "", "")`` never stamps (TTL off); ``("T", cutoff, expiry)`` re-stamps an
        expiry that is unset or below ``cutoff`` to ``expiry`` (integer microseconds).
        """
        cutoff, expiry = self.ttl.restamp_cutoff(now), self.ttl.expiry_after_write(now)
        if cutoff is None or expiry is None:
            return ("N", "", "")
        return ("T", str(_us(cutoff)), str(_us(expiry)))

    # -- QA ----------------------------------------------------------------------------

    async def _append_qa(self, user_id: str, session_id: str, qa_id: str, payload: str, now: datetime) -> None:
        scripts = self._run()
        k = self._session_keys(user_id, session_id)
        args = (_us(now), *self._rule(now), qa_id, payload, _new_epoch())
        if _text(await scripts.append_qa(keys=(k.meta, k.qa, k.qa_index), args=args)) == "dup":
            raise SessionQAEntryValidationError(f"qa_id {qa_id!r} already exists in this session")

    async def _read_qa(self, user_id: str, session_id: str, last_n: int | None, now: datetime) -> list[bytes]:
        """One ``EVALSHA`` (:data:`~memlab.cache._redis_lua.READ_QA`): ``HMGET`` of the kind's state, then ``LRANGE``.

        One command, one round trip, atomic like every script. Measured on the 2-core
        machine (last 10 of ~330-byte payloads, one awaited call at a time): ~102 µs
        per call against ~112 µs for ``HMGET`` + ``LRANGE`` in one non-transactional
        pipeline and ~80 µs for a bare ``LRANGE``; the pipeline's cost is redis-py's
        client side (a pipeline object, two packed commands, two parsed replies), the
        script's the ~20 µs the server spends running it. The payloads stay bytes:
        the parser reads UTF-8 JSON as it is.
        """
        k = self._session_keys(user_id, session_id)
        return await self._run().read_qa(keys=(k.meta, k.qa), args=(_us(now), -last_n if last_n else 0))

    async def _read_qa_log(
        self, user_id: str, session_id: str, cursor: Hashable | None, now: datetime
    ) -> tuple[Hashable, list[str], bool]:
        k = self._session_keys(user_id, session_id)
        epoch, length = "", 0
        if (
            isinstance(cursor, tuple)
            and len(cursor) == 2
            and type(cursor[0]) is int
            and type(cursor[1]) is int
            and cursor[1] >= 0
        ):
            epoch, length = str(cursor[0]), cursor[1]
        result = await self._run().read_qa_log(keys=(k.meta, k.qa), args=(_us(now), epoch, length))
        if not result:
            return _DEAD_CURSOR, [], True
        new_epoch, size, reset, rows = result
        return (int(_text(new_epoch)), int(size)), _texts(rows), bool(int(reset))

    async def _modify(
        self, kind: str, user_id: str, session_id: str, key: str, change: PayloadChange, now: datetime
    ) -> bool:
        scripts = self._run()
        k = self._session_keys(user_id, session_id)
        if kind == "qa":
            get, put, keys, extra = scripts.get_qa, scripts.set_qa, (k.meta, k.qa, k.qa_index), True
        else:
            get, put, keys, extra = scripts.get_ctx, scripts.set_ctx, (k.meta, k.ctx, k.ctx_order), False
        now_us, rule = _us(now), self._rule(now)
        for _ in range(_CAS_ATTEMPTS):
            old = _text(await get(keys=keys if extra else keys[:2], args=(now_us, key)))
            if old is None:
                return False
            new = change(old)
            args = [now_us, *rule, key, old, "" if new is None else new, "0" if new is None else "1"]
            if extra:
                args.append(_new_epoch())
            result = _text(await put(keys=keys, args=args))
            if result == "ok":
                return True
            if result == "gone":
                return False
        raise CacheConnectionError(f"redis cache at {self.where}: gave up updating {key!r} after {_CAS_ATTEMPTS} conflicts")

    async def _modify_qa(self, user_id: str, session_id: str, qa_id: str, change: PayloadChange, now: datetime) -> bool:
        return await self._modify("qa", user_id, session_id, qa_id, change, now)

    async def _delete_qa(self, user_id: str, session_id: str, qa_id: str, now: datetime) -> bool:
        k = self._session_keys(user_id, session_id)
        args = (_us(now), *self._rule(now), qa_id, _new_epoch())
        return int(await self._run().delete_qa(keys=(k.meta, k.qa, k.qa_index), args=args)) == 1

    # -- context ---------------------------------------------------------------------

    async def _upsert_context(self, user_id: str, session_id: str, entry_id: str, payload: str, now: datetime) -> None:
        k = self._session_keys(user_id, session_id)
        args = (_us(now), *self._rule(now), entry_id, payload)
        await self._run().upsert_ctx(keys=(k.meta, k.ctx, k.ctx_order), args=args)

    async def _read_context(self, user_id: str, session_id: str, now: datetime) -> list[str]:
        k = self._session_keys(user_id, session_id)
        return _texts(await self._run().read_ctx(keys=(k.meta, k.ctx, k.ctx_order), args=(_us(now),)))

    async def _modify_context(
        self, user_id: str, session_id: str, entry_id: str, change: PayloadChange, now: datetime
    ) -> bool:
        return await self._modify("context", user_id, session_id, entry_id, change, now)

    async def _delete_context(self, user_id: str, session_id: str, entry_id: str, now: datetime) -> bool:
        k = self._session_keys(user_id, session_id)
        return int(await self._run().delete_ctx(keys=(k.meta, k.ctx, k.ctx_order), args=(_us(now), entry_id))) == 1

    # -- session / maintenance -----------------------------------------------------------

    async def _delete_session(self, user_id: str, session_id: str, now: datetime) -> bool:
        k = self._session_keys(user_id, session_id)
        return int(await self._run().delete_session(keys=k, args=(_us(now),))) == 1

    async def _scan(self, match: str, count: int) -> AsyncIterator[str]:
        """Every key matching ``match``: ``SCAN`` on one server; on a cluster, a ``SCAN`` loop on each primary in turn."""
        client = self._open_client()
        if not isinstance(client, RedisCluster):
            async for key in client.scan_iter(match=match, count=count):
                yield _text(key)
            return
        for node in client.get_primaries():
            cursor = 0
            while True:
                reply: Any = await client.scan(cursor, match=match, count=count, target_nodes=node)
                cursors, keys = reply  # the cluster client answers ({node name: cursor}, keys)
                for key in keys:
                    yield _text(key)
                cursor = cursors[node.name]
                if not cursor:
                    break

    async def _sweep(self, now: datetime) -> int:
        client = self._open_client()
        scripts = self._run()
        now_us = _us(now)
        removed = 0
        batch: list[str] = []

        async def flush() -> int:
            sessions = [_Keys.of(meta[len(META_PREFIX):]) for meta in batch]
            batch.clear()
            if not isinstance(client, RedisCluster):
                pipe = client.pipeline(transaction=False)
                for keys in sessions:
                    await scripts.sweep_one(keys=keys, args=(now_us,), client=pipe)
                return sum(int(result) for result in await pipe.execute())
            # a cluster pipeline refuses EVALSHA: it sends the body (EVAL; the server caches the compiled
            # script), one round trip per primary per batch; each session is still one atomic script
            cluster_pipe = client.pipeline()
            for keys in sessions:
                cluster_pipe.eval(_SWEEP_ONE, len(keys), *keys, now_us)
            return sum(int(result) for result in await cluster_pipe.execute())

        # on a cluster only hash-tagged sessions: a foreign untagged key would make its script cross slots
        async for key in self._scan(META_PREFIX + ("{*" if self._cluster else "*"), 500):
            batch.append(key)
            if len(batch) >= 200:
                removed += await flush()
        if batch:
            removed += await flush()
        return removed

    async def _prune(self) -> None:
        client = self._open_client()
        for prefix in PREFIXES:
            batch = []
            async for key in self._scan(prefix + "*", 1000):
                batch.append(key)
                if len(batch) >= 500:
                    await client.unlink(*batch)  # a cluster client splits it by slot
                    batch = []
            if batch:
                await client.unlink(*batch)

    # -- turn lock ---------------------------------------------------------------------

    def turn_lock(self, user_id: str, session_id: str, *, timeout: float):
        """The session's turn lock across processes: a queue of waiting turns served in order, and a lock key with a heartbeat.

        A turn joins the ZSET ``memlab_turn_queue:<session>`` with a ticket (``HINCRBY``)
        and polls one script that drops waiters whose heartbeat stopped
        (:data:`TURN_WAITER_TTL_MS`) and, when the lock key is free and the caller heads
        the queue, sets ``memlab_turn_lock:<session>`` to its token for
        :data:`TURN_LOCK_TTL_MS`. While the turn runs, a heartbeat task extends that
        every quarter of the lifetime; release deletes the key only while it holds the
        holder's token. A crashed holder frees the session when the key expires (seconds),
        a crashed waiter when its heartbeat does. After ``timeout`` s:
        :class:`~memlab.exceptions.SessionLockTimeout`, saying how many turns took the
        lock meanwhile. On a cluster all four keys share the session's hash slot.
        """
        super().turn_lock(user_id, session_id, timeout=timeout)  # checks the ids
        suffix = _session_suffix(user_id, session_id, cluster=self._cluster)
        keys = [prefix + suffix for prefix in (TURN_LOCK_PREFIX, TURN_QUEUE_PREFIX, TURN_ALIVE_PREFIX, TURN_COUNT_PREFIX)]
        return self._turn_lock(keys, session_id, user_id, timeout)

    @contextlib.asynccontextmanager
    async def _turn_lock(self, keys: list[str], session_id: str, user_id: str, timeout: float):
        client, scripts = self._open_client(), self._run()
        token = secrets.token_hex(16)
        started = time.monotonic()
        ticket, granted_before, pause = 0, None, TURN_POLL_SECONDS
        try:
            while True:
                life = TURN_LOCK_TTL_MS
                got, ticket, granted, ahead, held_ms = (
                    int(value) for value in await scripts.turn_acquire(keys=keys, args=[token, life, TURN_WAITER_TTL_MS, ticket])
                )
                if got:
                    break
                granted_before = granted if granted_before is None else granted_before
                if time.monotonic() - started >= timeout:
                    await scripts.turn_release(keys=keys, args=[token])
                    raise lock_timeout(
                        user_id, session_id, waited=time.monotonic() - started, turns=granted - granted_before,
                        held_for=held_ms / 1000 if held_ms >= 0 else None, ahead=ahead,
                    )
                pause = TURN_POLL_SECONDS if ahead == 0 else min(pause * 2, TURN_POLL_SECONDS * 8)
                await asyncio.sleep(pause)
        except SessionLockTimeout:
            raise
        except BaseException as exc:
            with contextlib.suppress(Exception):  # else the waiter's heartbeat runs out
                await scripts.turn_release(keys=keys, args=[token])
            if isinstance(exc, Exception):
                raise CacheConnectionError(self._describe("turn_lock", exc)) from exc
            raise
        heartbeat = asyncio.ensure_future(self._turn_heartbeat(scripts, [keys[0], keys[3]], token, life, session_id))
        try:
            yield
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            try:
                await scripts.turn_release(keys=keys, args=[token])
            except Exception as exc:  # the key expires by itself; the turn is done
                logger.warning("redis cache at %s: releasing the turn lock of %r failed: %s", self.where, session_id, exc)

    async def _turn_heartbeat(self, scripts: _Scripts, keys: list[str], token: str, life: int, session_id: str) -> None:
        """Extend the held lock every quarter of its lifetime until cancelled (the turn ended)."""
        while True:
            await asyncio.sleep(life / 4000)
            try:
                if not await scripts.turn_extend(keys=keys, args=[token, life]):
                    logger.error("redis cache at %s: the turn lock of %r expired while its turn ran (a stall longer than %d ms)", self.where, session_id, life)
                    return
            except Exception as exc:  # try again next beat: the lock lives on until then
                logger.warning("redis cache at %s: extending the turn lock of %r failed: %s", self.where, session_id, exc)


def _is_tls_error(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _ssl.SSLError) or "SSL" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False
