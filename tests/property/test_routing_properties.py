"""route_query and should_search_skills are total, deterministic and keep their contracts on any text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.retrievers import SearchType, route_query, should_search_skills

#: SPEC §9.5 weights, written out here so the test checks the contract, not the module's table.
WEIGHTS = {
    "how_to": 3.0,
    "steps": 3.0,
    "procedure": 4.0,
    "walkthrough": 3.0,
    "process_query": 4.0,
    "skill": 4.0,
    "ops_verb": 2.0,
    "cjk_how": 3.0,
    "cjk_steps": 3.0,
    "cjk_procedure": 4.0,
    "cjk_ops_verb": 2.0,
}
RULE_TYPES = {
    "quoted_phrase": SearchType.CHUNKS_LEXICAL,
    "coding_rules_intent": SearchType.CODING_RULES,
    "time_scoped_question": SearchType.TEMPORAL,
    "default": SearchType.HYBRID_COMPLETION,
}

# Words that hit the rules, so generated text reaches every branch, not only the default.
CUES = st.sampled_from(
    [
        "in", "for", "as of", "2020", "1999s", "the 1990s", "March 5,", "2021-02-03", "mid-2020", "revenue", "and",
        "coding", "rules", "code review", "checklist", '"', "how to", "how do I", "step-by-step", "skills",
        "walk me through", "what's the process", "install", "deploy", "not", "n't", "never", "如何", "步骤",
        "流程", "安装", "不", "无需", ",", "?", "  ",
    ]
)  # fmt: skip
TEXT = st.one_of(st.text(), st.lists(st.one_of(CUES, st.text(max_size=4)), max_size=12).map(" ".join))


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_route_query_is_total_and_deterministic(text: str) -> None:
    decision = route_query(text)
    assert decision.rule in RULE_TYPES
    assert decision.search_type is RULE_TYPES[decision.rule]
    assert route_query(text) == decision
    assert route_query(f" \n{text}\t ") == decision  # routing reads text.strip()


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), TEXT).map(lambda s: s.replace('"', "")).filter(bool))
def test_whole_quoted_query_routes_lexical(inner: str) -> None:
    assert route_query(f'"{inner}"').search_type is SearchType.CHUNKS_LEXICAL


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_skill_score_is_a_sum_of_listed_weights(text: str) -> None:
    decision = should_search_skills(text)
    assert len(decision.matched) == len(set(decision.matched))
    assert set(decision.matched) <= set(WEIGHTS)
    assert decision.score == sum(WEIGHTS[name] for name in decision.matched)
    assert decision.fired == (decision.score >= 3.0)
    assert should_search_skills(text) == decision
