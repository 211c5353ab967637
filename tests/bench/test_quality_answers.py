"""Answer-level evaluation (issue 26 item 6): per-question rows, offline accuracy tracking retrieval, judge and answer
failures, accuracy per category with intervals, usage through memlab's client, argument checks, the
``bench quality --answers`` CLI (the judge itself: ``test_answer_judge.py``)."""

from __future__ import annotations

import json
import re

import pytest

from memlab.bench.conversations import Benchmark, Conversation, Question, Session, Turn, synthetic
from memlab.bench.quality_answers import (
    ANSWER_QUESTION_COLUMNS,
    ANSWER_SUMMARY_COLUMNS,
    AnswerJudgement,
    AnswersSpec,
    GeneratedAnswer,
    answer_comparisons,
    answer_summary_rows,
    check_model,
    evaluate_answers,
    format_answers_table,
    run_answers,
    to_frame,
)
from memlab.cli import main
from memlab.exceptions import ValidationError
from memlab.llm import LLMClient, metering
from memlab.session.retrievers import KeywordSessionRetriever, SessionIndex, SessionRetriever

RESAMPLES = 200


def _session(session_id: str, date: str, *turns: tuple[str, str]) -> Session:
    return Session(session_id, date, [Turn(f"{session_id}:{i}", session_id, role, text) for i, (role, text) in enumerate(turns)])


def _benchmark() -> Benchmark:
    """Keyword finds q1's evidence (shared: my, bicycle, is, colour), not q2's (nothing shared), nothing for q3."""
    sessions = [
        _session("s1", "2023-01-01T09:30:00", ("user", "My bicycle is painted green."), ("assistant", "Nice colour."),
                 ("user", "I went swimming today."), ("assistant", "Good for you.")),
        _session("s2", "2023-01-05", ("user", "We moved to Castle Terrace last week."), ("assistant", "Congratulations.")),
    ]
    questions = [
        Question("q1", "single_session_fact", "What colour is my bicycle?", "green", ["s1"], ["s1:0"]),
        Question("q2", "knowledge_update", "Where do I live now?", "Castle Terrace", ["s2"], ["s2:0"]),
        Question("q3", "abstention", "How tall am I?", "I don't know.", [], [], abstention=True),
    ]
    return Benchmark("hand-built", [Conversation("c1", sessions, questions)])


class GoldFirst(SessionRetriever[SessionIndex]):
    """A perfect retriever for tests: the turns holding a question's gold evidence, nothing else."""

    name = "gold"

    def __init__(self, benchmark: Benchmark) -> None:
        self.gold: dict[str, set[str]] = {}  # question text -> evidence texts (conversations share question wordings)
        for conversation in benchmark.conversations:
            for question in conversation.questions:
                self.gold.setdefault(question.question, set()).update(conversation.turn(i).text for i in question.evidence_turn_ids)

    def new_index(self) -> SessionIndex:
        return SessionIndex()

    async def search(self, index, query, top_k):
        texts = self.gold.get(query, set())
        return [(entry, 1.0) for entry in index.entries if entry.question in texts or entry.answer in texts][:top_k]


def _by_id(run) -> dict:
    return {row["question_id"]: row for row in run.questions}


# -- the evaluation -------------------------------------------------------------------------------------------


async def test_per_question_rows_on_a_hand_built_benchmark():
    run = await evaluate_answers(_benchmark(), retriever="keyword", top_k=5)
    rows = _by_id(run)
    assert set(rows["q1"]) == set(ANSWER_QUESTION_COLUMNS)
    q1, q2, q3 = rows["q1"], rows["q2"], rows["q3"]
    assert q1["retrieved_ids"][:2] == ["s1:0", "s1:1"] and q1["hit"] == 1.0 and q1["session_recall"] == 1.0
    assert q1["answer"].startswith("[2023-01-01 09:30] My bicycle is painted green.")  # the offline answerer echoes the turns
    assert (q1["verdict"], q1["correct"], q1["judge_failure"]) == ("yes", True, False)
    assert q2["hit"] == 0.0 and q2["correct"] is False  # keyword missed the evidence
    assert q3["returned"] == 0 and q3["answer"] == "I don't know." and q3["correct"] is True and q3["session_recall"] is None
    assert all(row["tokens"] > 0 and row["cost_usd"] is None for row in rows.values())  # memlab/offline is unpriced
    assert run.retriever == "keyword" and run.answer_model == run.judge_model == "memlab/offline"


