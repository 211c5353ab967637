"""TEMPORAL: chunks mentioning a date inside the query's time window, nearest the query first.

**Dates** (:func:`parse_time_window`; the building blocks of the routing grammar,
:mod:`memlab.retrievers._routing`, case-insensitive, years 1000-2099) and the
span each covers:

* ``2020-03-12``, ``12 March 2020``, ``12th of March, 2020``, ``March 12, 2020``: that day;
* ``March 2020`` (full or abbreviated month names): that month;
* ``1898``, with an optional ``early`` / ``mid`` / ``late``: that year;
* ``1890s`` / ``the 1890s`` (same modifiers): the decade 1890-1899.

The modifiers never narrow a span. **Windows**, by the words just before a date D
(and E): ``before`` / ``prior to`` D: everything before D's span; ``after`` D:
everything after it; ``since`` / ``from`` D: from D's start on; ``until`` /
``till`` / ``by`` / ``through`` / ``as of`` D: up to D's end; ``between D and E``,
``from D to`` (or ``until``, ``till``, ``through``, ``-``) ``E``: D's start to E's
end; any other D (``in``, ``during``, bare): D's span. Several windows in one
query are a union.

**Retrieval**: a chunk is a candidate when it mentions (a ``mentions`` edge) an
entity of type ``Date`` whose name parses as a date (its first date) overlapping a
window; candidates rank by vector distance to the query (collection ``chunks``).
``raw["dates"]`` lists the chunk's matching date names, ``raw["windows"]`` the
query's windows as ISO ``[start, end]`` pairs (``None`` for an open end). A query
without any date falls back to plain chunk search (``raw["dates"] == []``,
``raw["windows"] == []``); a window no chunk falls in gives ``[]``.

``get_completion`` answers from that context (:func:`~memlab.retrievers._base.answer`).
The date index (Date entities → chunks) is built once per dataset snapshot.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from memlab.retrievers._base import RetrievalScope, SearchResultItem, element_item, vector_items
from memlab.retrievers._chunks import check_request
from memlab.retrievers._completion import AnswerFromContext
from memlab.retrievers._routing import _DAY, _MONTH, _YEAR
from memlab.retrievers._types import SearchType

__all__ = ["TemporalRetriever", "TimeWindow", "parse_time_window"]

_FIRST = dt.date.min.toordinal()
_LAST = dt.date.max.toordinal()
_MODIFIER = r"(?:(?:early|mid|late)[\s-]+)?"
_DATE = re.compile(
    rf"(?<!\w)(?:{_YEAR}-(?:0[1-9]|1[0-2])-(?:3[01]|[12]\d|0[1-9])"
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}"
    rf"|{_MONTH}(?:\s+{_DAY})?,?\s+{_YEAR}"
    rf"|(?:the\s+)?{_MODIFIER}{_YEAR}s?)(?!\w)",
    re.IGNORECASE,
)
_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_YEAR_IN = re.compile(r"(?<!\d)(\d{4})(?!\d)")
_DAY_IN = re.compile(r"(?<!\d)(\d{1,2})(?:st|nd|rd|th)?(?!\d)", re.IGNORECASE)
_MONTH_IN = re.compile(r"[a-z]{3,}", re.IGNORECASE)
_MONTHS = {name: number for number, name in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), start=1)}
_OPENER = re.compile(r"\b(before|prior\s+to|after|since|from|until|till|by|through|as\s+of|between)\s+$", re.IGNORECASE)
_RANGE_GAP = re.compile(r"\s*(?:-|–|\s(?:and|to|until|till|through)\s)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class TimeWindow:
    """Days ``first`` to ``last`` (proleptic ordinals, inclusive); an open end is ``date.min`` / ``date.max``."""

    first: int
    last: int

    def overlaps(self, first: int, last: int) -> bool:
        return self.first <= last and first <= self.last

    def iso(self) -> list[str | None]:
        return [None if self.first == _FIRST else dt.date.fromordinal(self.first).isoformat(),
                None if self.last == _LAST else dt.date.fromordinal(self.last).isoformat()]


def _span(text: str) -> tuple[int, int] | None:
    """The days one matched date expression covers (None for an impossible day such as 31 April)."""
    iso = _ISO.fullmatch(text)
    year_match = _YEAR_IN.search(text)
    if year_match is None:  # every match of _DATE names a year
        raise ValueError(f"not a date expression (it names no year): {text!r}")
    try:
        if iso:
            day = dt.date(*map(int, iso.groups())).toordinal()
            return day, day
        rest = _YEAR_IN.sub(" ", text)
        year = int(year_match.group(1))
        if text.lower().endswith("s"):
            decade = year - year % 10
            return dt.date(decade, 1, 1).toordinal(), dt.date(decade + 9, 12, 31).toordinal()
        month = next((_MONTHS[word[:3].lower()] for word in _MONTH_IN.findall(rest) if word[:3].lower() in _MONTHS), None)
        if month is None:
            return dt.date(year, 1, 1).toordinal(), dt.date(year, 12, 31).toordinal()
        day_match = _DAY_IN.search(rest)
        if day_match is None:
            return dt.date(year, month, 1).toordinal(), dt.date(year, month, calendar.monthrange(year, month)[1]).toordinal()
        day = dt.date(year, month, int(day_match.group(1))).toordinal()
        return day, day
    except ValueError:
        return None


def parse_time_window(query: str) -> list[TimeWindow]:
    """The time windows of ``query`` (grammar in the module docstring); ``[]`` when it names no date."""
    dates = [(match, span) for match in _DATE.finditer(query) if (span := _span(match.group())) is not None]
    windows, index = [], 0
    while index < len(dates):
        match, (first, last) = dates[index]
        opener = _OPENER.search(query, 0, match.start())
        word = " ".join(opener.group(1).lower().split()) if opener else ""
        if word in ("between", "from") and index + 1 < len(dates):
            following, (_, end) = dates[index + 1]
            if _RANGE_GAP.fullmatch(query, match.end(), following.start()):
                windows.append(TimeWindow(first, end))
                index += 2
                continue
        if word in ("before", "prior to"):
            windows.append(TimeWindow(_FIRST, first - 1))
        elif word == "after":
            windows.append(TimeWindow(last + 1, _LAST))
        elif word in ("since", "from"):
            windows.append(TimeWindow(first, _LAST))
        elif word in ("until", "till", "by", "through", "as of"):
            windows.append(TimeWindow(_FIRST, last))
        else:
            windows.append(TimeWindow(first, last))
        index += 1
    return windows


@dataclass(frozen=True)
class _DateMention:
    name: str
    first: int
    last: int
    chunk_ids: tuple[str, ...]


def _build(graph: Any) -> list[_DateMention]:
    """Every Date entity whose name parses, with the chunks mentioning it, in graph order."""
    g = graph.nx
    out = []
    for node_id, data in g.nodes(data=True):
        if data["type"] != "entity" or data.get("entity_type") != "Date":
            continue
        match = _DATE.search(data["name"])
        span = _span(match.group()) if match else None
        if span is None:
            continue
        chunks = tuple(dict.fromkeys(source for source, _, relation in g.in_edges(node_id, data="relation") if relation == "mentions"))
        if chunks:
            out.append(_DateMention(data["name"], span[0], span[1], chunks))
    return out


async def _nearest_among(query: str, scope: RetrievalScope, dataset_id: Any, candidates: dict[str, list[str]]) -> list[tuple[str, float]]:
    """The ``top_k`` candidates nearest the query in ``chunks`` (only the candidates' vectors are scored)."""
    vectors = await scope.memory.vectors(dataset_id)
    if "chunks" not in vectors.names() or not len(vectors.collection("chunks")):
        return []
    return vectors.collection("chunks").search_among(await scope.embed(query), candidates, scope.top_k)


class TemporalRetriever(AnswerFromContext):
    """``TEMPORAL``: chunks with a date in the query's time window, by vector distance; plain chunk search without a window."""

    search_type = SearchType.TEMPORAL

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        if not check_request(query, scope):
            return []
        windows = parse_time_window(query)
        if not windows:
            plain = await vector_items(query, scope, "chunks")
            for item in plain:
                item.raw.update(dates=[], windows=[])
            return plain
        spans = [window.iso() for window in windows]
        items: list[SearchResultItem] = []
        for dataset_id in scope.dataset_ids:
            graph, mentions = await scope.memory.derived(dataset_id, "dates", _build)
            candidates: dict[str, list[str]] = {}
            for mention in mentions:
                if any(window.overlaps(mention.first, mention.last) for window in windows):
                    for chunk_id in mention.chunk_ids:
                        candidates.setdefault(chunk_id, []).append(mention.name)
            if not candidates:
                continue
            for chunk_id, distance in await _nearest_among(query, scope, dataset_id, candidates):
                found = element_item(graph, dataset_id, chunk_id, distance, dates=candidates[chunk_id], windows=spans)
                if found is not None:
                    items.append(found)
        items.sort(key=lambda item: item.score)
        return items[: scope.top_k]
