"""``memlab bench turn``: where the time of one ``search()`` session turn goes, per phase.

A seeded conversation (:func:`memlab.bench.corpus.synthetic_conversation` over a
remembered :func:`~memlab.bench.corpus.synthetic_qa` corpus) runs turn by turn through
``stack.search(message, session_id=...)`` on a stack with the offline LLM at
``latency_ms`` (0 by default) and the hashing embedder, on the default SQLite stores;
with ``MEMLAB_TEST_POSTGRES_URL`` set, again with the metadata (``MEMLAB_DB_URL``: users,
datasets, session records, usage, permanent-memory snapshots) in a throw-away
PostgreSQL database (the session cache stays SQLite).

Every turn's wall-clock is split into phases that add up to it exactly: while the
benchmark runs, the stack's collaborators are wrapped (on the instances and for the
run only: nothing is timed outside this benchmark) so that each call sets the phase
of its task (a context variable; the innermost phase wins, so the LLM call inside the
analysis is ``llm``), and every event-loop callback charges the time it ran to the
phase of the task it ran for. Time the loop spends waiting (on a socket, a thread)
is charged to the phase of the task that wakes up next. So concurrent steps (the
analysis beside retrieval) are not counted twice, and the phases of a turn sum to its
total. ``llm`` is the ``litellm.acompletion`` call (litellm and the offline provider),
``embedder`` the :meth:`~memlab.embeddings.Embedder.embed` calls; memlab's own overhead
is everything else: the total minus those two.

Each message is sent twice on the same stack, to an instrumented session and to a
plain one (the same history in both: the offline LLM is deterministic), which first
flipping every ``block`` messages; the plain turns' total is reported too
(``total (uninstrumented)``): the difference is what the wrapping costs. Cold start (``import memlab``, building and opening a stack,
the first turn with its imports) is measured apart in a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.bench import _table

__all__ = ["PHASES", "PhaseClock", "TurnBenchSpec", "format_turn_table", "run_bench_turn"]

#: the phases of a turn, in table order: (name, what it covers)
PHASES: tuple[tuple[str, str], ...] = (
    ("entry", "search() and its flow outside the phases below: argument checks, scope, the response"),
    ("user", "resolving the acting user"),
    ("datasets", "the datasets the user may read"),
    ("session id", "resolving the turn's session id"),
    ("orchestration", "TurnRunner.run and the analysis mode outside the phases below"),
    ("turn lock", "taking and releasing the session's turn lock"),
    ("activity touch", "SessionManager.record_activity (session_records row)"),
    ("history load", "the last turns read from the cache (and the guidance they used)"),
    ("guidance", "the guidance served to the answer"),
    ("analysis", "the turn analysis, without its LLM call"),
    ("retrieval", "the retrieval lanes, without the embedder"),
    ("merge", "merging the raw and rewrite lanes"),
    ("answer", "building the answer prompt and reading its result, without the LLM call"),
    ("apply", "writing the analysis' guidance to the cache"),
    ("store turn", "the turn and its record written to the cache"),
    ("usage write", "the turn's LLM and embedding calls recorded (session_records, session_model_usage)"),
    ("llm", "litellm.acompletion: litellm and the offline provider"),
    ("embedder", "Embedder.embed"),
    ("unattributed", "event-loop callbacks of no phase (a driver's socket reads, thread wake-ups, other tasks)"),
)
_PHASE_NAMES = tuple(name for name, _ in PHASES)
#: the phases that are not memlab's own work
EXTERNAL = ("llm", "embedder")
SESSION_ID = "bench-turn"


@dataclass(frozen=True)
class TurnBenchSpec:
    """What ``memlab bench turn`` runs."""

    turns: int = 200
    documents: int = 60
    latency_ms: float = 0.0
    embedder: str = "memlab/hashing"
    #: each message goes to an instrumented and a plain session; which goes first flips every ``block`` messages
    block: int = 10
    #: untimed turns first (in a session of their own)
    warm_up: int = 5
    seed: int = 0
    #: also measure cold start in a fresh interpreter
    cold: bool = True
    #: metadata stores: "sqlite" always; "postgres" when a server URL is given
    postgres_url: str | None = None


_PHASE: contextvars.ContextVar[str | None] = contextvars.ContextVar("memlab_bench_turn_phase", default=None)


class PhaseClock:
    """Charges event-loop time to the phase of the running task (see the module docstring).

    Installed for a ``with clock.installed():`` block: it replaces
    ``asyncio.Handle._run`` (every callback the loop runs) with a timed one, and
    :meth:`wrap` / :meth:`wrap_cm` put phases on callables.
    """

    def __init__(self) -> None:
        self.charged: dict[str | None, int] = {}
        self._mark = time.perf_counter_ns()
        self._current: str | None = None
        self._idle = 0  # loop time between callbacks, charged to the next callback that has a phase
        self.active = False

    def _charge(self, now: int) -> None:
        spent = now - self._mark
        self.charged[self._current] = self.charged.get(self._current, 0) + spent
        self._mark = now

    def enter(self, phase: str) -> contextvars.Token:
        if not self.active:
            return _PHASE.set(_PHASE.get())
        self._charge(time.perf_counter_ns())
        token = _PHASE.set(phase)
        self._current = phase
        return token

    def leave(self, token: contextvars.Token) -> None:
        if self.active:
            self._charge(time.perf_counter_ns())
        _PHASE.reset(token)
        self._current = _PHASE.get()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        token = self.enter(name)
        try:
            yield
        finally:
            self.leave(token)

    def start(self) -> int:
        """Start charging (a turn begins; what was charged before is dropped); the ``perf_counter_ns`` it starts at."""
        self.charged = {}
        self._idle = 0
        self._mark = began = time.perf_counter_ns()
        self._current = _PHASE.get()
        self.active = True
        return began

    def stop(self, now: int | None = None) -> dict[str | None, int]:
        """Stop charging at ``now`` (a ``perf_counter_ns``, default: now); the nanoseconds charged per phase since
        :meth:`start`, which add up to the time between the two."""
        self._charge(time.perf_counter_ns() if now is None else now)
        if self._idle:
            self.charged[None] = self.charged.get(None, 0) + self._idle
        self.active = False
        charged, self.charged = self.charged, {}
        return charged

    @contextlib.contextmanager
    def installed(self) -> Iterator["PhaseClock"]:
        handle = asyncio.events.Handle
        original = handle._run
        clock = self

        def _run(self: Any) -> None:
            if not clock.active:
                return original(self)
            now = time.perf_counter_ns()
            clock._idle += now - clock._mark
            clock._mark = now
            phase = self._context.get(_PHASE)
            clock._current = phase
            if phase is not None and clock._idle:
                clock.charged[phase] = clock.charged.get(phase, 0) + clock._idle
                clock._idle = 0
            try:
                return original(self)
            finally:
                if clock.active:  # (a step that stopped the clock charged itself up to stop())
                    clock._charge(time.perf_counter_ns())
                clock._current = None

        handle._run = _run  # type: ignore[method-assign]
        try:
            yield self
        finally:
            handle._run = original  # type: ignore[method-assign]

    def wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        """``fn`` (a coroutine function or a plain one) running in ``phase``."""
        if asyncio.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def timed(*args: Any, **kwargs: Any) -> Any:
                token = self.enter(phase)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    self.leave(token)

            return timed

        @functools.wraps(fn)
        def timed_sync(*args: Any, **kwargs: Any) -> Any:
            token = self.enter(phase)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave(token)

        return timed_sync

    def wrap_cm(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        """``fn`` returning an async context manager whose enter and exit run in ``phase`` (its body does not)."""
        clock = self

        class _Timed:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            async def __aenter__(self) -> Any:
                token = clock.enter(phase)
                try:
                    return await self.inner.__aenter__()
                finally:
                    clock.leave(token)

            async def __aexit__(self, *exc: Any) -> Any:
                token = clock.enter(phase)
                try:
                    return await self.inner.__aexit__(*exc)
                finally:
                    clock.leave(token)

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            return _Timed(fn(*args, **kwargs))

        return timed


@contextlib.contextmanager
def _patched(targets: Sequence[tuple[Any, str, Callable[[Any], Any]]]) -> Iterator[None]:
    """Set ``owner.name = make(owner.name)`` for each target (an attribute of the instance or class), restored after."""
    saved = []
    try:
        for owner, name, make in targets:
            had = name in vars(owner)
            saved.append((owner, name, had, vars(owner).get(name)))
            setattr(owner, name, make(getattr(owner, name)))
        yield
    finally:
        for owner, name, had, value in reversed(saved):
            if had:
                setattr(owner, name, value)
            else:
                delattr(owner, name)


def _targets(stack: Any, clock: PhaseClock) -> list[tuple[Any, str, Callable[[Any], Any]]]:
    """Where each phase starts: the stack's collaborators (instances) and the per-turn SessionTurn class."""
    import litellm  # imported already: the warm-up turns called the LLM

    from memlab.flows.turn import SessionTurn
    from memlab.retrievers import SearchType

    flows = stack._flows
    retriever = stack.retrievers.get(SearchType.GRAPH_COMPLETION)
    manager = stack.session_manager
    recorder = flows.turns.usage

    def phase(name: str) -> Callable[[Any], Any]:
        return lambda fn: clock.wrap(fn, name)

    def cm(name: str) -> Callable[[Any], Any]:
        return lambda fn: clock.wrap_cm(fn, name)

    targets: list[tuple[Any, str, Callable[[Any], Any]]] = [
        (stack.users, "resolve", phase("user")),
        (flows, "_targets", phase("datasets")),
        (flows, "_turn_session", phase("session id")),
        (flows.turns, "run", phase("orchestration")),
        (manager, "turn_lock", cm("turn lock")),
        (manager, "record_activity", phase("activity touch")),
        (SessionTurn, "load", phase("history load")),
        (SessionTurn, "_history", phase("history load")),
        (SessionTurn, "guidance", phase("guidance")),
        (SessionTurn, "analyze", phase("analysis")),
        (retriever, "retrieve_lane", phase("retrieval")),
        (retriever, "get_context", phase("retrieval")),
        (retriever, "merge_lanes", phase("merge")),
        (retriever, "answer_from", phase("answer")),
        (retriever, "get_completion", phase("answer")),
        (SessionTurn, "apply", phase("apply")),
        (SessionTurn, "commit", phase("store turn")),
        (SessionTurn, "acknowledge", phase("store turn")),
        (stack.embedder, "embed", phase("embedder")),
        (litellm, "acompletion", phase("llm")),
    ]
    if recorder is not None:
        targets.append((recorder, "record", phase("usage write")))
    return targets


