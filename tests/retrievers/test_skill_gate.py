"""should_search_skills / skill_gate_enabled: SPEC §9.5 weights, negation and threshold."""

from __future__ import annotations

import pytest

from memlab.exceptions import ValidationError
from memlab.retrievers import SkillGateDecision, should_search_skills, skill_gate_enabled


def gate(text: str) -> tuple[float, list[str]]:
    decision = should_search_skills(text)
    assert decision.fired == (decision.score >= 3.0)
    return decision.score, decision.matched


# --- one rule at a time -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rule", "weight"),
    [
        ("How do I reset it", "how_to", 3.0),
        ("how can we reset it", "how_to", 3.0),
        ("How should you reset it", "how_to", 3.0),
        ("how would I reset it", "how_to", 3.0),
        ("how to reset it", "how_to", 3.0),
        ("steps to reset it", "steps", 3.0),
        ("the step for resetting", "steps", 3.0),
        ("a step-by-step reset", "steps", 3.0),
        ("a step by step reset", "steps", 3.0),
        ("the reset procedure", "procedure", 4.0),
        ("the incident playbook", "procedure", 4.0),
        ("our runbooks", "procedure", 4.0),
        ("the release checklist", "procedure", 4.0),
        ("the review workflow", "procedure", 4.0),
        ("walk me through the reset", "walkthrough", 3.0),
        ("Walk us through it", "walkthrough", 3.0),
        ("a guide to resets", "walkthrough", 3.0),
        ("a guide for resets", "walkthrough", 3.0),
        ("a guide on resets", "walkthrough", 3.0),
        ("what's the process here", "process_query", 4.0),
        ("what’s the process here", "process_query", 4.0),
        ("what is the process here", "process_query", 4.0),
        ("a skill for this", "skill", 4.0),
        ("list the Skills", "skill", 4.0),
        ("set up the cluster", "ops_verb", 2.0),
        ("the setup of the cluster", "ops_verb", 2.0),
        ("set-up the cluster", "ops_verb", 2.0),
        ("install the cluster", "ops_verb", 2.0),
        ("uninstall the cluster", "ops_verb", 2.0),
        ("configure the cluster", "ops_verb", 2.0),
        ("deploying the cluster", "ops_verb", 2.0),
        ("migrate the cluster", "ops_verb", 2.0),
        ("provision the cluster", "ops_verb", 2.0),
        ("onboard the cluster", "ops_verb", 2.0),
        ("rotate the keys", "ops_verb", 2.0),
        ("troubleshoot the cluster", "ops_verb", 2.0),
        ("upgrade the cluster", "ops_verb", 2.0),
        ("bootstrap the cluster", "ops_verb", 2.0),
        ("roll back the cluster", "ops_verb", 2.0),
        ("restore the cluster", "ops_verb", 2.0),
        ("如何重置", "cjk_how", 3.0),
        ("怎么重置", "cjk_how", 3.0),
        ("重置步骤", "cjk_steps", 3.0),
        ("重置流程", "cjk_procedure", 4.0),
        ("运维手册", "cjk_procedure", 4.0),
        ("安装", "cjk_ops_verb", 2.0),
        ("配置服务", "cjk_ops_verb", 2.0),
        ("部署服务", "cjk_ops_verb", 2.0),
    ],
)
def test_each_rule_and_its_weight(text: str, rule: str, weight: float) -> None:
    assert gate(text) == (weight, [rule])


@pytest.mark.parametrize(
    "text",
    ["", "What does memlab do?", "however to be fair", "how is it going", "skillet recipes", "reinstalled", "setupx"],
)
def test_no_cue_scores_zero(text: str) -> None:
    assert should_search_skills(text) == SkillGateDecision(fired=False, score=0.0, matched=[])


# --- sums, ops verbs once, threshold ----------------------------------------------------------