async def test_a_better_retriever_gives_higher_offline_accuracy():
    bench = synthetic(0, 60)
    keyword = await evaluate_answers(bench, retriever=KeywordSessionRetriever(), top_k=10)
    gold = await evaluate_answers(bench, retriever=GoldFirst(bench), top_k=10)
    narrow = await evaluate_answers(bench, retriever="keyword", top_k=1)
    overall = {name: next(row for row in run.summary_rows(resamples=RESAMPLES) if row["category"] == "all")
               for name, run in (("keyword", keyword), ("gold", gold), ("narrow", narrow))}
    assert overall["gold"]["session_recall"] == 1.0 > overall["keyword"]["session_recall"] > overall["narrow"]["session_recall"]
    assert overall["gold"]["accuracy"] > overall["keyword"]["accuracy"] >= overall["narrow"]["accuracy"]
    [paired] = answer_comparisons(keyword.questions + gold.questions, resamples=RESAMPLES)
    assert (paired["a"], paired["b"], paired["verdict"]) == ("keyword", "gold", "worse")
    # offline, a correct answer needs its gold text retrieved: accuracy never exceeds what retrieval allowed
    for row in keyword.questions:
        if row["correct"] and not row["abstention"]:
            assert row["returned"] > 0


async def test_per_category_accuracy_adds_up_and_intervals_contain_the_estimate():
    bench = synthetic(1, 36)
    run = await evaluate_answers(bench, retriever="bm25", top_k=5)
    rows = run.summary_rows(resamples=RESAMPLES)
    assert set(rows[0]) == set(ANSWER_SUMMARY_COLUMNS)
    *categories, overall = rows
    assert overall["category"] == "all" and [row["category"] for row in categories] == bench.categories()
    for key in ("questions", "judged", "correct", "judge_failures", "answer_failures", "answerable", "tokens_in", "tokens_out"):
        assert sum(row[key] for row in categories) == overall[key], key
    assert overall["accuracy"] == pytest.approx(overall["correct"] / overall["judged"])
    for row in rows:
        for key in ("accuracy", "session_recall", "hit"):
            if row[key] is not None:
                assert row[f"{key}_lo"] <= row[key] <= row[f"{key}_hi"], (row["category"], key)
    assert all(row["accuracy_lo"] is None for row in run.summary_rows(resamples=0))


async def test_a_malformed_judge_output_is_a_judge_failure_not_a_verdict():
    judge = LLMClient()
    judge.handlers.register(AnswerJudgement.__name__, lambda request: "maybe")  # registered first: kept over the offline judge
    run = await evaluate_answers(_benchmark(), judge_model=judge)
    assert all(row["judge_failure"] and row["verdict"] is None and row["correct"] is None for row in run.questions)
    assert all("unreadable judge output: 'maybe'" in row["judge_error"] for row in run.questions)
    assert all(row["judge_tokens_out"] > 0 for row in run.questions)  # the failed call's usage still counts
    overall = run.summary_rows(resamples=RESAMPLES)[-1]
    assert (overall["judged"], overall["judge_failures"], overall["accuracy"]) == (0, 3, None)
    assert answers_failure_message(run)


def answers_failure_message(run) -> str | None:
    from memlab.bench.quality_answers import answers_failure

    return answers_failure({"questions": run.questions})


async def test_a_plain_text_verdict_is_read_and_a_failing_judge_call_is_a_failure():
    plain = LLMClient()
    plain.handlers.register(AnswerJudgement.__name__, lambda request: "Yes.")
    run = await evaluate_answers(_benchmark(), judge_model=plain)
    assert all(row["verdict"] == "yes" and not row["judge_failure"] for row in run.questions)

    def broken(request):
        raise RuntimeError("judge is down")

    failing = LLMClient()
    failing.handlers.register(AnswerJudgement.__name__, broken)
    run = await evaluate_answers(_benchmark(), judge_model=failing)
    assert all(row["judge_failure"] and "judge is down" in row["judge_error"] for row in run.questions)


async def test_answer_failures_skip_the_judge_and_a_plain_text_answer_is_kept():
    def broken(request):
        raise RuntimeError("answer model is down")

    failing = LLMClient()
    failing.handlers.register(GeneratedAnswer.__name__, broken)
    run = await evaluate_answers(_benchmark(), answer_model=failing)
    assert all("answer model is down" in row["answer_error"] and row["judge_tokens_in"] == 0 for row in run.questions)
    assert run.summary_rows(resamples=0)[-1]["answer_failures"] == 3

    plain = LLMClient()
    plain.handlers.register(GeneratedAnswer.__name__, lambda request: "Castle Terrace")  # not the JSON object
    rows = _by_id(await evaluate_answers(_benchmark(), answer_model=plain))
    assert rows["q2"]["answer"] == "Castle Terrace" and rows["q2"]["correct"] is True and rows["q1"]["correct"] is False


