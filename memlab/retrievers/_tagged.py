"""SKILLS and CODING_RULES: the nearest chunks of documents remembered with ``tags=["skills"]`` / ``["coding_rules"]``.

A skill item's ``text`` is ``"name: description"`` (SPEC §9.5, the skill entries of recall):

* ``name``: the document's first line when it is a Markdown heading (``# Deploy a
  service`` gives ``Deploy a service``), else the document's name (a file name, or
  ``text_<hash>`` for inline text);
* ``description``: the chunk's first sentence, plus the second when the first is
  under 100 characters, whitespace collapsed, at most 300 characters (cut at a word,
  ``…`` appended); leading heading lines are skipped. A chunk with nothing else
  gives ``text == name``.

``raw`` holds ``skill`` (the name), ``description`` and ``content`` (the chunk's full text).
"""

from __future__ import annotations

import re
from typing import Any

from memlab.retrievers._base import RetrievalScope, SearchResultItem, dataset_graphs
from memlab.retrievers._chunks import CollectionRetriever
from memlab.retrievers._types import SearchType

__all__ = ["CodingRulesRetriever", "SkillsRetriever", "skill_description"]

DESCRIPTION_MAX_CHARS = 300
_SECOND_SENTENCE_BELOW = 100
_HEADING = re.compile(r"#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")


def _heading(line: str) -> str | None:
    match = _HEADING.fullmatch(line.strip())
    return (match.group(1).strip() or None) if match else None


def skill_description(text: str) -> str:
    """The description part of a skill chunk's ``"name: description"`` (rules in the module docstring)."""
    from memlab.text import sentence_spans

    lines = text.split("\n")
    while lines and (not lines[0].strip() or _heading(lines[0]) is not None):
        lines.pop(0)
    body = "\n".join(lines)
    spans = sentence_spans(body)
    if not spans:
        return ""
    end = spans[1][1] if spans[0][1] - spans[0][0] < _SECOND_SENTENCE_BELOW and len(spans) > 1 else spans[0][1]
    description = " ".join(body[spans[0][0] : end].split())
    if len(description) > DESCRIPTION_MAX_CHARS:
        cut = description.rfind(" ", 0, DESCRIPTION_MAX_CHARS)
        description = description[: cut if cut > 0 else DESCRIPTION_MAX_CHARS - 1].rstrip() + "…"
    return description


def _skill_name(graph: Any, chunk: dict[str, Any]) -> str:
    from memlab.graph import stable_id

    (data_id,) = chunk["supporters"]  # a chunk belongs to exactly one document
    first = graph.node(stable_id("chunk", data_id, "0"))
    heading = _heading(first["text"].split("\n", 1)[0]) if first is not None else None
    if heading is not None:
        return heading
    return graph.node(chunk["document_id"])["name"]


class SkillsRetriever(CollectionRetriever):
    """``SKILLS``: the ``top_k`` skill chunks nearest the query (collection ``tagged_skills``) as ``"name: description"``."""

    search_type = SearchType.SKILLS
    skill_gate = False
    collection = "tagged_skills"

    async def get_context(self, query: str, scope: RetrievalScope) -> list[SearchResultItem]:
        found = await super().get_context(query, scope)
        graphs = await dataset_graphs(scope, found)
        items = []
        for item in found:
            graph = graphs[item.dataset_id]
            chunk = graph.node(item.id)
            if chunk is None:
                continue
            name, description = _skill_name(graph, chunk), skill_description(item.text)
            raw = {**item.raw, "skill": name, "description": description, "content": item.text}
            items.append(item.model_copy(update={"text": f"{name}: {description}" if description else name, "raw": raw}))
        return items


class CodingRulesRetriever(CollectionRetriever):
    """``CODING_RULES``: the ``top_k`` coding-rule chunks nearest the query (collection ``tagged_coding_rules``)."""

    search_type = SearchType.CODING_RULES
    hybrid_retry_when_empty = True
    collection = "tagged_coding_rules"