def _percentile(values: Sequence[float], q: float) -> float:
    value = _table.percentile(list(values), q)
    return float(value) if value is not None else 0.0


def _summary(name: str, values: Sequence[float], *, kind: str, about: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "about": about,
        "median_us": _percentile(values, 50),
        "p90_us": _percentile(values, 90),
        "mean_us": sum(values) / len(values) if values else 0.0,
    }


async def _converse(stack: Any, turns: Sequence[str], spec: TurnBenchSpec, clock: PhaseClock, say: Callable[[str], None]) -> dict[str, Any]:
    """Send each message twice: instrumented to one session, plain to another (the same history: the offline LLM is
    deterministic); which goes first flips every ``block`` messages. The per-turn figures."""
    for message in turns[: spec.warm_up]:
        await stack.search(message, session_id=f"{SESSION_ID}-warm-up")
    await _settle(set())
    resident = asyncio.all_tasks()  # long-lived tasks (litellm's logging worker): not waited for
    timed = turns[spec.warm_up :]
    phased: list[dict[str | None, int]] = []
    totals: list[int] = []
    plain: list[int] = []
    perf = time.perf_counter_ns
    targets = _targets(stack, clock)

    async def instrumented(message: str) -> None:
        with clock.installed(), _patched(targets):
            await asyncio.sleep(0)  # from here on this task's steps run through the timed Handle._run
            token = _PHASE.set("entry")
            try:
                began = clock.start()
                await stack.search(message, session_id=SESSION_ID)
                ended = perf()
                charged = clock.stop(ended)
                totals.append(ended - began)
            finally:
                _PHASE.reset(token)
            await _settle(resident)  # what the turn left running (litellm's logging) ends before the next turn
        phased.append(charged)

    async def bare(message: str) -> None:
        began = perf()
        await stack.search(message, session_id=f"{SESSION_ID}-plain")
        plain.append(perf() - began)
        await _settle(resident)

    gc.collect()
    for start in range(0, len(timed), spec.block):
        order = (instrumented, bare) if (start // spec.block) % 2 == 0 else (bare, instrumented)
        for message in timed[start : start + spec.block]:
            for run in order:
                await run(message)
        say(f"{min(start + spec.block, len(timed))}/{len(timed)} turns")
    return {"phased": phased, "totals": totals, "plain": plain}


async def _settle(resident: set[asyncio.Task], timeout: float = 5.0) -> None:
    """Wait (at most ``timeout`` s) for the tasks running now, except this one and ``resident``, to finish."""
    others = asyncio.all_tasks() - resident - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=timeout)


