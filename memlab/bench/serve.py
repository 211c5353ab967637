"""``memlab bench serve``: the HTTP read API under load, on a real ``memlab serve`` process.

One run:

1. **Stores.** A fresh temporary data root. With ``MEMLAB_TEST_POSTGRES_URL`` set, a
   throw-away PostgreSQL database on that server is ``MEMLAB_DB_URL`` (dropped at the
   end), and with ``MEMLAB_TEST_REDIS_URL`` set the session cache is Redis
   (``CACHE_BACKEND=redis``; the run's sessions are deleted at the end). Otherwise the
   defaults: ``memlab.db`` and ``cache.db`` (SQLite) in the data root, shared by every
   worker process and by the benchmark process (one machine).
2. **Seed**, through the Python API on a stack built from the same environment: a
   caller with an API key, two agent users of it, two other users; datasets of each,
   one of them shared with the caller for reading; ``sessions`` sessions of one to
   three turns each (``stack.search``), their last activity spread over 40 days (so
   the ``range`` values differ), some ended ``completed`` or ``failed``, the old
   running ones ``abandoned``. Five of every seven are visible to the caller.
3. **Server.** ``python -m memlab serve --workers N`` as a subprocess on a free
   loopback port, with that environment. Cold start: from ``Popen`` to the first
   ``/healthz`` 200, and to the last worker's ``Application startup complete.``
4. **Warm-up** (untimed, errors still count), then **one client** for
   ``single_seconds``: the same mix as below, one operation at a time, a turn every
   ``clients / turn_clients`` operations. Then **``clients`` concurrent clients** for
   ``seconds``: ``clients - turn_clients`` HTTP clients, each its own
   ``httpx.AsyncClient`` (keep-alive), issuing the mix; ``turn_clients`` clients writing
   turns through ``stack.search`` on a stack in this process (into the visible seeded
   sessions, one in twenty into a new session), so reads see changing data.

The HTTP mix: 40 % ``GET /api/v1/sessions`` (status, order_by, descending, limit and
offset drawn at random), 30 % ``GET /api/v1/sessions/{id}`` (a visible session), 15 %
``/stats?range=``, 15 % ``/cost-by-model?range=``. Latency is client-observed
(``time.perf_counter`` around each awaited call, body read), all clients sharing this
process's event loop with the turn writers. An error is any non-2xx answer or any
exception; the target is none (PASS/MISS).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlab.bench._table import number, percentile, render
from memlab.bench.cache import SERVER_SETTINGS
from memlab.bench.errors import BenchmarkError
from memlab.exceptions import ValidationError
from memlab.testing.databases import throwaway_database

__all__ = ["CEILING_TARGET", "ENDPOINTS", "ERRORS_TARGET", "MIX", "PHASES", "ServeBenchSpec", "format_serve_table", "process_gone", "run_bench_serve", "server_environment"]

#: endpoint label -> path template of the four read endpoints
ENDPOINTS: dict[str, str] = {
    "list": "GET /api/v1/sessions",
    "session": "GET /api/v1/sessions/{id}",
    "stats": "GET /api/v1/sessions/stats",
    "cost": "GET /api/v1/sessions/cost-by-model",
}
#: share of each endpoint in the HTTP mix
MIX: dict[str, float] = {"list": 0.40, "session": 0.30, "stats": 0.15, "cost": 0.15}
#: errors allowed in a run (any non-2xx answer or exception)
ERRORS_TARGET = 0
#: requests/s per worker memlab's API should reach of the ceiling app's, same run (issue 25)
CEILING_TARGET = 0.7
#: phases of the ceiling comparison: the mix, then each endpoint alone
PHASES = ("mix", *ENDPOINTS)

_TURN = "turn"
_ALL = "all"
_LABELS = {**ENDPOINTS, _ALL: "all HTTP requests", _TURN: "turns (stack.search, in process)"}
_STATUSES = (None, None, "running", "completed", "failed", "abandoned")
_ORDERS = ("last_activity_at", "started_at", "ended_at", "cost_usd", "tokens_in", "tokens_out")
_RANGES = ("24h", "7d", "30d", "all")
_TOPICS = ("billing", "search", "ingest", "auth", "reporting", "payments", "alerts", "exports", "sync", "storage")
#: variables of the stores the run sets itself (anything else in the environment passes through)
_STORE_VARIABLES = (
    "MEMLAB_DATA_ROOT", "MEMLAB_DB_URL", "CACHING", "CACHE_BACKEND", "CACHE_DB_URL", "CACHE_HOST", "CACHE_PORT",
    "CACHE_USERNAME", "CACHE_PASSWORD", "CACHE_SSL", "CACHE_SSL_CERT_REQS", "CACHE_REDIS_CLUSTER", "TAPES_INGEST_URL",
    "TAPES_PROVIDER", "DB_PROVIDER", "DB_HOST", "DB_PORT", "DB_USERNAME", "DB_PASSWORD", "DB_NAME",
    "LLM_MODEL", "LLM_API_KEY", "EMBEDDING_MODEL", "EMBEDDING_API_KEY",
)
#: seeded sessions' last activity reaches this far back
_SEED_SPAN = timedelta(days=40)


@dataclass(frozen=True)
class ServeBenchSpec:
    """What ``memlab bench serve`` runs (see the module docstring)."""

    workers: int = 2
    clients: int = 16
    turn_clients: int = 2
    seconds: float = 20.0
    single_seconds: float = 5.0
    sessions: int = 200
    warmup_requests: int = 40
    seed: int = 0
    startup_timeout: float = 120.0
    #: also serve the ceiling app (:mod:`memlab.bench._serve_ceiling`) and compare against it, alternating
    ceiling: bool = True
    #: rounds of the comparison (each runs every phase on both servers)
    rounds: int = 3
    #: seconds of each phase of a round, per server
    ceiling_seconds: float = 3.0
    #: also time both apps in process, per part of a request (:mod:`memlab.bench._serve_profile`)
    profile: bool = False
    #: requests per endpoint and app in each pass of the profile
    profile_requests: int = 200
    #: passes of the profile (the order of the apps alternating)
    profile_passes: int = 5

    def __post_init__(self) -> None:
        for name in ("workers", "clients", "sessions", "rounds", "profile_requests", "profile_passes"):
            if getattr(self, name) < 1:
                raise ValidationError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.turn_clients < self.clients:
            raise ValidationError(f"turn_clients must be from 0 to clients - 1 ({self.clients - 1}): one client at least issues HTTP requests, got {self.turn_clients}")
        for name in ("seconds", "single_seconds", "startup_timeout", "ceiling_seconds"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ValidationError(f"{name} must be a number of seconds > 0, got {value!r}")
        if self.warmup_requests < 0:
            raise ValidationError(f"warmup_requests must be >= 0, got {self.warmup_requests}")


# -- the environment and the stores ----------------------------------------------------------------


def server_environment(
    data_root: Path, *, db_url: str | None = None, redis_url: str | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of the server and of the benchmark's stacks: ``base`` (``os.environ``) with the run's stores.

    The store variables (data root, metadata URL, cache settings, the LLM and the
    embedder) are replaced: the offline LLM priced as ``gpt-4o-mini``, the hashing
    embedder, ``db_url`` as ``MEMLAB_DB_URL`` and ``redis_url`` as the Redis cache when given.
    """
    env = {key: value for key, value in (os.environ if base is None else base).items() if key.upper() not in _STORE_VARIABLES}
    env.update({"MEMLAB_DATA_ROOT": str(data_root), "EMBEDDING_MODEL": "memlab/hashing", "LLM_PRICE_AS": "gpt-4o-mini"})
    for name, value in {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1"}.items():
        env.setdefault(name, value)  # the server never reaches the network
    if db_url:
        env["MEMLAB_DB_URL"] = db_url
    if redis_url:
        redis = SERVER_SETTINGS["redis"](redis_url)  # the cache benchmark's reading of the URL
        env.update({"CACHE_BACKEND": "redis", "CACHE_HOST": redis["host"], "CACHE_PORT": str(redis["port"])})
        env["CACHE_SSL"] = "true" if redis["ssl"] else "false"
        if redis["username"]:
            env["CACHE_USERNAME"] = redis["username"]
        if redis["password"]:
            env["CACHE_PASSWORD"] = redis["password"]
    return env


class _ShiftedClock:
    """The system clock moved ``shift`` seconds into the past (the seeding stack's clock)."""

    def __init__(self) -> None:
        self.shift = 0.0

    def now(self) -> datetime:
        return datetime.now(timezone.utc) - timedelta(seconds=self.shift)

    def monotonic(self) -> float:
        return time.monotonic()


@dataclass
class _Session:
    session_id: str
    owner: Any  # a memlab User
    dataset: str
    visible: bool


@dataclass
class _World:
    key: str
    users: int
    datasets: int
    sessions: list[_Session]
    turns: int

    @property
    def visible(self) -> list[_Session]:
        return [session for session in self.sessions if session.visible]


def _question(rng: random.Random) -> str:
    topic = rng.choice(_TOPICS)
    return rng.choice(
        (f"Who owns the {topic} service?", f"What changed in {topic} last week?", f"Why is {topic} slow today?", f"How do I restart {topic}?")
    )


async def _seed(config: Any, spec: ServeBenchSpec, rng: random.Random, say: Callable[[str], None]) -> _World:
    """Users, datasets, the caller's API key and ``spec.sessions`` sessions, written on a stack with a shifted clock."""
    from memlab.stack import MemoryStack

    clock = _ShiftedClock()
    async with MemoryStack.from_config(config, clock=clock) as stack:
        users = stack.users
        tag = uuid.uuid4().hex[:6]
        alice = await users.create(f"bench-alice-{tag}")
        agents = [await users.create(f"bench-agent-{i}-{tag}", parent_user_id=alice.id) for i in (1, 2)]
        carol, bob = await users.create(f"bench-carol-{tag}"), await users.create(f"bench-bob-{tag}")
        places = [  # (owner, dataset, visible to alice)
            (alice, "alice-notes", True),
            (alice, "alice-work", True),
            (agents[0], "agent-1-notes", True),
            (agents[1], "agent-2-notes", True),
            (carol, "carol-shared", True),
            (carol, "carol-private", False),
            (bob, "bob-private", False),
        ]
        for owner, dataset, _ in places:
            await stack.datasets.create(dataset, user=owner)
        await stack.datasets.grant("carol-shared", alice, "read", by=carol)
        key = await users.create_api_key(alice)
        sessions, turns = [], 0
        for i in range(spec.sessions):
            owner, dataset, visible = places[i % len(places)]
            session = _Session(f"bench-serve-{i:05d}", owner, dataset, visible)
            clock.shift = _SEED_SPAN.total_seconds() * (i / spec.sessions) ** 3  # a tenth within the last hour, most within 30 days
            for _ in range(1 + i % 3):
                await stack.search(_question(rng), datasets=[dataset], session_id=session.session_id, user=owner)
                turns += 1
            if i % 6 in (1, 3):
                await stack.session.end(session.session_id, "completed" if i % 6 == 1 else "failed", user=owner)
            sessions.append(session)
            if (i + 1) % 50 == 0 or i + 1 == spec.sessions:
                say(f"seeded {i + 1}/{spec.sessions} sessions ({turns} turns)")
    return _World(key, users=5, datasets=len(places), sessions=sessions, turns=turns)


# -- the server process ----------------------------------------------------------------------------


def process_gone(pid: int) -> bool:
    """True when process ``pid`` no longer runs (it does not exist, or it is a zombie nobody reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:  # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``), None when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server:
    """``python -m memlab serve`` in a subprocess (its own process group); stderr is read by a thread."""

    _WORKER = re.compile(r"Started server process \[(\d+)\]")

    def __init__(self, env: Mapping[str, str], workers: int, module: str = "memlab") -> None:
        self.workers = workers
        self.name = "memlab serve" if module == "memlab" else module
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines: deque[str] = deque(maxlen=50)
        self.worker_pids: list[int] = []
        self.ready_at: list[float] = []  # perf_counter of each "Application startup complete."
        self.began = time.perf_counter()
        command = ["serve"] if module == "memlab" else []  # the ceiling module takes the same options
        argv = [sys.executable, "-m", module, *command, "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(workers)]
        self.process = subprocess.Popen(
            argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, name="memlab-bench-serve-stderr", daemon=True)
        self._reader.start()

    @property
    def workers_only(self) -> list[int]:
        """The processes answering requests: the workers, or the one process when it serves alone."""
        return [pid for pid in self.worker_pids if pid != self.process.pid] or [self.process.pid]

    @property
    def pids(self) -> list[int]:
        """The server's processes: the one started, and its workers (when they are other processes)."""
        return list(dict.fromkeys([self.process.pid, *self.worker_pids]))

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip())
            found = self._WORKER.search(line)
            if found:
                self.worker_pids.append(int(found.group(1)))
            elif "Application startup complete" in line:
                self.ready_at.append(time.perf_counter())

    def tail(self) -> str:
        return "\n".join(list(self.lines)[-15:])

    async def wait_ready(self, timeout: float) -> dict[str, Any]:
        """Poll ``/healthz`` until 200, then wait for every worker's startup line; the cold-start times in seconds."""
        import httpx

        deadline = self.began + timeout
        first_ok = None
        async with httpx.AsyncClient(base_url=self.url, timeout=5, trust_env=False) as client:
            while first_ok is None:
                if self.process.poll() is not None:
                    raise BenchmarkError(f"{self.name} exited with {self.process.returncode} during startup:\n{self.tail()}")
                try:
                    if (await client.get("/healthz")).status_code == 200:
                        first_ok = time.perf_counter()
                        break
                except httpx.TransportError:
                    pass
                if time.perf_counter() > deadline:
                    raise BenchmarkError(f"{self.name} did not answer /healthz within {timeout:g} s:\n{self.tail()}")
                await asyncio.sleep(0.02)
        while len(self.ready_at) < self.workers and time.perf_counter() < deadline and self.process.poll() is None:
            await asyncio.sleep(0.02)
        ready = sorted(self.ready_at)
        return {
            "first_healthz_s": first_ok - self.began,
            # answering, and every worker said so (a worker's line may come before the first answer is seen)
            "all_workers_s": max(ready[self.workers - 1], first_ok) - self.began if len(ready) >= self.workers else None,
            "workers_up": len(ready),
        }

    async def stop(self) -> float:
        """SIGINT (uvicorn's graceful shutdown), then SIGKILL to the process group after 30 s; the seconds it took."""
        began = time.perf_counter()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                await asyncio.to_thread(self.process.wait, 30)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)  # the group of the process this run started
                except ProcessLookupError:
                    pass
                await asyncio.to_thread(self.process.wait)
        took = time.perf_counter() - began
        await asyncio.to_thread(self._reader.join, 10)
        if self.process.stderr is not None:
            self.process.stderr.close()
        return took


