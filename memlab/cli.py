"""The ``memlab`` command (also ``python -m memlab``).

::

    memlab demo [options]            the mode comparison: concurrent vs sequential vs off (table + HTML report)
    memlab demo session              session-memory walk-through on the stack from the environment
    memlab bench cache [options]     cache backend throughput (see memlab.bench.cache)
    memlab bench ingest [options]    permanent-memory ingest and vector search (see memlab.bench.ingest)
    memlab bench recall [options]    retrieval quality and latency per search type (see memlab.bench.recall)
    memlab bench modes [options]     session-turn latency and LLM cost per analysis mode (see memlab.bench.modes)
    memlab bench cleanup [options]   provenance cleanup time after a one-document delete (see memlab.bench.cleanup)
    memlab bench usage [options]     what usage tracking adds to a session turn (see memlab.bench.usage)
    memlab bench turn [options]      where a search() turn's time goes, per phase (see memlab.bench.turn)
    memlab bench serve [options]     the HTTP read API under concurrent clients (see memlab.bench.serve)
    memlab serve [--host H] [--port P] [--workers N]   the HTTP API (memlab.api) on the stack from the environment
    memlab mcp [--http [--host H] [--port P]]          an MCP server (memlab.integrations.mcp): stdio, or streamable HTTP
    memlab ui [--data-root PATH] [--host H] [--port P] [--no-browser]   the explorers as a web page (memlab.ui, Voilà)
    memlab users create-key NAME     a new API key of user NAME (created when no user has that name), printed once
    memlab users revoke-key KEY      revoke an API key

Every command reads its settings from the environment and from ``./.env`` (or the
file ``memlab --env-file PATH ...`` names; see :mod:`memlab._cli_env`); a variable set
in the environment wins over the file. A memlab error, a missing extra or a store that
cannot be reached ends the command with one line, ``memlab: error: ...``, on stderr
and exit status 1 (2 for a usage or configuration error); any other exception is a
bug in memlab and keeps its traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab._cli_env import DEFAULT_ENV_FILE, env_file_applied
from memlab._cli_errors import UsageError

if TYPE_CHECKING:
    from memlab.config import StackConfig


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)


def _non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("give at least one name (comma-separated)")
    return names


class _Parser(argparse.ArgumentParser):
    """``memlab --help`` ends with the installed strategy plugins (:mod:`memlab.plugins`), read only when help is shown."""

    def format_help(self) -> str:
        text = super().format_help()
        if self.prog != "memlab":  # a command's own help
            return text
        from memlab.plugins import help_text

        listing = help_text()
        return f"{text}\n{listing}\n" if listing else text


def build_parser() -> argparse.ArgumentParser:
    from memlab import __version__

    parser = _Parser(
        prog="memlab",
        description="memlab: a research toolkit for agent memory. Every command builds its stack from environment "
        f"variables (MEMLAB_DATA_ROOT, CACHE_BACKEND, MEMLAB_DB_URL, ...) and from the dotenv file {DEFAULT_ENV_FILE} in "
        "the working directory, when there is one, or the file --env-file names; a variable set in the environment "
        "wins over the file.",
        epilog="Exit status: 0 done; 1 the run failed (a store unreachable, an error of memlab, said in one line "
        "'memlab: error: ...' on stderr); 2 a bad option, value or setting.",
    )
    parser.add_argument("--version", action="version", version=f"memlab {__version__}")
    parser.add_argument(
        "--env-file",
        type=Path,
        metavar="PATH",
        help=f"read settings from this dotenv file instead of {DEFAULT_ENV_FILE} (given before the command; it must exist)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="the mode comparison (default) or the session walk-through",
        description="modes (the default): one seeded conversation through the concurrent, sequential and off analysis "
        "modes on the stack built from the environment (a fresh stack per mode, every offline LLM call taking "
        "--latency-ms); prints the comparison table and writes an HTML report with charts under the data root. "
        "session: remember, recall, read back and annotate a session on that stack.",
    )
    demo.add_argument("which", nargs="?", choices=("modes", "session"), default="modes", help="which demo (default: modes)")
    demo.add_argument("--turns", type=_positive_int, default=24, help="user messages in the conversation (default: 24)")
    demo.add_argument("--documents", type=_positive_int, default=20, help="documents remembered first (default: 20)")
    demo.add_argument("--latency-ms", type=_non_negative_float, default=250.0, help="simulated ms per LLM call (default: 250)")
    demo.add_argument("--seed", type=_int_at_least(0), default=0, help="conversation seed (default: 0)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")

    output = _Parser(add_help=False)
    output.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the rows (and the run's details) as JSON; '-' writes it to stdout (the table goes to stderr)"
    )
    output.add_argument("--quiet", action="store_true", help="no progress lines on stderr")

    bench = commands.add_parser("bench", help="benchmarks", description="Benchmarks; results print as a table.")
    bench.set_defaults(print_help=bench.print_help)
    benches = bench.add_subparsers(dest="bench", metavar="BENCH")
    cache = benches.add_parser(
        "cache",
        parents=[output],
        help="cache backend throughput",
        description="Appends, last-10 reads, keyword recall, multi-session appends and storage per cache backend, "
        "each beside the raw ceiling of its store (raw-sqlite, raw-redis, raw-diskcache; postgres beside raw-postgres-equal-work, "
        "the statements its contract needs, and raw-postgres, the bare statements). "
        "redis/postgres run when MEMLAB_TEST_REDIS_URL / MEMLAB_TEST_POSTGRES_URL are set. Medians of the repeats.",
    )
    cache.add_argument(
        "--backends",
        type=_names,
        default=None,
        help="comma-separated (default: every registered backend; tapes only when TAPES_INGEST_URL is set)",
    )
    cache.add_argument("--repeats", type=_positive_int, default=3, help="repeats per backend; medians are reported (default: 3)")
    cache.add_argument("--n", type=_positive_int, default=1000, help="appends to one session, reads, and recall queries (default: 1000)")
    cache.add_argument("--sessions", type=_positive_int, default=100, help="sessions in the multi-session run (default: 100)")
    cache.add_argument("--per-session", type=_positive_int, default=20, help="appends per session in that run (default: 20)")
    cache.add_argument("--no-raw", action="store_true", help="skip the raw ceilings")
    cache.add_argument(
        "--no-breakdown", action="store_true", help="skip the per-call breakdown of where the time goes (store, decode, memlab's own)"
    )

    ingest = benches.add_parser(
        "ingest",
        parents=[output],
        help="permanent-memory ingest and vector search",
        description="remember() of a generated corpus per embedder (documents/s, chunks/s, phase split), memlab/minilm "
        "beside a bare onnxruntime session on the same texts (raw ceiling), then "
        "top-k vector search latency of memlab's index beside a plain faiss exact search over the same vectors.",
    )
    ingest.add_argument("--documents", type=_positive_int, default=1000, help="generated documents (default: 1000)")
    ingest.add_argument("--words", type=_positive_int, default=300, help="words per document (default: 300)")
    ingest.add_argument(
        "--embedders", type=_names, default=None, help="comma-separated EMBEDDING_MODEL names (default: memlab/hashing,memlab/minilm)"
    )
    ingest.add_argument("--vectors", type=_positive_int, default=100_000, help="vectors in the search index (default: 100000)")
    ingest.add_argument("--dims", type=_names, default=None, help="comma-separated vector dims (default: 256,384)")
    ingest.add_argument("--queries", type=_positive_int, default=200, help="search queries per index (default: 200)")
    ingest.add_argument(
        "--embed-texts", type=_int_at_least(0), default=128,
        help="chunks embedded by memlab/minilm beside its raw onnxruntime ceiling; 0 skips (default: 128)",
    )
    ingest.add_argument("--batch-sizes", type=_names, default=None, help="comma-separated batch sizes of the raw ceiling (default: 8,16,32,64)")
    ingest.add_argument("--embed-repeats", type=_positive_int, default=3, help="timed passes per runner in that comparison (default: 3)")

    recall = benches.add_parser(
        "recall",
        parents=[output],
        help="retrieval quality and latency per search type",
        description="hit@1/hit@5/MRR (and answer accuracy) per search type on a seeded question set with gold evidence, "
        "then recall() p50/p95 per retrieval type over a large memory.",
    )
    recall.add_argument("--documents", type=_positive_int, default=200, help="documents (= questions) of the quality set (default: 200)")
    recall.add_argument("--types", type=_names, default=None, help="comma-separated search types for quality (default: the main ones)")
    recall.add_argument("--embedder", default="memlab/minilm", help="EMBEDDING_MODEL (default: memlab/minilm)")
    recall.add_argument("--latency-documents", type=_int_at_least(0), default=10_000, help="chunks of the latency memory; 0 skips (default: 10000)")
    recall.add_argument("--queries", type=_positive_int, default=100, help="queries per type in the latency run (default: 100)")

    modes = benches.add_parser(
        "modes",
        parents=[output],
        help="session-turn latency and LLM cost per analysis mode",
        description="A seeded conversation over a remembered synthetic corpus, turn by turn through search() in each "
        "turn-analysis mode (concurrent, sequential, off) with the offline LLM at a simulated latency: median/p95 "
        "wall-clock per answered turn, LLM calls, tokens per turn, gated turns; concurrent/sequential and off over "
        "a bare retrieval + answer baseline.",
    )
    modes.add_argument("--turns", type=_positive_int, default=200, help="conversation turns per mode (default: 200)")
    modes.add_argument("--latency-ms", type=float, default=200.0, help="simulated latency per offline LLM call, ms (default: 200)")
    modes.add_argument("--modes", type=_names, default=None, help="comma-separated analysis modes (default: concurrent,sequential,off)")
    modes.add_argument("--entry", choices=("search", "recall"), default="search",
                       help="send each turn through search() or recall(scope='graph'): the same session turn (default: search)")
    cleanup = benches.add_parser(
        "cleanup",
        parents=[output],
        help="provenance cleanup time after a one-document delete",
        description="A session of --turns turns, --contaminated of them citing a node the delete removes: the dry run "
        "and the cleanup (candidate lookup, closure, deletes, watermark) per backend, beside the same backend's reads "
        "and deletes alone (the ceiling). Server backends run when their URL is set.",
    )
    cleanup.add_argument("--turns", type=_positive_int, default=1_000, help="turns in the session (default: 1000)")
    cleanup.add_argument("--contaminated", type=_positive_int, default=100, help="turns citing the deleted node (default: 100)")
    cleanup.add_argument("--repeats", type=_positive_int, default=5, help="fresh sessions per timing (default: 5)")
    cleanup.add_argument("--backends", type=_names, default=None, help="comma-separated backends (default: memory,sqlite,fs,redis,postgres)")
    usage = benches.add_parser(
        "usage",
        parents=[output],
        help="what usage tracking adds to a session turn",
        description="The same seeded conversation through search() on two stacks (sqlite cache, offline LLM), one recording "
        "usage and one not, taking turns: median wall-clock per turn, the difference, and the recording write timed alone.",
    )
    usage.add_argument("--turns", type=_positive_int, default=200, help="turns on each stack (default: 200)")
    usage.add_argument("--latency-ms", type=float, default=0.0, help="simulated latency per offline LLM call, ms (default: 0)")
    usage.add_argument("--embedder", default="memlab/hashing", help="embedding model (default: memlab/hashing)")

    turn = benches.add_parser(
        "turn",
        parents=[output],
        help="where a search() turn's time goes, per phase",
        description="A seeded conversation through search(..., session_id=...) with the offline LLM (0 ms by default) and the "
        "hashing embedder on the default SQLite stores, and with PostgreSQL metadata when MEMLAB_TEST_POSTGRES_URL is set: "
        "median / p90 / mean µs per turn of the total, the LLM and embedder calls, memlab's own overhead and each phase "
        "(the phases partition the turn's wall-clock), plus cold start in a fresh interpreter.",
    )
    turn.add_argument("--turns", type=_positive_int, default=200, help="timed turns per metadata store (default: 200)")
    turn.add_argument("--documents", type=_positive_int, default=60, help="documents remembered first (default: 60)")
    turn.add_argument("--latency-ms", type=_non_negative_float, default=0.0, help="simulated latency per offline LLM call, ms (default: 0)")
    turn.add_argument("--embedder", default="memlab/hashing", help="embedding model (default: memlab/hashing)")
    turn.add_argument("--block", type=_positive_int, default=10, help="which of the instrumented and the plain session gets each message first flips every N messages (default: 10)")
    turn.add_argument("--no-cold", action="store_true", help="skip the cold-start measurement (a fresh interpreter)")

    quality = benches.add_parser(
        "quality",
        parents=[output],
        help="session-retriever quality and latency on a conversational benchmark",
        description="Each conversation of the benchmark written as one memlab session (one turn per user/assistant "
        "exchange) on a fresh stack per session retriever, every question searched once: session recall@k, turn "
        "recall@k, hit@k, MRR per category and overall (abstention questions apart: their no-result rate), p50/p95 "
        "search latency, cold start, ingest per turn, each metric with its 95% bootstrap interval over questions, and "
        "every pair of retrievers compared on the same questions (difference, interval, p); then search p50/p95 on one "
        "--scale-turn session. "
        "Targets judged: best session recall@5 >= 0.90 and >= 0.15 over keyword (synthetic), bm25 p50 <= 2 ms and "
        "hybrid p50 <= 25 ms on 10,000 turns.",
    )
    quality.add_argument(
        "--dataset",
        action="append",
        default=None,
        help="synthetic[:SEED[:SIZE]] (600 seeded questions), overlap[:SEED[:SIZE]] (600 in the evidence's words), longmemeval:PATH or "
        "locomo:PATH; "
        "repeat it with --tune (default: synthetic; with --tune: synthetic and overlap)",
    )
    quality.add_argument("--split", choices=("all", "dev", "heldout"), default="all", help="run one part of the benchmark (default: all)")
    quality.add_argument(
        "--tune",
        action="store_true",
        help="pick hybrid's settings on the dev splits of every --dataset (max of the min gain in session recall@5 over hybrid v1), "
        "then report once on the held-out splits with bootstrap intervals (memlab.bench.quality_tune)",
    )
    quality.add_argument("--retrievers", type=_names, default=None, help="comma-separated session retrievers (default: keyword,bm25,vector,hybrid)")
    quality.add_argument("--k", type=_names, default=None, help="comma-separated cut-offs (default: 5,10)")
    quality.add_argument("--limit", type=_positive_int, default=None, help="at most N questions, for quick runs (default: all)")
    quality.add_argument("--embedder", default="memlab/minilm", help="EMBEDDING_MODEL of vector/hybrid (default: memlab/minilm)")
    quality.add_argument("--scale", type=_int_at_least(0), default=10_000, help="turns of the one-session latency run; 0 skips (default: 10000)")
    quality.add_argument("--scale-queries", type=_positive_int, default=200, help="timed searches in the scale run (default: 200)")
    quality.add_argument(
        "--resamples", type=_int_at_least(0), default=None,
        help="bootstrap resamples of every 95%% interval and paired comparison (--tune's too); 0: none, not with --tune (default: 2000)",
    )
    quality.add_argument(
        "--answers", action="store_true",
        help="also answer each question from its top-k retrieved turns and have a judge model grade it: answer accuracy per "
        "category beside session recall, judge failures, tokens, cost (memlab.bench.quality_answers)",
    )
    quality.add_argument("--answer-model", default=None, help="litellm model that answers, with --answers (default: memlab/offline)")
    quality.add_argument("--judge-model", default=None, help="litellm model that judges the answers, with --answers (default: memlab/offline)")
    quality.add_argument(
        "--answers-limit", type=_positive_int, default=None, help="at most N questions per retriever in the answer run (default: --limit, else all)"
    )

    serve_bench = benches.add_parser(
        "serve",
        parents=[output],
        help="the HTTP read API under concurrent clients",
        description="Start 'memlab serve --workers N' as a subprocess on a fresh data root (PostgreSQL metadata when "
        "MEMLAB_TEST_POSTGRES_URL is set, Redis cache when MEMLAB_TEST_REDIS_URL is set, else SQLite), seed it through the "
        "Python API, then run one client and then --clients concurrent ones (--turn-clients of them writing turns with "
        "stack.search) over the four /api/v1/sessions endpoints: requests/s, turns/s, p50/p95/p99 per endpoint and "
        "overall beside the single-client p95, errors (target 0), cold start; then the same clients against a bare "
        "FastAPI app running the same SQL (the API's ceiling), alternating: requests/s per worker, ratio (target >= 0.7x).",
    )
    serve_bench.add_argument("--workers", type=_positive_int, default=2, help="server worker processes (default: 2)")
    serve_bench.add_argument("--clients", type=_positive_int, default=16, help="concurrent clients (default: 16)")
    serve_bench.add_argument("--turn-clients", type=_int_at_least(0), default=2, help="of them, clients writing turns through the Python API (default: 2)")
    serve_bench.add_argument("--seconds", type=float, default=20.0, help="length of the concurrent phase (default: 20)")
    serve_bench.add_argument("--single-seconds", type=float, default=5.0, help="length of the single-client phase before it (default: 5)")
    serve_bench.add_argument("--sessions", type=_positive_int, default=200, help="sessions seeded before the server starts (default: 200)")
    serve_bench.add_argument("--rounds", type=_positive_int, default=3, help="rounds of the ceiling comparison (default: 3)")
    serve_bench.add_argument("--ceiling-seconds", type=float, default=3.0, help="seconds per phase and server in each round (default: 3)")
    serve_bench.add_argument("--no-ceiling", action="store_true", help="skip the ceiling comparison")
    serve_bench.add_argument(
        "--profile", action="store_true", help="also call both apps in process and say where a request's time goes, per part, in µs"
    )

    serve = commands.add_parser(
        "serve",
        help="the HTTP API",
        description="Serve the HTTP API (GET /api/v1/sessions..., POST /api/v1/remember, /recall, /search, /forget, "
        "/sessions/{id}/feedback and /end, /healthz; see memlab.api) with uvicorn, on the stack "
        "built from the environment (MEMLAB_DATA_ROOT, CACHE_BACKEND, ...). Callers authenticate with "
        "'Authorization: Bearer <key>' (keys from 'memlab users create-key'). Needs memlab[api].",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="port to bind (default: 8000)")
    serve.add_argument("--workers", type=_positive_int, default=1, help="worker processes, each with its own stack (default: 1)")

    mcp = commands.add_parser(
        "mcp",
        help="an MCP server (stdio, or streamable HTTP with --http)",
        description="Serve memlab's tools (remember, recall, search, forget, add_feedback, get_session, list_sessions, "
        "session_usage, end_session) over the Model Context Protocol on the stack built from the environment; see "
        "memlab.integrations.mcp. stdio (the default) acts as the owner of the key in MEMLAB_API_KEY, else as the default "
        "user; --http serves streamable HTTP at http://HOST:PORT/mcp, every request with 'Authorization: Bearer <key>' "
        "(the keys of 'memlab users create-key'). Needs memlab[mcp].",
    )
    mcp.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    mcp.add_argument("--host", help="with --http: address to bind (default: 127.0.0.1)")
    mcp.add_argument("--port", type=_port, help="with --http: port to bind (default: 8001)")

    ui = commands.add_parser(
        "ui",
        help="the explorers as a web page for a data root (Voilà)",
        description="Serve the explorers of one data root as a web page, to keep open beside a running experiment: the "
        "sessions with their usage and cost in a grid, the most recently active session's turns in a paged, sortable, "
        "filterable grid below, a clicked turn's lanes, verdicts and phases under it (memlab.widgets' UsageExplorer, "
        "SessionExplorer and TurnInspector, rendered by Voilà from the notebook memlab.ui ships; see memlab.ui). The page's "
        "Refresh reads the data again, and its auto-refresh does every 10 s, to follow an experiment that is still writing. The "
        "stack is built from the environment (MEMLAB_DATA_ROOT, CACHE_BACKEND, MEMLAB_DB_URL, ...), --data-root "
        "winning. Each browser tab gets a kernel of its own; Ctrl-C stops the server and every kernel. The page has no "
        "authentication: keep --host on the loopback unless everyone who can reach the port may see the data. "
        "Needs memlab[ui].",
    )
    ui.add_argument("--data-root", type=Path, metavar="PATH", help="the data root to show (default: MEMLAB_DATA_ROOT, else ./.memlab); it must exist")
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    ui.add_argument("--port", type=_port, default=8866, help="port to bind; 0 picks a free one (default: 8866)")
    ui.add_argument("--no-browser", action="store_true", help="do not open a web browser on the page")

    users = commands.add_parser("users", help="users and API keys", description="Users and API keys of the stack from the environment.")
    users.set_defaults(print_help=users.print_help)
    user_commands = users.add_subparsers(dest="users", metavar="ACTION")
    create_key = user_commands.add_parser(
        "create-key",
        help="a new API key of a user, printed once",
        description="Create an API key of the user NAME and print it on stdout (only its SHA-256 is stored: it cannot be shown "
        "again). NAME is a user name or a user id; a name no user has creates that user (said on stderr); a name several "
        "users share is refused: pass the id.",
    )
    create_key.add_argument("name", metavar="NAME", help="user name or id")
    revoke_key = user_commands.add_parser("revoke-key", help="revoke an API key", description="Revoke an API key; exit 1 when it is unknown or already revoked.")
    revoke_key.add_argument("key", metavar="KEY")
    handlers = {
        demo: _demo,
        cache: _bench_cache,
        ingest: _bench_ingest,
        recall: _bench_recall,
        modes: _bench_modes,
        cleanup: _bench_cleanup,
        usage: _bench_usage,
        turn: _bench_turn,
        quality: _bench_quality,
        serve_bench: _bench_serve,
        serve: _serve,
        mcp: _mcp,
        ui: _ui,
        create_key: _users_create_key,
        revoke_key: _users_revoke_key,
    }
    for command, run in handlers.items():
        command.set_defaults(run=run)
    return parser


def _port(text: str) -> int:
    port = _int_at_least(0)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"must be <= 65535, got {port}")
    return port


def _progress(args: argparse.Namespace):
    """A progress printer on stderr, or None with ``--quiet``."""
    return None if args.quiet else (lambda line: print(f"bench: {line}", file=sys.stderr, flush=True))


def _to_stdout(args: argparse.Namespace) -> bool:
    return getattr(args, "json", None) == Path("-")


def _print_table(args: argparse.Namespace, table: str) -> None:
    """The result table on stdout, or on stderr when ``--json -`` claims stdout for the JSON."""
    print(table, file=sys.stderr if _to_stdout(args) else sys.stdout)


def _write_json(args: argparse.Namespace, document: object) -> None:
    """Write ``document`` as JSON to ``--json PATH`` (stdout for ``-``; nothing without ``--json``)."""
    path = args.json
    if path is None:
        return
    text = json.dumps(document, indent=2) + "\n"
    if _to_stdout(args):
        sys.stdout.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"\nwrote {path}")



async def _require_stores(config: "StackConfig", *, cache: bool = True, metadata: bool = True) -> None:
    """Open and close the session cache and the metadata database of ``config``: raise the ``BackendError`` of one that is down.

    For a command that cannot proceed without them, where a stack would fail open (the
    session cache) or fail somewhere the command cannot say it in one line. The cache is
    opened on its own, first, so that one that is down raises before a stack logs it.
    """
    from memlab.config import build_cache_backend
    from memlab.stack import MemoryStack

    if cache and (backend := build_cache_backend(config, None)) is not None:
        async with backend:
            pass
    if metadata:
        async with MemoryStack.from_config(config):
            pass


def _demo(args: argparse.Namespace) -> int:
    from memlab.config import StackConfig

    config = StackConfig.from_env()
    if args.which == "session":
        from memlab.demo import run_demo
        from memlab.stack import MemoryStack

        async def walk() -> None:
            async with MemoryStack.from_config(config) as stack:
                await run_demo(stack, out=print)

        asyncio.run(walk())
        return 0
    from memlab.demo import ModeDemoSpec, run_mode_demo

    spec = ModeDemoSpec(turns=args.turns, documents=args.documents, latency_ms=args.latency_ms, seed=args.seed)
    asyncio.run(_require_stores(config))  # every mode's runs would fail on them: say which store, once
    result = asyncio.run(run_mode_demo(config, spec, progress=not args.quiet))
    return 1 if not result.failed.empty else 0


def _bench_cache(args: argparse.Namespace) -> int:
    from memlab.bench.cache import CacheBenchSpec, environment, format_table, results_document, run_bench_cache, skipped_backends

    from memlab.config import CACHE_BACKENDS

    unknown = [name for name in args.backends or () if name not in CACHE_BACKENDS]
    if unknown:
        raise UsageError(f"--backends: unknown backend {', '.join(map(repr, unknown))}; choose from {', '.join(sorted(CACHE_BACKENDS))}")
    spec = CacheBenchSpec(
        **({"backends": args.backends} if args.backends else {}),
        repeats=args.repeats,
        n=args.n,
        sessions=args.sessions,
        per_session=args.per_session,
        raw_ceiling=not args.no_raw,
        breakdown=not args.no_breakdown,
    )
    progress = _progress(args)
    rows = run_bench_cache(spec, progress=progress)
    env = environment()
    _print_table(args, format_table(rows, spec, env))
    _write_json(args, results_document(rows, spec, env))
    failed = {name: reason for name, reason in skipped_backends(rows).items() if reason.startswith("error: ")}
    for name, reason in failed.items():  # a store that failed fails the run; a skipped one does not
        print(f"memlab: error: {name}: {reason.removeprefix('error: ')}", file=sys.stderr)
    return 1 if failed else 0


def _bench_ingest(args: argparse.Namespace) -> int:
    from memlab.bench.ingest import IngestBenchSpec, format_ingest_table, run_bench_ingest

    try:
        dims = tuple(int(dim) for dim in args.dims) if args.dims else (256, 384)
    except ValueError:
        raise UsageError(f"--dims must be integers, got {','.join(args.dims)!r}") from None
    try:
        batch_sizes = tuple(int(size) for size in args.batch_sizes) if args.batch_sizes else (8, 16, 32, 64)
    except ValueError:
        raise UsageError(f"--batch-sizes must be integers, got {','.join(args.batch_sizes)!r}") from None
    if min(batch_sizes) < 1:
        raise UsageError(f"--batch-sizes must be positive, got {','.join(map(str, batch_sizes))!r}")
    spec = IngestBenchSpec(
        documents=args.documents,
        words=args.words,
        **({"embedders": args.embedders} if args.embedders else {}),
        vectors=args.vectors,
        dims=dims,
        queries=args.queries,
        embed_texts=args.embed_texts,
        ceiling_batch_sizes=batch_sizes,
        embed_repeats=args.embed_repeats,
    )
    progress = _progress(args)
    rows = asyncio.run(run_bench_ingest(spec, progress=progress))
    _print_table(args, format_ingest_table(rows))
    _write_json(args, rows)
    return 0


def _bench_recall(args: argparse.Namespace) -> int:
    from memlab.bench.recall import RecallBenchSpec, format_recall_table, run_bench_recall
    from memlab.retrievers import parse_search_type

    types = tuple(parse_search_type(name).value for name in args.types) if args.types else None
    chosen: dict[str, Any] = {"types": types} if types else {}  # else the spec's default types
    spec = RecallBenchSpec(
        documents=args.documents,
        **chosen,
        embedder=args.embedder,
        latency_documents=args.latency_documents,
        queries=args.queries,
    )
    progress = _progress(args)
    rows = asyncio.run(run_bench_recall(spec, progress=progress))
    _print_table(args, format_recall_table(rows, spec))
    _write_json(args, rows)
    return 0


def _bench_modes(args: argparse.Namespace) -> int:
    from memlab.bench.modes import MODES, ModesBenchSpec, format_modes_table, run_bench_modes

    unknown = [name for name in args.modes or () if name not in MODES]
    if unknown or not 0 <= args.latency_ms < float("inf"):
        raise UsageError(f"--modes takes {', '.join(MODES)}; got {', '.join(unknown)}" if unknown else f"--latency-ms must be a number >= 0, got {args.latency_ms:g}")
    spec = ModesBenchSpec(turns=args.turns, latency_ms=args.latency_ms, entry=args.entry, **({"modes": args.modes} if args.modes else {}))
    progress = _progress(args)
    rows, turns = asyncio.run(run_bench_modes(spec, progress=progress))
    _print_table(args, format_modes_table(rows, spec))
    _write_json(args, {"rows": rows, "turns": turns})
    return 0


def _bench_cleanup(args: argparse.Namespace) -> int:
    from memlab.bench.cleanup import CleanupBenchSpec, format_cleanup_table, run_bench_cleanup

    options: dict[str, Any] = {"turns": args.turns, "contaminated": args.contaminated, "repeats": args.repeats}
    if args.backends:
        options["backends"] = args.backends
    spec = CleanupBenchSpec(**options)
    rows = asyncio.run(run_bench_cleanup(spec, progress=_progress(args)))
    _print_table(args, format_cleanup_table(rows, spec))
    _write_json(args, {"rows": rows})
    return 0


def _bench_quality(args: argparse.Namespace) -> int:
    from memlab.bench.quality import RETRIEVERS, QualityBenchSpec, format_quality_table, run_bench_quality

    try:
        ks = tuple(int(k) for k in args.k) if args.k else (5, 10)
    except ValueError:
        raise UsageError(f"--k takes comma-separated integers, got {','.join(args.k)!r}") from None
    if args.tune:
        return _bench_quality_tune(args, ks)
    if args.dataset and len(args.dataset) > 1:
        raise UsageError("--dataset takes one benchmark unless --tune")
    spec = QualityBenchSpec(
        split=args.split,
        dataset=(args.dataset or ["synthetic"])[0],
        retrievers=args.retrievers or RETRIEVERS,
        ks=ks,
        limit=args.limit,
        embedder=args.embedder,
        scale=args.scale,
        scale_queries=args.scale_queries,
        **({} if args.resamples is None else {"resamples": args.resamples}),
        answers=_answers_spec(args),
    )
    result = asyncio.run(run_bench_quality(spec, progress=_progress(args)))
    _print_table(args, format_quality_table(result))
    _write_json(args, result)
    from memlab.bench.quality_answers import answers_failure

    failure = answers_failure(result.get("answers"))
    if failure:
        print(f"memlab: error: {failure}", file=sys.stderr)
    return 1 if failure else 0


def _answers_spec(args: argparse.Namespace) -> Any:
    """The ``--answers`` part of ``bench quality`` (None without it); its options without it, or a bad model name, are usage errors."""
    options = {"answer_model": args.answer_model, "judge_model": args.judge_model, "limit": args.answers_limit}
    given = {name: value for name, value in options.items() if value is not None}
    if not args.answers:
        if given:
            raise UsageError("--answer-model, --judge-model and --answers-limit apply with --answers only")
        return None
    from memlab.bench.quality_answers import AnswersSpec
    from memlab.exceptions import ValidationError

    try:
        return AnswersSpec(**given)
    except ValidationError as exc:
        raise UsageError(f"--answers: {exc}") from None


def _bench_quality_tune(args: argparse.Namespace, ks: tuple[int, ...]) -> int:
    from memlab.bench.quality import format_overlap_table, load_dataset, overlap_row
    from memlab.bench.quality_tune import format_tune_table, tune
    from memlab.exceptions import ValidationError
    from memlab.stats import DEFAULT_RESAMPLES

    if args.split != "all" or args.retrievers or args.limit:
        raise UsageError("--tune splits every --dataset itself and runs its own retrievers: no --split, --retrievers or --limit")
    if args.resamples == 0:
        raise UsageError("--tune reports intervals: --resamples must be >= 1")
    resamples = DEFAULT_RESAMPLES if args.resamples is None else args.resamples
    benchmarks = [load_dataset(text) for text in (args.dataset or ["synthetic", "overlap"])]
    try:
        result = asyncio.run(tune(benchmarks, embedder=args.embedder, ks=ks, resamples=resamples, progress=_progress(args)))
    except ValidationError as exc:
        raise UsageError(f"--tune: {exc}") from None
    overlaps = [overlap_row(bench) for bench in benchmarks]
    _print_table(args, format_tune_table(result) + "\n\n" + format_overlap_table(overlaps))
    _write_json(args, {**result.to_dict(), "overlap": overlaps})
    return 0


def _serve(args: argparse.Namespace) -> int:
    from memlab.config import StackConfig

    config = StackConfig.from_env()  # a bad environment is a usage error before the server starts
    from memlab.api import serve  # without memlab[api]: an ImportError naming it, one line (main)

    # a metadata database that is down would fail each worker's startup inside uvicorn; the cache fails open
    asyncio.run(_require_stores(config, cache=False))
    serve(host=args.host, port=args.port, workers=args.workers)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from memlab.config import StackConfig

    if not args.http and (args.host is not None or args.port is not None):
        raise UsageError("--host and --port apply to --http only (stdio has neither)")
    config = StackConfig.from_env()  # a bad environment is a usage error before the server starts
    from memlab.integrations.mcp import DEFAULT_HTTP_PORT, run_stdio, serve_http  # the SDK itself is imported when the server starts
    from memlab.stack import MemoryStack

    stack = MemoryStack.from_config(config)
    if args.http:
        asyncio.run(_require_stores(config, cache=False))  # as serve: a metadata database that is down, in one line
        serve_http(stack, host=args.host or "127.0.0.1", port=DEFAULT_HTTP_PORT if args.port is None else args.port)
    else:
        asyncio.run(run_stdio(stack))
    return 0


def _ui(args: argparse.Namespace) -> int:
    from memlab.ui import prepare  # without memlab[ui]: an ImportError naming it, one line (main)

    # every check (the extra, the environment, the data root, the port) before the server starts
    server = prepare(data_root=args.data_root, host=args.host, port=args.port, open_browser=not args.no_browser)
    asyncio.run(_require_stores(server.stack_config, cache=False))  # as serve: a metadata database that is down, in one line
    server.run()
    return 0


async def _key_owner(stack: Any, name: str) -> Any:
    """The user ``name`` names: a user id, the one user of that name, or a new user of that name."""
    import uuid

    try:
        found = await stack.users.get(uuid.UUID(name))
    except ValueError:
        found = None
    if found is not None:
        return found
    named = await stack.users.by_name(name)
    if len(named) > 1:
        ids = ", ".join(str(user.id) for user in named)
        raise UsageError(f"{len(named)} users are called {name!r} ({ids}); pass the id of one")
    if named:
        return named[0]
    if name == "default_user":
        return await stack.users.default()
    user = await stack.users.create(name)
    print(f"memlab: created user {user.name!r} ({user.id})", file=sys.stderr)
    return user


def _users_create_key(args: argparse.Namespace) -> int:
    from memlab.stack import MemoryStack

    async def go() -> str:
        async with MemoryStack.from_env() as stack:
            owner = await _key_owner(stack, args.name)
            key = await stack.users.create_api_key(owner)
            print(f"memlab: API key of {owner.name!r} ({owner.id}); it is shown only now", file=sys.stderr)
            return key

    print(asyncio.run(go()))
    return 0


def _users_revoke_key(args: argparse.Namespace) -> int:
    from memlab.stack import MemoryStack

    async def go() -> bool:
        async with MemoryStack.from_env() as stack:
            return await stack.users.revoke_api_key(args.key)

    if asyncio.run(go()):
        print("memlab: key revoked", file=sys.stderr)
        return 0
    print("memlab: error: no live key matches", file=sys.stderr)
    return 1


def _bench_usage(args: argparse.Namespace) -> int:
    from memlab.bench.usage import UsageBenchSpec, format_usage_table, run_bench_usage

    if not 0 <= args.latency_ms < float("inf"):
        raise UsageError(f"--latency-ms must be a number >= 0, got {args.latency_ms:g}")
    spec = UsageBenchSpec(turns=args.turns, latency_ms=args.latency_ms, embedder=args.embedder)
    rows = asyncio.run(run_bench_usage(spec, progress=_progress(args)))
    _print_table(args, format_usage_table(rows, spec))
    _write_json(args, {"rows": rows})
    return 0


def _bench_turn(args: argparse.Namespace) -> int:
    from memlab.bench.turn import TurnBenchSpec, format_turn_table, run_bench_turn

    spec = TurnBenchSpec(
        turns=args.turns, documents=args.documents, latency_ms=args.latency_ms, embedder=args.embedder, block=args.block,
        cold=not args.no_cold, postgres_url=os.environ.get("MEMLAB_TEST_POSTGRES_URL") or None,
    )
    result = asyncio.run(run_bench_turn(spec, progress=_progress(args)))
    _print_table(args, format_turn_table(result, spec))
    _write_json(args, result)
    return 0


def _bench_serve(args: argparse.Namespace) -> int:
    import tempfile

    from memlab.bench.cache import bench_config
    from memlab.bench.serve import ServeBenchSpec, format_serve_table, run_bench_serve

    spec = ServeBenchSpec(
        workers=args.workers,
        clients=args.clients,
        turn_clients=args.turn_clients,
        seconds=args.seconds,
        single_seconds=args.single_seconds,
        sessions=args.sessions,
        ceiling=not args.no_ceiling,
        rounds=args.rounds,
        ceiling_seconds=args.ceiling_seconds,
        profile=args.profile,
    )
    if os.environ.get("MEMLAB_TEST_REDIS_URL", "").strip():  # seeding would fail open on a Redis that is down
        asyncio.run(_require_stores(bench_config("redis", Path(tempfile.gettempdir())), metadata=False))
    result = asyncio.run(run_bench_serve(spec, progress=_progress(args)))
    _print_table(args, format_serve_table(result))
    _write_json(args, result)
    return 0


def _outside_failures() -> tuple[type[BaseException], ...]:
    """The errors not memlab's that still end the command with one line (see :func:`main`).

    A missing extra (``ImportError``) and a store that cannot be reached outside memlab's
    wrappers: ``OSError`` (refused, timed out, unresolvable) and the drivers' own errors,
    those of the drivers this run imported.
    """
    found: list[type[BaseException]] = [ImportError, OSError]
    for module, name in (("redis.exceptions", "RedisError"), ("asyncpg.exceptions", "PostgresError"), ("sqlalchemy.exc", "DBAPIError")):
        error = getattr(sys.modules.get(module), name, None)
        if isinstance(error, type) and issubclass(error, BaseException):
            found.append(error)
    return tuple(found)


def _error_line(exc: BaseException) -> str:
    """``memlab: error: <message>`` on one line (the class name first for a driver's or the system's error)."""
    from memlab.exceptions import MemlabError

    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if not isinstance(exc, (MemlabError, ImportError)):  # an ImportError names the module (memlab's, the extra)
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return f"memlab: error: {text}"


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "run", None)
    if run is None:  # no command, or a command group without its subcommand
        getattr(args, "print_help", parser.print_help)(sys.stderr)
        return 2
    return run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memlab`` command; returns the exit status.

    0 success; 1 a run that failed (a store or the LLM failed); 2 a usage error:
    a bad option or value (argparse's own errors, an unknown name, a memlab
    ``ValidationError`` or ``ConfigError`` from an argument, the env file or the
    environment). ``./.env`` (or ``--env-file``) is applied to ``os.environ`` for the
    run (see :mod:`memlab._cli_env`). Every memlab error, a missing extra
    (``ImportError``) and a store's connection failure (``OSError``, a driver's error:
    :func:`_outside_failures`) print one line, ``memlab: error: ...``,
    on stderr; other exceptions propagate (a bug keeps its traceback).
    """
    from memlab.exceptions import ConfigError, MemlabError, ValidationError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with env_file_applied(args.env_file):
            return _run(parser, args)
    except (ValidationError, ConfigError) as exc:  # UsageError is a ValidationError
        print(_error_line(exc), file=sys.stderr)
        return 2
    except MemlabError as exc:
        print(_error_line(exc), file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `memlab demo | head`: stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdout at exit; keep it from failing again
        return 1
    except _outside_failures() as exc:
        print(_error_line(exc), file=sys.stderr)
        return 1