async def test_real_model_strings_go_through_memlabs_client_with_usage_and_cost():
    answer = LLMClient("gpt-4o-mini", mock_response='{"answer": "green"}')  # litellm's own test hook: no network
    judge = LLMClient("gpt-4o", mock_response='{"reason": "matches", "verdict": "yes"}')
    with metering() as meter:
        run = await evaluate_answers(_benchmark(), answer_model=answer, judge_model=judge)
    assert sorted(call.model for call in meter.calls) == ["gpt-4o"] * 3 + ["gpt-4o-mini"] * 3  # reported on to the caller's meter
    for row in run.questions:
        assert row["answer"] == "green" and row["correct"] is True
        assert row["answer_cost_usd"] > 0 and row["judge_cost_usd"] > 0
        assert row["cost_usd"] == pytest.approx(row["answer_cost_usd"] + row["judge_cost_usd"])
    overall = run.summary_rows(resamples=0)[-1]
    assert overall["cost_usd"] == pytest.approx(sum(call.cost_usd for call in meter.calls))
    assert overall["tokens_in"] == sum(call.tokens_in for call in meter.calls)
    assert (run.answer_model, run.judge_model) == ("gpt-4o-mini", "gpt-4o")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"answer_model": "gpt 4o"}, "'gpt 4o'"),
        ({"answer_model": ""}, "''"),
        ({"judge_model": "nonsense-model"}, "'nonsense-model'"),
        ({"judge_model": "memlab/other"}, "'memlab/other'"),
        ({"limit": -1}, "-1"),
        ({"limit": 0}, "0"),
        ({"top_k": 0}, "top_k"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
async def test_bad_arguments_raise_before_any_call(kwargs, named):
    with metering() as meter:
        with pytest.raises(ValidationError, match=re.escape(named)):
            await evaluate_answers(_benchmark(), **kwargs)
    assert meter.calls == []


def test_check_model_and_the_spec():
    assert check_model("gpt-4o-mini") == "gpt-4o-mini" and check_model("memlab/offline") == "memlab/offline"
    assert check_model("ollama/llama3.1") == "ollama/llama3.1"
    with pytest.raises(ValidationError, match="answer_model.*'nonsense'"):
        AnswersSpec(answer_model="nonsense")
    with pytest.raises(ValidationError, match="-2"):
        AnswersSpec(limit=-2)


async def test_run_answers_frames_and_the_table():
    result = await run_answers(_benchmark(), AnswersSpec(), ["keyword", "bm25"], top_k=5, resamples=RESAMPLES)
    frame = to_frame(result)
    assert list(frame.columns) == list(ANSWER_SUMMARY_COLUMNS)
    assert str(frame["accuracy"].dtype) == "Float64" and str(frame["judged"].dtype) == "Int64"
    questions = to_frame(result, questions=True)
    assert len(questions) == 6 and str(questions["correct"].dtype) == "boolean" and questions["retrieved_ids"].dtype == object
    assert list(to_frame(result, comparisons=True)["metric"]) == ["answer_accuracy"]
    table = format_answers_table(result)
    assert "accuracy [95% CI]" in table and "judge fail" in table and "test the pipeline" in table
    assert json.loads(json.dumps(result))["spec"]["top_k"] == 5
    with pytest.raises(ValidationError):
        to_frame(result, questions=True, comparisons=True)
    assert answer_summary_rows([], resamples=0) == []


# -- the CLI --------------------------------------------------------------------------------------------------


def test_cli_answers_on_a_tiny_synthetic_run(tmp_path, capsys):
    out = tmp_path / "quality.json"
    argv = ["bench", "quality", "--dataset", "synthetic:3", "--retrievers", "keyword,bm25", "--limit", "12", "--k", "5", "--scale", "0"]
    assert main([*argv, "--resamples", "100", "--answers", "--answers-limit", "6", "--quiet", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "answers: category" in table and "accuracy [95% CI]" in table and "sR@5" in table
    document = json.loads(out.read_text())
    answers = document["answers"]
    assert answers["spec"]["answer_model"] == "memlab/offline" and answers["spec"]["limit"] == 6 and answers["spec"]["top_k"] == 5
    assert len(answers["questions"]) == 12 and {row["retriever"] for row in answers["rows"]} == {"keyword", "bm25"}
    assert all(row["category"] == "all" or row["questions"] <= 6 for row in answers["rows"])
    assert document["spec"]["answers"]["judge_model"] == "memlab/offline"


@pytest.mark.parametrize(
    "argv",
    [
        ["--answers", "--answer-model", "gpt 4o"],
        ["--answers", "--judge-model", "memlab/judge"],
        ["--judge-model", "gpt-4o"],  # without --answers
        ["--answers-limit", "3"],
    ],
    ids=["spaces", "memlab-name", "judge-without-answers", "limit-without-answers"],
)
def test_cli_bad_answer_options_exit_2(argv, capsys):
    assert main(["bench", "quality", "--retrievers", "keyword", "--limit", "1", "--scale", "0", "--quiet", *argv]) == 2
    assert capsys.readouterr().err.startswith("memlab: error:")


def test_cli_negative_answers_limit_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as excinfo:
        main(["bench", "quality", "--answers", "--answers-limit", "-1", "--scale", "0", "--quiet"])
    assert excinfo.value.code == 2 and "--answers-limit: must be >= 1, got -1" in capsys.readouterr().err