# -- the load --------------------------------------------------------------------------------------


@dataclass
class _Tally:
    """Latencies (seconds, successful calls) and errors per operation of one phase."""

    times: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in (*ENDPOINTS, _TURN)})
    errors: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def error(self, op: str, kind: str, detail: str) -> None:
        self.errors[op] += 1
        self.kinds[f"{_LABELS[op]}: {kind}"] += 1
        if len(self.samples) < 5:
            self.samples.append(f"{_LABELS[op]}: {kind}: {detail[:200]}")


class _Load:
    """The request mix and the turn writer, over the seeded world (new sessions join ``pool``)."""

    def __init__(self, world: _World, stack: Any) -> None:
        self.stack = stack
        self.pool = world.visible
        self.new_sessions: list[_Session] = []
        self._owner, self._dataset = world.visible[0].owner, world.visible[0].dataset  # the caller's own dataset

    def request(self, rng: random.Random, only: str | None = None) -> tuple[str, str, dict[str, Any]]:
        op = only or rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if op == "list":
            params: dict[str, Any] = {
                "order_by": rng.choice(_ORDERS),
                "descending": rng.choice(("true", "false")),
                "limit": rng.choice((10, 20, 50, 100)),
                "offset": rng.choice((0, 0, 0, 20, 50)),
            }
            status = rng.choice(_STATUSES)
            if status:
                params["status"] = status
            return op, "/api/v1/sessions", params
        if op == "session":
            return op, f"/api/v1/sessions/{rng.choice(self.pool).session_id}", {}
        return op, "/api/v1/sessions/stats" if op == "stats" else "/api/v1/sessions/cost-by-model", {"range": rng.choice(_RANGES)}

    async def http(self, client: Any, rng: random.Random, tally: _Tally, only: str | None = None) -> None:
        op, path, params = self.request(rng, only)
        began = time.perf_counter()
        try:
            response = await client.get(path, params=params)
        except Exception as exc:  # noqa: BLE001 - any failed request is an error of the run, counted
            tally.error(op, type(exc).__name__, str(exc))
            return
        took = time.perf_counter() - began
        if 200 <= response.status_code < 300:
            tally.times[op].append(took)
        else:
            tally.error(op, f"HTTP {response.status_code}", response.text)

    async def turn(self, rng: random.Random, tally: _Tally) -> None:
        new = rng.random() < 0.05
        if new:
            session = _Session(f"bench-serve-new-{uuid.uuid4().hex[:12]}", self._owner, self._dataset, True)
        else:
            session = rng.choice(self.pool)
        began = time.perf_counter()
        try:
            await self.stack.search(_question(rng), datasets=[session.dataset], session_id=session.session_id, user=session.owner)
        except Exception as exc:  # noqa: BLE001 - counted as an error of the run
            tally.error(_TURN, type(exc).__name__, str(exc))
            return
        tally.times[_TURN].append(time.perf_counter() - began)
        if new:  # readable now that its first turn is recorded
            self.pool.append(session)
            self.new_sessions.append(session)


