"""The session-memory walk-through behind ``memlab demo session``.

:func:`run_demo` takes an open :class:`~memlab.MemoryStack` and an ``out``
callable (``print`` by default; a notebook can pass a list's ``append``), so later
demos can run it once per configuration and compare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memlab.stack import MemoryStack

DEMO_SESSION = "demo_session"

DEMO_TURNS = (
    "Alice prefers a window seat and a vegetarian meal on long flights.",
    "The quarterly report is due on Friday; Bob owns the revenue section.",
    "Production deploys happen on Tuesdays, after the staging smoke tests pass.",
    "Alice's flight to Lisbon leaves on Thursday at 9:40 from gate B12.",
)

DEMO_QUERIES = ("Alice flight", "when do deploys happen", "quarterly revenue report")


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


async def run_demo(stack: "MemoryStack", out: Callable[[str], Any] = print, *, session_id: str = DEMO_SESSION) -> dict[str, Any]:
    """Walk through session memory on ``stack`` (already open), reporting each step through ``out``.

    Clears ``session_id`` first so every run starts from the same state. Returns a
    summary: the stored ``qa_ids``, the ``recall`` hits per query, the number of
    turns read back, and whether the feedback was stored.
    """
    from memlab.models import SessionRecallResponse

    config = stack.config
    out("memlab demo: session memory")
    out(f"data root: {config.data_root.resolve()}  |  cache backend: {config.cache.backend if stack.cache else 'off'}")
    summary: dict[str, Any] = {"qa_ids": [], "recall": {}, "turns": 0, "feedback_stored": False}

    user = await stack.users.default()
    if await stack.session_manager.delete_session(user.id, session_id):
        out(f"(cleared turns left in {session_id!r} by an earlier run)")

    out("")
    out(f"1. remember: {len(DEMO_TURNS)} turns into session {session_id!r}")
    for text in DEMO_TURNS:
        result = await stack.remember(text, session_id=session_id)
        qa_id = result.data_ids[0] if result.data_ids else None
        summary["qa_ids"].append(qa_id)
        out(f"   {result.status:<15} qa_id={qa_id}  {_short(text, 50)!r}")

    out("")
    out("2. recall by keyword (session lane; best match first, ties oldest first)")
    for query in DEMO_QUERIES:
        hits = []
        for hit in await stack.recall(query, session_id=session_id):
            if not isinstance(hit, SessionRecallResponse):
                raise RuntimeError(f"recall({query!r}) returned a {hit.source!r} result; the demo expects session hits only")
            hits.append(hit)
        summary["recall"][query] = [(hit.qa_id, hit.matched_tokens) for hit in hits]
        out(f"   recall({query!r}) -> {len(hits)} hit{'s' if len(hits) != 1 else ''}")
        for hit in hits:
            out(f"      matched {hit.matched_tokens} token{'s' if hit.matched_tokens != 1 else ''}: {_short(hit.answer)!r}")

    out("")
    entries = await stack.session.get_session(session_id=session_id)
    summary["turns"] = len(entries)
    out(f"3. get_session: {len(entries)} turns, oldest first")
    for entry in entries:
        out(f"   [{entry.time}] {_short(entry.answer, 50)!r}")
    last_two = await stack.session.get_session(session_id=session_id, last_n=2)
    out(f"   get_session(last_n=2) -> the last {len(last_two)}: {[_short(e.answer, 25) for e in last_two]}")

    out("")
    out("4. add_feedback on the best hit for 'Alice flight'")
    target = (summary["recall"].get(DEMO_QUERIES[0]) or [(None, 0)])[0][0] or next(iter(summary["qa_ids"]), None)
    if target is None:
        out("   nothing to annotate (the cache is unavailable)")
    else:
        stored = await stack.session.add_feedback(
            session_id, target, feedback_text="Correct: book the window seat.", feedback_score=5
        )
        summary["feedback_stored"] = stored
        out(f"   add_feedback(qa_id={target}, score=5) -> {stored}")

    out("")
    frame = await stack.frames.entries(session_id=session_id)
    out(f"5. stack.frames.entries(): a pandas DataFrame, {len(frame)} rows × {len(frame.columns)} columns")
    import pandas as pd  # loaded by frames.entries already

    if frame.empty:
        out("   (empty)")
    else:
        shown = frame[["time", "qa_id", "answer", "feedback_score", "feedback_text"]].copy()
        shown["time"] = shown["time"].dt.strftime("%H:%M:%S")
        shown["qa_id"] = shown["qa_id"].str[:8]
        shown["feedback_score"] = [f"{score:.0f}" if score is not None and not pd.isna(score) else "-" for score in shown["feedback_score"]]
        shown["answer"] = shown["answer"].map(lambda text: _short(text, 36))
        for line in shown.to_string(index=False, na_rep="-").splitlines():
            out("   " + line)

    out("")
    out("6. settings in use")
    for line in settings_lines(stack):
        out("   " + line)
    return summary


def settings_lines(stack: "MemoryStack") -> list[str]:
    """Back-end, TTL and session settings of ``stack``, one per line."""
    config = stack.config
    cache = stack.cache
    lines = [f"data root:      {config.data_root.resolve()}"]
    if cache is None:
        lines.append("cache:          off (CACHING=false): session calls fail open")
    else:
        lines.append(f"cache backend:  {config.cache.backend} ({type(cache).__name__})")
        path = getattr(cache, "path", None)
        if path is not None:
            lines.append(f"cache file:     {path}")
        ttl = cache.ttl
        detail = f", slack {ttl.slack:g}" if getattr(ttl, "slack", None) is not None else ""
        expiry = f"{ttl.seconds:g} s after the session's last write ({ttl.seconds / 86400:g} days)" if ttl.seconds else "never expires"
        lines.append(f"TTL policy:     {ttl.name}{detail}: {expiry}")
        lines.append(f"purge interval: {cache.purge_interval_seconds:g} s")
    lines.append(f"search mode:    {config.analysis.search_mode}, auto feedback {'on' if config.analysis.auto_feedback else 'off'}")
    lines.append(f"abandon after:  {config.session.abandon_after_seconds:g} s")
    return lines
