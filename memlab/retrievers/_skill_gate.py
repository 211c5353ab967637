"""The skill gate (SPEC §9.5): does a query ask for a procedure worth a skills lookup?

Each rule is one regex with a weight. A rule counts when its **first** match is not
negated: none of ``not no never without lack n't 不 别 勿 未 无需 无须`` starts within the
20 characters before that match (English words whole, ``lack`` also as lacks/lacking,
``n't`` also with a typographic apostrophe). The score is the sum of the counting rules'
weights; the gate fires at ``score >= 3.0``.

=================  ======  ====================================================================
rule               weight  cue (case-insensitive)
=================  ======  ====================================================================
``how_to``         3       how do/can/should/would I/we/you; how to
``steps``          3       step(s) to/for; step-by-step (hyphens or spaces)
``procedure``      4       procedure, playbook, runbook, checklist, workflow (singular or plural)
``walkthrough``    3       walk me/us through; guide to/for/on
``process_query``  4       what's / what is the process/procedure
``skill``          4       skill, skills
``ops_verb``       2       set up (setup, set-up, sets/setting up), install, uninstall, configure,
                           deploy, migrate, provision, onboard, rotate, troubleshoot, upgrade,
                           bootstrap, roll back (rollback), restore; inflected forms too. One
                           rule: several verbs still add 2.
``cjk_how``        3       如何 怎么 怎样 怎麼 怎樣 (how)
``cjk_steps``      3       步骤 步驟 (steps)
``cjk_procedure``  4       流程 (procedure) 手册 手冊 (playbook) 检查清单 檢查清單 (checklist)
                           工作流 (workflow) 技能 (skill)
``cjk_ops_verb``   2       安装 安裝 (install) 配置 (configure) 部署 (deploy) 迁移 遷移 (migrate)
                           设置 設置 (set up) 搭建 (build out) 升级 升級 (upgrade) 排查 (troubleshoot)
=================  ======  ====================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlab.config import skill_gate_enabled
from memlab.exceptions import ValidationError

__all__ = ["SKILL_GATE_THRESHOLD", "SkillGateDecision", "should_search_skills", "skill_gate_enabled"]

#: The gate fires when the score reaches this value.
SKILL_GATE_THRESHOLD = 3.0
#: How many characters before a match are searched for a negation.
_NEGATION_WINDOW = 20

_NEGATION = re.compile(r"\b(?:not|no|never|without)\b|\black|n['’]t|不|别|勿|未|无需|无须", re.IGNORECASE)

_RULES: tuple[tuple[str, float, re.Pattern[str]], ...] = tuple(
    (name, weight, re.compile(pattern, re.IGNORECASE))
    for name, weight, pattern in (
        ("how_to", 3.0, r"\bhow\s+(?:(?:do|can|should|would)\s+(?:i|we|you)|to)\b"),
        ("steps", 3.0, r"\bsteps?\s+(?:to|for)\b|\bstep[-\s]+by[-\s]+step\b"),
        ("procedure", 4.0, r"\b(?:procedure|playbook|runbook|checklist|workflow)s?\b"),
        ("walkthrough", 3.0, r"\bwalk\s+(?:me|us)\s+through\b|\bguide\s+(?:to|for|on)\b"),
        ("process_query", 4.0, r"\bwhat(?:['’]s|\s+is)\s+the\s+(?:process|procedure)\b"),
        ("skill", 4.0, r"\bskills?\b"),
        (
            "ops_verb",
            2.0,
            r"\b(?:(?:set|sets|setting)[-\s]*up|setups?"
            r"|(?:un)?install(?:s|ed|ing|ation)?"
            r"|configur(?:e|es|ed|ing|ation)"
            r"|deploy(?:s|ed|ing|ment)?"
            r"|migrat(?:e|es|ed|ing|ion)"
            r"|provision(?:s|ed|ing)?"
            r"|onboard(?:s|ed|ing)?"
            r"|rotat(?:e|es|ed|ing|ion)"
            r"|troubleshoot(?:s|ed|ing)?"
            r"|upgrad(?:e|es|ed|ing)"
            r"|bootstrap(?:s|ped|ping)?"
            r"|roll(?:s|ed|ing)?[-\s]*back|rollbacks?"
            r"|restor(?:e|es|ed|ing))\b",
        ),
        ("cjk_how", 3.0, r"如何|怎么|怎样|怎麼|怎樣"),
        ("cjk_steps", 3.0, r"步骤|步驟"),
        ("cjk_procedure", 4.0, r"流程|手册|手冊|检查清单|檢查清單|工作流|技能"),
        ("cjk_ops_verb", 2.0, r"安装|安裝|配置|部署|迁移|遷移|设置|設置|搭建|升级|升級|排查"),
    )
)


@dataclass(frozen=True)
class SkillGateDecision:
    """The gate's verdict: ``fired == (score >= 3.0)``; ``matched`` names the counted rules in table order."""

    fired: bool
    score: float
    matched: list[str]


def _negated(text: str, start: int) -> bool:
    return _NEGATION.search(text, max(0, start - _NEGATION_WINDOW), start) is not None


def should_search_skills(text: str) -> SkillGateDecision:
    """Score ``text`` against the skill-gate rules (module docstring). Pure and deterministic.

    Raises :class:`~memlab.exceptions.ValidationError` when ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise ValidationError(f"should_search_skills needs a str, got {type(text).__name__}")
    matched: list[str] = []
    score = 0.0
    for name, weight, pattern in _RULES:
        first = pattern.search(text)
        if first is not None and not _negated(text, first.start()):
            matched.append(name)
            score += weight
    return SkillGateDecision(fired=score >= SKILL_GATE_THRESHOLD, score=score, matched=matched)