def _client(url: str, key: str) -> Any:
    import httpx

    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30, trust_env=False)


async def _warm_up(load: _Load, url: str, key: str, spec: ServeBenchSpec, tally: _Tally) -> None:
    """About ``warmup_requests`` requests of the mix over several connections (so each worker gets some), untimed."""
    connections = min(8, spec.clients)
    per = -(-spec.warmup_requests // connections) if spec.warmup_requests else 0

    async def one(i: int) -> None:
        rng = random.Random(spec.seed * 1000 + 900 + i)
        async with _client(url, key) as client:
            for _ in range(per):
                await load.http(client, rng, tally)

    await asyncio.gather(*(one(i) for i in range(connections)))


async def _single(load: _Load, url: str, key: str, spec: ServeBenchSpec) -> _Tally:
    """One client, one operation at a time, the same mix: a turn every ``clients / turn_clients`` operations."""
    tally = _Tally()
    rng = random.Random(spec.seed * 1000 + 500)
    every = round(spec.clients / spec.turn_clients) if spec.turn_clients else 0
    async with _client(url, key) as client:
        began = time.perf_counter()
        deadline, done = began + spec.single_seconds, 0
        while time.perf_counter() < deadline:
            done += 1
            if every and done % every == 0:
                await load.turn(rng, tally)
            else:
                await load.http(client, rng, tally)
        tally.elapsed = time.perf_counter() - began
    return tally


async def _concurrent(load: _Load, url: str, key: str, spec: ServeBenchSpec, seconds: float | None = None, only: str | None = None) -> _Tally:
    """``clients - turn_clients`` HTTP clients and ``turn_clients`` turn writers at once for ``seconds`` (the spec's by default).

    ``only``: the HTTP clients issue that endpoint alone instead of the mix.
    """
    tally = _Tally()
    seconds = spec.seconds if seconds is None else seconds
    start = asyncio.Event()
    deadline = 0.0

    async def http_client(i: int) -> None:
        rng = random.Random(spec.seed * 1000 + i)
        async with _client(url, key) as client:
            await client.get("/healthz")  # connect before the clock starts
            await start.wait()
            while time.perf_counter() < deadline:
                await load.http(client, rng, tally, only)

    async def turn_client(i: int) -> None:
        rng = random.Random(spec.seed * 1000 + 100 + i)
        await start.wait()
        while time.perf_counter() < deadline:
            await load.turn(rng, tally)

    tasks = [asyncio.create_task(http_client(i)) for i in range(spec.clients - spec.turn_clients)]
    tasks += [asyncio.create_task(turn_client(i)) for i in range(spec.turn_clients)]
    await asyncio.sleep(0.2)  # let the HTTP clients connect
    began = time.perf_counter()
    deadline = began + seconds
    start.set()
    await asyncio.gather(*tasks)
    tally.elapsed = time.perf_counter() - began
    return tally


# -- the ceiling comparison ------------------------------------------------------------------------


async def _same_answers(load: _Load, mine: str, ceiling: str, key: str, spec: ServeBenchSpec) -> dict[str, Any]:
    """The same requests to both servers (8 per endpoint, a 401 and a 404): status and JSON body must be equal."""
    rng = random.Random(spec.seed * 1000 + 700)
    requests = [load.request(rng, op) for op in ENDPOINTS for _ in range(8)]
    requests.append(("session", "/api/v1/sessions/bench-serve-no-such-session", {}))
    checked, mismatches = 0, []
    async with _client(mine, key) as a, _client(ceiling, key) as b, _client(mine, "mlk_not-a-key") as bad_a, _client(ceiling, "mlk_not-a-key") as bad_b:
        for pair, (_, path, params) in [((a, b), request) for request in requests] + [((bad_a, bad_b), requests[0])]:
            ours, theirs = await pair[0].get(path, params=params), await pair[1].get(path, params=params)
            checked += 1
            if ours.status_code != theirs.status_code or ours.json() != theirs.json():
                mismatches.append(f"{path} {params}: memlab {ours.status_code} {ours.text[:300]} | ceiling {theirs.status_code} {theirs.text[:300]}")
    return {"checked": checked, "mismatched": len(mismatches), "samples": mismatches[:3]}


async def _compare(load: _Load, servers: Mapping[str, _Server], key: str, spec: ServeBenchSpec, say: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[_Tally]]:
    """``spec.rounds`` rounds of every phase on both servers, back to back, the order alternating; one row per run."""
    runs, tallies = [], []
    for round_ in range(spec.rounds):
        say(f"ceiling comparison: round {round_ + 1}/{spec.rounds}")
        for i, phase in enumerate(PHASES):
            for name in ("memlab", "ceiling") if (round_ + i) % 2 == 0 else ("ceiling", "memlab"):
                server = servers[name]
                before = {pid: _cpu_seconds(pid) for pid in server.workers_only}
                tally = await _concurrent(load, server.url, key, spec, spec.ceiling_seconds, None if phase == "mix" else phase)
                spent = [_delta(_cpu_seconds(pid), was) for pid, was in before.items()]
                cpu = None if None in spent else sum(spent)  # type: ignore[arg-type]
                times = [t for op in ENDPOINTS for t in tally.times[op]]
                errors = sum(tally.errors[op] for op in ENDPOINTS)
                per_s = (len(times) + errors) / tally.elapsed
                runs.append(
                    {
                        "round": round_, "phase": phase, "server": name, "count": len(times) + errors, "errors": errors, "per_s": per_s,
                        "per_s_worker": per_s / spec.workers, "p50_ms": percentile(times, 50, scale=1000), "p99_ms": percentile(times, 99, scale=1000),
                        "cpu_s": cpu, "cpu_us_per_request": cpu / len(times) * 1e6 if cpu is not None and times else None, "seconds": tally.elapsed,
                    }
                )
                tallies.append(tally)
    return runs, tallies


async def _profile(load: _Load, stack: Any, config: Any, key: str, spec: ServeBenchSpec) -> list[dict[str, Any]]:
    """memlab's app (on this process's stack) and the ceiling app called in process: µs per request and per part."""
    from memlab.api import create_app
    from memlab.bench._serve_ceiling import app_for
    from memlab.bench._serve_profile import profile_apps

    rng = random.Random(spec.seed * 1000 + 800)
    requests = {op: [load.request(rng, op) for _ in range(spec.profile_requests)] for op in ENDPOINTS}
    ceiling = app_for(config)
    async with ceiling.router.lifespan_context(ceiling):
        return await profile_apps({"memlab": create_app(stack), "ceiling": ceiling}, requests, key, passes=spec.profile_passes)


def _median(values: Sequence[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    if not known:
        return None
    middle = len(known) // 2
    return known[middle] if len(known) % 2 else (known[middle - 1] + known[middle]) / 2


def _ceiling_rows(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per phase: both servers' medians over the rounds, and the median of the per-round ratios memlab / ceiling."""
    rows = []
    for phase in PHASES:
        of = {name: sorted((r for r in runs if r["phase"] == phase and r["server"] == name), key=lambda r: r["round"]) for name in ("memlab", "ceiling")}
        pairs = list(zip(of["memlab"], of["ceiling"]))
        ratios = [m["per_s"] / c["per_s"] for m, c in pairs if c["per_s"]]
        cpu = [c["cpu_us_per_request"] / m["cpu_us_per_request"] for m, c in pairs if m["cpu_us_per_request"] and c["cpu_us_per_request"]]
        row: dict[str, Any] = {"phase": phase, "label": "all HTTP requests (the mix)" if phase == "mix" else ENDPOINTS[phase], "rounds": len(pairs)}
        for name in ("memlab", "ceiling"):
            for measure in ("per_s_worker", "p50_ms", "p99_ms", "cpu_us_per_request"):
                row[f"{name}_{measure}"] = _median([r[measure] for r in of[name]])
        # judged on the CPU ratio: the clients share the machine's cores with the servers, so requests/s measure the
        # share of CPU each side got as much as the servers; CPU per request is what a worker can do (1e6 / µs per s)
        judged = _median(cpu) if cpu else _median(ratios)
        row.update(
            ratio=_median(ratios), ratio_min=min(ratios, default=None), ratio_max=max(ratios, default=None), cpu_ratio=_median(cpu),
            cpu_ratio_min=min(cpu, default=None), cpu_ratio_max=max(cpu, default=None), judged="cpu" if cpu else "requests",
            target=CEILING_TARGET, passed=judged is not None and judged >= CEILING_TARGET,
        )
        rows.append(row)
    return rows


# -- the run ---------------------------------------------------------------------------------------


def _rows(phase: str, tally: _Tally) -> list[dict[str, Any]]:
    rows = []
    http = [t for op in ENDPOINTS for t in tally.times[op]]
    for op in (*ENDPOINTS, _ALL, _TURN):
        times = http if op == _ALL else tally.times[op]
        errors = sum(tally.errors[name] for name in ENDPOINTS) if op == _ALL else tally.errors[op]
        rows.append(
            {
                "phase": phase,
                "operation": op,
                "label": _LABELS[op],
                "count": len(times) + errors,
                "errors": errors,
                "per_s": (len(times) + errors) / tally.elapsed if tally.elapsed else None,
                "p50_ms": percentile(times, 50, scale=1000),
                "p95_ms": percentile(times, 95, scale=1000),
                "p99_ms": percentile(times, 99, scale=1000),
                "seconds": tally.elapsed,
            }
        )
    return rows


def _load_avg() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


async def run_bench_serve(spec: ServeBenchSpec, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Seed, start ``memlab serve``, run the single-client and the concurrent phase, stop; the results document.

    ``rows``: one per (phase, operation) (``single`` / ``concurrent``; the four
    endpoints, ``all``, ``turn``) with ``count``, ``errors``, ``per_s`` and
    ``p50_ms``/``p95_ms``/``p99_ms``; the concurrent rows carry ``single_p95_ms``.
    ``server``: cold start, stop time, pids (all gone when this returns) and CPU
    seconds per worker during the concurrent phase. ``errors``: totals and verdict.
    """
    from memlab.bench.cache import environment
    from memlab.config import StackConfig
    from memlab.stack import MemoryStack

    say = progress or (lambda line: None)
    pg_url = os.environ.get("MEMLAB_TEST_POSTGRES_URL", "").strip() or None
    redis_url = os.environ.get("MEMLAB_TEST_REDIS_URL", "").strip() or None
    rng = random.Random(spec.seed)
    env_start = environment()
    with tempfile.TemporaryDirectory(prefix="memlab-bench-serve-") as root:
        async with _maybe_database(pg_url) as db_url:
            env = server_environment(Path(root), db_url=db_url, redis_url=redis_url)
            config = StackConfig.from_env(env)
            stores = {"metadata": "postgres" if db_url else "sqlite", "cache": config.cache.backend}
            say(f"seeding {spec.sessions} sessions (metadata {stores['metadata']}, cache {stores['cache']})")
            world = await _seed(config, spec, rng, say)
            stack = await MemoryStack.from_config(config).open()
            load = _Load(world, stack)
            server: _Server | None = None
            ceiling_server: _Server | None = None
            compare_tallies: list[_Tally] = []
            profile: list[dict[str, Any]] | None = None
            try:
                say(f"starting memlab serve --workers {spec.workers}")
                server = _Server(env, spec.workers)
                start = await server.wait_ready(spec.startup_timeout)
                say(f"server up after {start['first_healthz_s']:.2f} s; warm-up")
                warm = _Tally()
                await _warm_up(load, server.url, world.key, spec, warm)
                say(f"1 client for {spec.single_seconds:g} s")
                single = await _single(load, server.url, world.key, spec)
                say(f"{spec.clients} clients ({spec.turn_clients} writing turns) for {spec.seconds:g} s")
                cpu_before = {pid: _cpu_seconds(pid) for pid in server.workers_only}
                client_cpu = time.process_time()
                concurrent = await _concurrent(load, server.url, world.key, spec)
                client_cpu = time.process_time() - client_cpu
                cpu = {str(pid): _delta(_cpu_seconds(pid), before) for pid, before in cpu_before.items()}
                if spec.ceiling:
                    say(f"starting the ceiling app (python -m memlab.bench._serve_ceiling --workers {spec.workers})")
                    ceiling_server = _Server(env, spec.workers, module="memlab.bench._serve_ceiling")
                    ceiling_start = await ceiling_server.wait_ready(spec.startup_timeout)
                    await _warm_up(load, ceiling_server.url, world.key, spec, warm)
                    same = await _same_answers(load, server.url, ceiling_server.url, world.key, spec)
                    if same["mismatched"]:
                        raise BenchmarkError(f"the ceiling app answers differently from memlab ({same['mismatched']} of {same['checked']}): {same['samples'][0]}")
                    runs, compare_tallies = await _compare(load, {"memlab": server, "ceiling": ceiling_server}, world.key, spec, say)
                if spec.profile:
                    say(f"profile: both apps in process, {spec.profile_passes} passes of {spec.profile_requests} requests per endpoint")
                    profile = await _profile(load, stack, config, world.key, spec)
            finally:
                stop_s = await server.stop() if server is not None else None
                ceiling_stop = await ceiling_server.stop() if ceiling_server is not None else None
                try:
                    if redis_url:  # the run's sessions on a shared server
                        for session in [*world.sessions, *load.new_sessions]:
                            await stack.cache.delete_session(str(session.owner.id), session.session_id)
                finally:
                    await stack.close()
    single_rows, concurrent_rows = _rows("single", single), _rows("concurrent", concurrent)
    for row, alone in zip(concurrent_rows, single_rows):
        row["single_p95_ms"] = alone["p95_ms"]
    tallies = (warm, single, concurrent, *compare_tallies)
    total = sum(sum(t.errors.values()) for t in tallies)
    kinds: Counter[str] = Counter()
    for t in tallies:
        kinds.update(t.kinds)
    return {
        "spec": asdict(spec),
        "environment": {**env_start, "load_avg_end": _load_avg()},
        "stores": stores,
        "seeded": {"users": world.users, "datasets": world.datasets, "sessions": len(world.sessions), "visible": len(world.visible), "turns": world.turns},
        "new_sessions": len(load.new_sessions),
        "server": {**start, "stop_s": stop_s, "pids": server.pids, "worker_cpu_s": cpu, "workers": spec.workers},
        "client_cpu_s": client_cpu,
        "rows": [*concurrent_rows, *single_rows],
        "ceiling": (
            {
                "server": {**ceiling_start, "stop_s": ceiling_stop, "pids": ceiling_server.pids, "workers": spec.workers},
                "same_answers": same,
                "runs": runs,
                "rows": _ceiling_rows(runs),
                "target": CEILING_TARGET,
            }
            if ceiling_server is not None
            else None
        ),
        "profile": profile,
        "errors": {
            "total": total,
            "warm_up": sum(warm.errors.values()),
            "by_kind": dict(kinds),
            "samples": [sample for t in tallies for sample in t.samples][:5],
            "target": ERRORS_TARGET,
            "passed": total <= ERRORS_TARGET,
        },
    }


def _delta(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


@asynccontextmanager
async def _maybe_database(server_url: str | None) -> AsyncIterator[str | None]:
    if server_url is None:
        yield None
        return
    async with throwaway_database(server_url, "memlab_bench_serve") as url:
        yield url


# -- the table -------------------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return number(value, 1 if value is not None and value < 100 else 0)


def format_serve_table(result: Mapping[str, Any]) -> str:
    """The concurrent phase per operation, the single-client p95 beside it, cold start and the error verdict."""
    spec, server, env, errors = result["spec"], result["server"], result["environment"], result["errors"]
    clients, turn_clients = spec["clients"], spec["turn_clients"]
    load = env.get("load_avg")
    load_end = env.get("load_avg_end")

    def avg(values: Sequence[float] | None) -> str:
        return " / ".join(f"{v:.2f}" for v in values) if values else "unknown"

    title = (
        f"memlab bench serve: memlab serve --workers {spec['workers']} (metadata {result['stores']['metadata']}, cache "
        f"{result['stores']['cache']}), {clients} clients ({clients - turn_clients} HTTP + {turn_clients} writing turns) for "
        f"{spec['seconds']:g} s, after 1 client (same mix) for {spec['single_seconds']:g} s"
    )
    machine = f"Python {env['python']}, {env['cpus']} CPUs, load avg {avg(load)} at the start, {avg(load_end)} at the end (1 / 5 / 15 min)"
    all_up = server["all_workers_s"]
    cold = (
        f"server start (cold, python -m memlab serve): first /healthz 200 after {server['first_healthz_s']:.2f} s, "
        + (f"{spec['workers']} of {spec['workers']} workers up after {all_up:.2f} s" if all_up is not None else f"{server['workers_up']} of {spec['workers']} workers reported startup")
        + (f"; stop (SIGINT) {server['stop_s']:.2f} s" if server.get("stop_s") is not None else "")
    )
    rows = [row for row in result["rows"] if row["phase"] == "concurrent"]
    headers = ["operation", "count", "per s", "median ms", "p95 ms", "p99 ms", "1-client p95 ms", f"p95 {clients} / 1", "errors"]
    body = []
    for row in rows:
        ratio = row["p95_ms"] / row["single_p95_ms"] if row["p95_ms"] and row["single_p95_ms"] else None
        body.append(
            [
                row["label"], number(row["count"]), number(row["per_s"], 1), _ms(row["p50_ms"]), _ms(row["p95_ms"]), _ms(row["p99_ms"]),
                _ms(row["single_p95_ms"]), "—" if ratio is None else f"{ratio:.1f}×", number(row["errors"]),
            ]
        )
    table = render(headers, body, right=range(1, len(headers)))
    single = {row["operation"]: row for row in result["rows"] if row["phase"] == "single"}
    verdict = "PASS" if errors["passed"] else "MISS"
    kinds = "; ".join(f"{kind} ×{count}" for kind, count in errors["by_kind"].items())
    lines = [
        title, machine, cold, "", table, "",
        f"errors (any non-2xx answer or exception, warm-up included): {errors['total']}, target {errors['target']}: {verdict}" + (f" ({kinds})" if kinds else ""),
        f"1 client: {number(single[_ALL]['count'])} requests ({number(single[_ALL]['per_s'], 1)}/s) and {number(single[_TURN]['count'])} turns in {single[_ALL]['seconds']:.1f} s.",
    ]
    cpu = [value for value in server["worker_cpu_s"].values() if value is not None]
    wall = rows[0]["seconds"] if rows else 0.0
    if cpu:
        lines.append(
            f"CPU during the {clients}-client phase ({wall:.1f} s wall, {env['cpus']} CPUs): server worker(s) "
            + " + ".join(f"{value:.1f}" for value in cpu)
            + f" s, benchmark process (clients + turn writers) {result['client_cpu_s']:.1f} s."
        )
    if result.get("ceiling"):
        lines += ["", *_ceiling_lines(result)]
    if result.get("profile"):
        lines += ["", *_profile_lines(result)]
    seeded = result["seeded"]
    lines.append(
        f"seeded: {seeded['sessions']} sessions ({seeded['visible']} visible to the caller, {seeded['turns']} turns) of {seeded['users']} users "
        f"in {seeded['datasets']} datasets, last activity over 40 days; {result['new_sessions']} new sessions during the run."
    )
    lines.append(
        "mix: 40 % list (random status/order_by/descending/limit/offset), 30 % by id, 15 % stats, 15 % cost-by-model (random range); "
        "one httpx.AsyncClient (keep-alive) per HTTP client, all clients on one event loop in the benchmark process; "
        "latency = the awaited call, body read, successful calls only."
    )
    return "\n".join(lines)


def _ceiling_lines(result: Mapping[str, Any]) -> list[str]:
    """The comparison with the ceiling app: per phase, requests/s per worker, the ratio and its verdict, latency, server CPU."""
    spec, ceiling = result["spec"], result["ceiling"]
    clients, turn_clients = spec["clients"], spec["turn_clients"]
    headers = [
        "phase", "memlab req/s/worker", "ceiling req/s/worker", "ratio", "min..max", "memlab p50 / p99 ms", "ceiling p50 / p99 ms",
        "memlab CPU µs/req", "ceiling CPU µs/req", "CPU ratio", "min..max", "target", "result",
    ]

    def spread(low: float | None, high: float | None) -> str:
        return f"{low:.2f}..{high:.2f}" if low is not None and high is not None else "—"

    def times(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}x"

    body = [
        [
            row["label"], number(row["memlab_per_s_worker"], 1), number(row["ceiling_per_s_worker"], 1), times(row["ratio"]),
            spread(row["ratio_min"], row["ratio_max"]), f"{_ms(row['memlab_p50_ms'])} / {_ms(row['memlab_p99_ms'])}",
            f"{_ms(row['ceiling_p50_ms'])} / {_ms(row['ceiling_p99_ms'])}", number(row["memlab_cpu_us_per_request"]),
            number(row["ceiling_cpu_us_per_request"]), times(row["cpu_ratio"]), spread(row.get("cpu_ratio_min"), row.get("cpu_ratio_max")),
            f">= {row['target']:g}x ({'CPU' if row.get('judged', 'cpu') == 'cpu' else 'req/s'})", "PASS" if row["passed"] else "MISS",
        ]
        for row in ceiling["rows"]
    ]
    same = ceiling["same_answers"]
    return [
        f"memlab vs its ceiling: a bare FastAPI app running the same SQL through the same driver (memlab/bench/_serve_ceiling.py), "
        f"served like memlab serve (uvicorn, --workers {spec['workers']}); same {clients} clients ({clients - turn_clients} HTTP + {turn_clients} writing turns), "
        f"{spec['rounds']} rounds of {spec['ceiling_seconds']:g} s per phase and server, back to back, order alternating; medians over the rounds",
        render(headers, body, right=range(1, len(headers))),
        f"same answers: {same['checked']} requests (8 per endpoint, a 404, a 401) to both servers before timing, equal status and JSON body: "
        + ("yes" if not same["mismatched"] else f"{same['mismatched']} differ"),
        "ratio: memlab / ceiling requests/s per worker in the same round (median of the rounds). CPU µs/req: the server workers' CPU "
        "(user + system) per answered request; CPU ratio: ceiling / memlab CPU per request in the same round, i.e. memlab's requests per "
        "worker-CPU-second over the ceiling's: the requests/s per worker each could serve with the CPU to itself. The target is judged on it: "
        "the clients (one process, httpx) and the turn writers share the cores with both servers, so the requests/s measure how the CPU was "
        "shared as much as the servers.",
    ]


def _profile_lines(result: Mapping[str, Any]) -> list[str]:
    """``--profile``: per endpoint, µs per request of each app in process, and of what memlab's and the ceiling's are made."""
    spec = result["spec"]
    headers = [
        "endpoint", "memlab µs", "ceiling µs", "ceiling / memlab", "memlab: key lookup", "read (SQL + models)", "of it rows -> models", "JSON",
        "FastAPI (rest)", "ceiling: key lookup", "read (SQL)", "FastAPI + dicts + JSON (rest)",
    ]
    body = [
        [
            ENDPOINTS[row["operation"]], number(row["memlab_us"]), number(row["ceiling_us"]), f"{row['ratio']:.2f}x",
            *(number(row[f"memlab_{part}_us"]) for part in ("key_lookup", "read", "rows_to_models", "json", "framework")),
            *(number(row[f"ceiling_{part}_us"]) for part in ("key_lookup", "read", "framework")),
        ]
        for row in result["profile"]
    ]
    return [
        f"where a request's time goes (--profile): both apps called in this process as ASGI apps (no HTTP server, no socket, no client), "
        f"{spec['profile_requests']} requests per endpoint and app per pass, median of {spec['profile_passes']} passes, the order alternating; µs per request",
        render(headers, body, right=range(1, len(headers))),
        "parts: wall time of the functions doing them (memlab: Users.user_for_api_key; UsageAPI's read, of which the SessionUsage / ModelUsage "
        "models built from the rows; model_dump_json / TypeAdapter.dump_json; the ceiling: its api_key_user statement, its endpoint's statements); "
        "the rest is the app's FastAPI part (routing, query parameters, dependencies, the response). SQL parts include the database server's own time on PostgreSQL.",
    ]