def test_score_sums_rules_in_table_order() -> None:
    assert gate("What is the procedure? Walk me through the skill, step-by-step, how to install") == (
        3.0 + 3.0 + 4.0 + 3.0 + 4.0 + 4.0 + 2.0,
        ["how_to", "steps", "procedure", "walkthrough", "process_query", "skill", "ops_verb"],
    )


def test_ops_verbs_count_once() -> None:
    assert gate("install, configure, deploy, migrate and rotate") == (2.0, ["ops_verb"])
    assert gate("安装 配置 部署") == (2.0, ["cjk_ops_verb"])
    assert gate("how to install, configure and deploy") == (5.0, ["how_to", "ops_verb"])


def test_a_rule_counts_once_however_often_it_matches() -> None:
    assert gate("how to A, how to B, how do I C") == (3.0, ["how_to"])


def test_threshold_is_inclusive_at_three() -> None:
    assert should_search_skills("how to") == SkillGateDecision(fired=True, score=3.0, matched=["how_to"])
    assert should_search_skills("install it") == SkillGateDecision(fired=False, score=2.0, matched=["ops_verb"])
    assert should_search_skills("install it 安装") == SkillGateDecision(fired=True, score=4.0, matched=["ops_verb", "cjk_ops_verb"])


# --- negation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "prefix", ["not ", "no ", "never ", "without a ", "lack ", "lacking ", "don't know ", "don’t know ", "I can't see "]
)
def test_english_negation_before_the_match_cancels_the_rule(prefix: str) -> None:
    assert gate(f"{prefix}how to") == (0.0, [])


@pytest.mark.parametrize("prefix", ["不", "别", "勿", "未", "无需", "无须", "我不知道"])
def test_cjk_negation_before_the_match_cancels_the_rule(prefix: str) -> None:
    assert gate(f"{prefix}如何重置") == (0.0, [])


def test_negation_window_is_twenty_characters() -> None:
    assert gate("no" + " " * 18 + "how to") == (0.0, [])  # "no" starts 20 characters before
    assert gate("no" + " " * 19 + "how to") == (3.0, ["how_to"])  # 21: outside the window


def test_negation_after_the_match_does_not_count() -> None:
    assert gate("how to, not that") == (3.0, ["how_to"])


def test_negation_words_are_whole_words() -> None:
    assert gate("I know how to") == (3.0, ["how_to"])
    assert gate("a notebook on how to") == (3.0, ["how_to"])
    assert gate("cannot how to") == (3.0, ["how_to"])  # "cannot" is not "not"
    assert gate("black box how to") == (3.0, ["how_to"])


def test_only_the_first_match_of_a_rule_is_checked() -> None:
    assert gate("never how to; but how to") == (0.0, [])  # first match negated: the rule is out
    assert gate("how to; but never how to") == (3.0, ["how_to"])


def test_negation_affects_only_the_rule_it_precedes() -> None:
    assert gate("how to proceed without a skill") == (3.0, ["how_to"])
    assert gate("without the runbook, how do I deploy") == (5.0, ["how_to", "ops_verb"])


def test_non_string_is_rejected() -> None:
    with pytest.raises(ValidationError, match="str"):
        should_search_skills(None)  # type: ignore[arg-type]


# --- SKILL_GATE_ENABLED -----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["false", "FALSE", "0", "no", "No", " false "])
def test_gate_disabled_values(value: str) -> None:
    assert skill_gate_enabled({"SKILL_GATE_ENABLED": value}) is False


@pytest.mark.parametrize("environ", [{}, {"SKILL_GATE_ENABLED": "true"}, {"SKILL_GATE_ENABLED": "1"}, {"SKILL_GATE_ENABLED": ""}])
def test_gate_enabled_by_default_and_otherwise(environ: dict[str, str]) -> None:
    assert skill_gate_enabled(environ) is True


def test_gate_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_GATE_ENABLED", "no")
    assert skill_gate_enabled() is False
    monkeypatch.delenv("SKILL_GATE_ENABLED")
    assert skill_gate_enabled() is True