def _rows(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """The table rows of one store setup: totals, external calls, memlab's own overhead, then each phase."""
    phased: list[dict[str | None, int]] = measured["phased"]
    us = 1 / 1000
    per_phase = {name: [turn.get(name if name != "unattributed" else None, 0) * us for turn in phased] for name in _PHASE_NAMES}
    unknown = {name for turn in phased for name in turn} - set(_PHASE_NAMES) - {None}
    if unknown:
        raise RuntimeError(f"time charged to phases the table does not know: {sorted(unknown, key=str)}")
    totals = [value * us for value in measured["totals"]]
    external = [sum(per_phase[name][i] for name in EXTERNAL) for i in range(len(totals))]
    own = [total - outside for total, outside in zip(totals, external)]
    rows = [
        _summary("total", totals, kind="total", about="wall-clock of an instrumented search() turn (the sum of the phases)"),
        _summary("total (uninstrumented)", [value * us for value in measured["plain"]], kind="plain",
                 about="wall-clock of the plain turns taking turns with them"),
        _summary("llm + embedder", external, kind="external", about="the calls that are not memlab's own work"),
        _summary("memlab own overhead", own, kind="own", about="total - llm - embedder"),
    ]
    rows.extend(_summary(name, per_phase[name], kind="phase", about=about) for name, about in PHASES)
    return rows


async def _run_setup(name: str, root: Path, documents: Sequence[str], turns: Sequence[str], spec: TurnBenchSpec, db_url: str | None,
                     say: Callable[[str], None]) -> dict[str, Any]:
    from memlab.config import LLMConfig

    stack = _table.stack(root, spec.embedder, llm=LLMConfig(offline_latency_ms=spec.latency_ms), **({"db_url": db_url} if db_url else {}))
    began = time.perf_counter()
    await stack.open()
    opened = time.perf_counter() - began
    try:
        say(f"{name}: remember {len(documents)} documents, then {len(turns)} turns")
        await stack.remember(list(documents), progress=False)
        clock = PhaseClock()
        measured = await _converse(stack, turns, spec, clock, lambda line: say(f"{name}: {line}"))
    finally:
        await stack.close()
    return {"metadata": name, "turns": len(measured["totals"]), "plain_turns": len(measured["plain"]), "open_ms": opened * 1000,
            "rows": _rows(measured), "per_turn": measured}


_COLD = r"""
import asyncio, json, sys, tempfile, time
began = time.perf_counter()
import memlab
imported = time.perf_counter()
from memlab.bench import _table
from memlab.config import LLMConfig

async def main():
    with tempfile.TemporaryDirectory(prefix="memlab-bench-turn-cold-") as root:
        t0 = time.perf_counter()
        stack = _table.stack(root, sys.argv[1], llm=LLMConfig(offline_latency_ms=float(sys.argv[2])))
        await stack.open()
        t1 = time.perf_counter()
        await stack.remember(["Ada Lovelace wrote the first program for the Analytical Engine."], progress=False)
        t2 = time.perf_counter()
        await stack.search("Who wrote the first program?", session_id="cold")
        t3 = time.perf_counter()
        await stack.search("And for which engine?", session_id="cold")
        t4 = time.perf_counter()
        await stack.close()
    print(json.dumps({"import memlab": imported - began, "build + open stack": t1 - t0, "first remember (1 document)": t2 - t1,
                      "first search() turn": t3 - t2, "second search() turn": t4 - t3}))

asyncio.run(main())
"""


def cold_start(spec: TurnBenchSpec) -> dict[str, float]:
    """Seconds of each cold step in a fresh interpreter (same environment)."""
    done = subprocess.run([sys.executable, "-c", _COLD, spec.embedder, str(spec.latency_ms)], capture_output=True, text=True, check=False,
                          env=dict(os.environ), timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the cold-start interpreter failed: {done.stderr.strip()[-2000:]}")
    return {str(key): float(value) for key, value in json.loads(done.stdout.strip().splitlines()[-1]).items()}


async def run_bench_turn(spec: TurnBenchSpec, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``{"setups": [one per metadata store: rows and per-turn figures], "cold": {...} or None}``."""
    from memlab.bench.corpus import synthetic_conversation, synthetic_qa

    say = progress or (lambda line: None)
    corpus = synthetic_qa(spec.documents, seed=spec.seed)
    questions = [item.question for item in corpus.questions]
    turns = [turn.text for turn in synthetic_conversation(spec.warm_up + spec.turns, questions, seed=spec.seed)]
    setups = []
    with tempfile.TemporaryDirectory(prefix="memlab-bench-turn-") as root:
        setups.append(await _run_setup("sqlite", Path(root) / "sqlite", corpus.documents, turns, spec, None, say))
        if spec.postgres_url:
            async with _postgres(spec.postgres_url) as url:
                setups.append(await _run_setup("postgres", Path(root) / "postgres", corpus.documents, turns, spec, url, say))
    cold = None
    if spec.cold:
        say("cold start in a fresh interpreter")
        cold = cold_start(spec)
    return {"setups": setups, "cold": cold}


@contextlib.asynccontextmanager
async def _postgres(server_url: str) -> AsyncIterator[str]:
    from memlab.testing.databases import throwaway_database

    async with throwaway_database(server_url, prefix="memlab_bench_turn") as url:
        yield url


def format_turn_table(result: dict[str, Any], spec: TurnBenchSpec) -> str:
    """The per-phase table of each metadata store, side by side, then cold start."""
    setups = result["setups"]
    n = _table.number
    headers = ["phase"]
    for setup in setups:
        headers += [f"{setup['metadata']} median µs", "p90 µs", "mean µs"]
    headers.append("what")
    body = []
    for index, (first, *_) in enumerate(zip(*(setup["rows"] for setup in setups))):
        line = [first["name"]]
        for setup in setups:
            row = setup["rows"][index]
            line += [n(row["median_us"], 0), n(row["p90_us"], 0), n(row["mean_us"], 0)]
        line.append(first["about"])
        body.append(line)
        if first["kind"] == "own":
            body.append(["—"] * (len(line) - 1) + [""])
    table = _table.render(headers, body, right=range(1, len(headers) - 1))
    counts = ", ".join(f"{setup['metadata']}: {setup['turns']} instrumented + {setup['plain_turns']} plain turns" for setup in setups)
    counts += f" (each message sent to an instrumented and to a plain session; which first flips every {spec.block} messages)"
    notes = [
        f"memlab bench turn: stack.search(message, session_id=...) of a seeded conversation over {spec.documents} remembered synthetic_qa "
        f"documents, offline LLM at {spec.latency_ms:g} ms, embedder {spec.embedder}, SQLite session cache; metadata "
        + " / ".join(setup["metadata"] for setup in setups) + f". {counts}.",
        "Phases partition each instrumented turn's wall-clock (the innermost phase of the running task owns each moment; "
        "loop waits go to the task that wakes), so the means add up to the total's mean; medians need not.",
    ]
    if "postgres" not in [setup["metadata"] for setup in setups]:
        notes.append("postgres metadata: skipped (MEMLAB_TEST_POSTGRES_URL unset).")
    cold = result.get("cold")
    if cold:
        notes.append("cold start (fresh interpreter): " + ", ".join(f"{name} {seconds * 1000:,.0f} ms" for name, seconds in cold.items()))
    return table + "\n\n" + "\n".join(notes)
