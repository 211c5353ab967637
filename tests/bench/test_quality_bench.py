"""``memlab bench quality``: exact metrics on a hand-built benchmark, the haystack layout, the CLI, frames.quality dtypes."""

from __future__ import annotations

import json

import pytest

from memlab.bench.conversations import Benchmark, Conversation, Question, Session, Turn, synthetic
from memlab.bench.quality import (
    QualityBenchSpec,
    compare_retrievers,
    format_quality_table,
    load_dataset,
    run_bench_quality,
    scale_haystack,
    to_frame,
)
from memlab.bench.quality_eval import (
    COMPARISON_COLUMNS,
    HaystackTurn,
    comparison_line,
    evaluate,
    haystack_turns,
    paired_comparisons,
    question_columns,
    question_metrics,
    scratch_manager,
    summary_columns,
    summary_rows,
)
from memlab.cli import main
from memlab._cli_errors import UsageError
from memlab.exceptions import ValidationError
from memlab.session.rerankers import MMRSessionReranker
from memlab.session.retrievers import BM25SessionRetriever, KeywordSessionRetriever

KS = (1, 5)


def _session(session_id: str, date: str, *turns: tuple[str, str]) -> Session:
    return Session(session_id, date, [Turn(f"{session_id}:{i}", session_id, role, text) for i, (role, text) in enumerate(turns)])


def _question(qid: str, category: str, text: str, sessions: list[str], turns: list[str], *, abstention: bool = False) -> Question:
    return Question(qid, category, text, "", sessions, turns, abstention=abstention)


def _benchmark() -> Benchmark:
    """Keyword scores per memlab turn (query words of >= 2 letters shared) are worked out in each question's comment."""
    sessions = [
        _session("s1", "2023-01-01", ("user", "My bicycle is what I love most."), ("assistant", "Noted."), ("user", "I went swimming today.")),
        _session("s2", "2023-01-05", ("user", "My bicycle got painted green."), ("assistant", "Noted.")),
        _session("s3", "2023-01-09", ("user", "Lunch was great."), ("assistant", "Noted.")),
    ]
    questions = [
        # {what, colour, is, my, bicycle}: s1 pair 4, s2 pair 2 -> gold (s2:0) at rank 2
        _question("q1", "single_session_fact", "What colour is my bicycle?", ["s2"], ["s2:0"]),
        # {did, go, swimming, or, paint, my, bicycle}: s1 pair 2, s2 pair 2 (tie: older first), s1:2 alone 1
        _question("q2", "multi_session_aggregation", "Did I go swimming or paint my bicycle?", ["s1", "s2"], ["s1:2", "s2:0"]),
        # nothing shared: no result
        _question("q3", "abstention", "Where do whales sleep?", [], [], abstention=True),
        # {recommend, lunch, spot}: s3 pair 1 -> rank 1
        _question("q4", "preference", "Recommend a lunch spot.", ["s3"], ["s3:0"]),
    ]
    return Benchmark("hand-built", [Conversation("c1", sessions, questions)])


async def _keyword_run():
    return await evaluate(scratch_manager(KeywordSessionRetriever()), _benchmark(), ks=KS)


def test_the_haystack_pairs_each_user_turn_with_the_assistant_turn_after_it():
    conversation = Conversation(
        "c",
        [
            _session("a", "2023-01-01", ("assistant", "Welcome."), ("user", "Hi"), ("user", "I live in Porto."), ("assistant", "Nice!")),
            _session("b", "2023-01-02", ("user", "Bye"), ("assistant", "Ciao"), ("assistant", "Come back.")),
        ],
        [],
    )
    assert haystack_turns(conversation) == [
        HaystackTurn("", "Welcome.", "a", ("a:0",)),
        HaystackTurn("Hi", "", "a", ("a:1",)),
        HaystackTurn("I live in Porto.", "Nice!", "a", ("a:2", "a:3")),
        HaystackTurn("Bye", "Ciao", "b", ("b:0", "b:1")),
        HaystackTurn("", "Come back.", "b", ("b:2",)),
    ]


async def test_keyword_metrics_are_exact_on_a_hand_built_benchmark():
    run = await _keyword_run()
    assert (run.retriever, run.conversations, run.turns) == ("keyword", 1, 4)  # s1: a pair and a lone user turn; s2, s3: a pair each
    by_id = {row["question_id"]: row for row in run.questions}
    q1 = by_id["q1"]
    assert q1["first_gold_rank"] == 2 and q1["mrr"] == 0.5 and q1["returned"] == 2
    assert (q1["hit_at_1"], q1["hit_at_5"], q1["session_recall_at_1"], q1["session_recall_at_5"]) == (0.0, 1.0, 0.0, 1.0)
    assert (q1["turn_recall_at_1"], q1["turn_recall_at_5"]) == (0.0, 1.0)
    q2 = by_id["q2"]
    assert q2["returned"] == 3 and q2["first_gold_rank"] == 2 and q2["mrr"] == 0.5
    assert (q2["session_recall_at_1"], q2["turn_recall_at_1"], q2["hit_at_1"]) == (0.5, 0.0, 0.0)  # the s1 pair holds s1:0, s1:1 only
    assert (q2["session_recall_at_5"], q2["turn_recall_at_5"], q2["hit_at_5"]) == (1.0, 1.0, 1.0)
    q3 = by_id["q3"]
    assert q3["no_result"] and q3["returned"] == 0 and q3["mrr"] is None and q3["session_recall_at_5"] is None
    q4 = by_id["q4"]
    assert q4["mrr"] == 1.0 and q4["hit_at_1"] == 1.0 and q4["top_score"] == 1.0
    assert all(row["latency_ms"] > 0 for row in run.questions)
    assert len(run.first_query_s) == 1 and run.cold_start_s > 0 and run.write_s > 0


async def test_summary_rows_average_answerable_questions_and_report_abstention_apart():
    rows = summary_rows(await _keyword_run())
    assert [row["category"] for row in rows] == ["single_session_fact", "multi_session_aggregation", "preference", "abstention", "all"]
    overall = rows[-1]
    assert (overall["questions"], overall["answerable"], overall["abstention_questions"]) == (4, 3, 1)
    assert overall["session_recall_at_1"] == pytest.approx(0.5)  # (0 + 0.5 + 1) / 3
    assert overall["session_recall_at_5"] == 1.0
    assert overall["turn_recall_at_1"] == pytest.approx(1 / 3) and overall["hit_at_1"] == pytest.approx(1 / 3)
    assert overall["mrr"] == pytest.approx(2 / 3)  # (0.5 + 0.5 + 1) / 3
    assert overall["no_result_rate"] == 1.0
    abstention = rows[3]
    assert abstention["mrr"] is None and abstention["session_recall_at_5"] is None and abstention["no_result_rate"] == 1.0
    assert rows[0]["no_result_rate"] is None  # no abstention question in that category
    assert overall["turns"] == 4 and overall["ingest_ms_per_turn"] >= overall["write_ms_per_turn"] > 0
    assert set(overall) == set(summary_columns(KS))


def test_question_metrics_without_gold_turns_leave_turn_metrics_out():
    question = _question("q", "single_session_fact", "Where?", ["s1"], [])
    ranked = [HaystackTurn("x", "", "s2", ("s2:0",)), HaystackTurn("y", "", "s1", ("s1:0",))]
    metrics = question_metrics(question, ranked, (1, 2))
    assert (metrics["session_recall_at_1"], metrics["session_recall_at_2"]) == (0.0, 1.0)
    assert metrics["turn_recall_at_2"] is None and metrics["hit_at_2"] is None and metrics["mrr"] is None
    with pytest.raises(ValidationError):
        question_metrics(question, ranked, ())


async def test_limit_keeps_the_first_questions_and_their_conversations():
    bench = synthetic(size=12)  # two conversations of six questions
    run = await evaluate(scratch_manager(KeywordSessionRetriever()), bench, ks=(5,), limit=8)
    assert len(run.questions) == 8 and run.conversations == 2
    assert [row["question_id"] for row in run.questions] == [q.question_id for _, q in bench.questions()][:8]


async def test_frames_quality_runs_the_stacks_retriever_with_typed_columns(tmp_path):
    from memlab import MemoryStack, StackConfig
    from memlab.config import EmbeddingConfig, SessionConfig

    config = StackConfig(data_root=tmp_path, session=SessionConfig(retriever="bm25"), embedding=EmbeddingConfig(model="memlab/hashing"))
    async with MemoryStack.from_config(config) as stack:
        frame = await stack.frames.quality(_benchmark(), k=KS)
        questions = await stack.frames.quality(_benchmark(), k=KS, questions=True)
        assert await stack.session.get_session(session_id="quality:c1") == []  # the stack's own cache is untouched
    assert list(frame.columns) == list(summary_columns(KS))
    assert {column: str(dtype) for column, dtype in frame.dtypes.items()} == summary_columns(KS)
    assert list(frame["retriever"]) == ["bm25"] * 5 and frame["category"].iloc[-1] == "all"
    assert frame["mrr"].isna().tolist() == [False, False, False, True, False]  # abstention has no MRR
    assert {column: str(dtype) for column, dtype in questions.dtypes.items()} == question_columns(KS)
    assert len(questions) == 4 and questions["first_gold_rank"].isna().sum() == 1


# -- the command ----------------------------------------------------------------------------------


def _longmemeval(tmp_path):
    items = [
        {
            "question_id": "q-ku",
            "question_type": "knowledge-update",
            "question": "Where do I live now?",
            "answer": "Porto",
            "haystack_session_ids": ["a2", "a1"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/04/02 (Sun) 18:30"],
            "haystack_sessions": [
                [{"role": "user", "content": "We moved to Porto, I live there now.", "has_answer": True}, {"role": "assistant", "content": "Nice!"}],
                [{"role": "user", "content": "Hi"}, {"role": "user", "content": "I live in Lisbon.", "has_answer": True}],
            ],
            "answer_session_ids": ["a1", "a2"],
        },
        {
            "question_id": "q-ms_abs",
            "question_type": "multi-session",
            "question": "How many boats do I own?",
            "answer": 0,
            "haystack_session_ids": ["s1"],
            "haystack_dates": ["2023/01/01 (Sun) 08:00"],
            "haystack_sessions": [[{"role": "user", "content": "I like trains."}]],
            "answer_session_ids": ["s1"],
        },
    ]
    path = tmp_path / "longmemeval.json"
    path.write_text(json.dumps(items))
    return path


def _locomo(tmp_path):
    samples = [
        {
            "sample_id": "conv-1",
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
                    {"speaker": "Melanie", "dia_id": "D1:2", "text": "That's great!"},
                    {"speaker": "Caroline", "dia_id": "D1:3", "text": "I paint on weekends."},
                ],
                "session_2_date_time": "10:31 am on 13 October, 2023",
                "session_2": [{"speaker": "Melanie", "dia_id": "D2:1", "text": "I ran a charity race."}],
            },
            "qa": [
                {"question": "When did Melanie run a charity race?", "answer": "October 2023", "evidence": ["D2:1"], "category": 2},
                {"question": "What does Caroline paint on weekends?", "answer": "art", "evidence": ["D1:3"], "category": 4},
                {"question": "What did Melanie paint?", "adversarial_answer": "a sunset", "evidence": ["D1:2"], "category": 5},
            ],
        }
    ]
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(samples))
    return path


@pytest.mark.parametrize("kind", ["longmemeval", "locomo"])
async def test_message_turns_write_one_memlab_turn_per_message_and_keep_the_gold_evidence(kind, tmp_path):
    from memlab.bench.conversations import load_locomo, load_longmemeval

    path = _longmemeval(tmp_path) if kind == "longmemeval" else _locomo(tmp_path)
    load = load_longmemeval if kind == "longmemeval" else load_locomo
    runs = {}
    for unit in ("exchange", "message"):
        bench = load(path, turns=unit)
        conversation = bench.conversations[0]
        held = [turn_id for turn in haystack_turns(conversation, unit) for turn_id in turn.turn_ids]
        assert held == [turn.turn_id for turn in conversation.turns()]  # every message exactly once, in order
        runs[unit] = await evaluate(scratch_manager(KeywordSessionRetriever()), bench, ks=(1, 5))
    messages = sum(len(list(c.turns())) for c in load(path).conversations)
    assert runs["message"].turns == messages > runs["exchange"].turns
    by_unit = {unit: {row["question_id"]: row for row in run.questions} for unit, run in runs.items()}
    if kind == "longmemeval":
        # gold a1:1 ("I live in Lisbon.") and a2:0 ("We moved to Porto, I live there now."), whose exchange holds a2:1 too
        exchange, message = by_unit["exchange"]["q-ku"], by_unit["message"]["q-ku"]
        assert (exchange["turn_recall_at_1"], exchange["turn_recall_at_5"], exchange["returned"]) == (0.5, 1.0, 2)
        assert (message["turn_recall_at_1"], message["turn_recall_at_5"], message["returned"]) == (0.5, 1.0, 2)
        assert exchange["session_recall_at_5"] == message["session_recall_at_5"] == 1.0
    else:
        for unit in ("exchange", "message"):
            rows = by_unit[unit]
            assert rows["conv-1:q1"]["first_gold_rank"] == 1 and rows["conv-1:q0"]["first_gold_rank"] == 1, unit  # D1:3, D2:1
    written = haystack_turns(load(path).conversations[0], "message")
    if kind == "longmemeval":
        assert written[-1] == HaystackTurn("", "Nice!", "a2", ("a2:1",))  # an assistant message: the answer side
        assert written[-2] == HaystackTurn("We moved to Porto, I live there now.", "", "a2", ("a2:0",))
    else:
        assert written[1] == HaystackTurn("", "Melanie: That's great!", "session_1", ("D1:2",))  # speaker_b: the assistant side
    with pytest.raises(ValidationError, match="turns must be"):
        haystack_turns(load(path).conversations[0], "round")  # type: ignore[arg-type]


def test_cli_runs_the_synthetic_benchmark_and_writes_json(tmp_path, capsys):
    out = tmp_path / "quality.json"
    argv = ["bench", "quality", "--dataset", "synthetic:3", "--retrievers", "keyword,bm25", "--limit", "12", "--k", "5,10"]
    assert main([*argv, "--scale", "60", "--scale-queries", "5", "--quiet", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "best session recall@5" in table and ("PASS" in table or "MISS" in table)
    document = json.loads(out.read_text())
    overall = [row for row in document["rows"] if row["category"] == "all"]
    assert [row["retriever"] for row in overall] == ["keyword", "bm25"] and all(row["questions"] == 12 for row in overall)
    assert len(document["questions"]) == 24 and document["spec"]["benchmark"] == "synthetic-seed3-600"
    assert [(row["retriever"], row["turns"], row["queries"]) for row in document["scale"]] == [("keyword", 60, 5), ("bm25", 60, 5)]
    assert all(row["passed"] is None for row in document["scale"])  # the latency targets are for 10,000 turns
    assert all(isinstance(row["passed"], bool) for row in document["targets"])  # synthetic: judged


@pytest.mark.parametrize("kind", ["longmemeval", "locomo"])
def test_cli_runs_the_public_set_loaders(kind, tmp_path, capsys):
    path = _longmemeval(tmp_path) if kind == "longmemeval" else _locomo(tmp_path)
    assert main(["bench", "quality", "--dataset", f"{kind}:{path}", "--retrievers", "keyword,bm25", "--scale", "0", "--quiet", "--json", "-"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert "retriever" in captured.err  # the table went to stderr
    categories = {row["category"] for row in document["rows"]}
    if kind == "longmemeval":
        assert categories == {"knowledge_update", "abstention", "all"}
        ku = next(row for row in document["questions"] if row["question_id"] == "q-ku" and row["retriever"] == "keyword")
        assert ku["session_recall_at_5"] == 1.0 and ku["turn_recall_at_5"] == 1.0  # both "live" turns found
    else:
        assert categories == {"temporal", "single_session_fact", "abstention", "all"}
    assert document["scale"] == [] and all(row["passed"] is None for row in document["targets"])  # not synthetic: not judged


@pytest.mark.parametrize(
    "argv",
    [
        ["--dataset", "nosuch"],
        ["--dataset", "synthetic:abc"],
        ["--dataset", "longmemeval:"],
        ["--dataset", "locomo:/no/such/locomo10.json"],
        ["--retrievers", "keyword,nosuch"],
        ["--retrievers", "keyword+nosuch"],
        ["--retrievers", "keyword+none"],
        ["--k", "0"],
        ["--k", "five"],
    ],
    ids=["unknown", "bad-seed", "no-path", "missing-file", "retriever", "reranker", "reranker-none", "k-zero", "k-word"],
)
def test_bad_values_exit_2(argv, capsys):
    assert main(["bench", "quality", *argv, "--scale", "0", "--limit", "1", "--quiet"]) == 2
    assert capsys.readouterr().err.startswith("memlab: error:")


def test_cli_compares_a_retriever_with_and_without_a_reranker(capsys):
    argv = ["bench", "quality", "--retrievers", "bm25,bm25+mmr", "--limit", "24", "--k", "5", "--scale", "0", "--resamples", "200"]
    assert main([*argv, "--quiet", "--json", "-"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert [row["retriever"] for row in document["rows"] if row["category"] == "all"] == ["bm25", "bm25+mmr"]
    assert {(row["a"], row["b"]) for row in document["comparisons"]} == {("bm25", "bm25+mmr")}
    assert "bm25 vs bm25+mmr" in captured.err and "200 resamples" in captured.err


def test_load_dataset_and_the_scale_haystack():
    assert load_dataset("synthetic:5").name == "synthetic-seed5-600"
    with pytest.raises(UsageError, match="synthetic\\[:SEED\\[:SIZE\\]\\]"):
        load_dataset("lme:x")
    exchanges, questions = scale_haystack(1500)
    assert len(exchanges) == 1500 and questions
    more, _ = scale_haystack(8000)  # past one default benchmark's exchanges: a larger size is generated
    assert len(more) == 8000


async def test_run_bench_quality_result_converts_to_typed_frames():
    spec = QualityBenchSpec(retrievers=("keyword",), ks=(5,), scale=0)
    result = await run_bench_quality(spec, benchmark=_benchmark())
    frame = to_frame(result)
    assert str(frame["session_recall_at_5"].dtype) == "Float64" and str(frame["questions"].dtype) == "Int64"
    assert len(to_frame(result, questions=True)) == 4
    assert "hand-built" in format_quality_table(result)
    assert [row["passed"] for row in result["targets"]] == [None, None]  # not synthetic: listed, not judged


# -- intervals and paired comparisons (issue 26 item 4) -------------------------------------------


async def test_every_summary_metric_carries_its_bootstrap_interval():
    run = await _keyword_run()
    rows = summary_rows(run, resamples=200, seed=3)
    assert rows == summary_rows(run, resamples=200, seed=3)  # seeded
    overall = rows[-1]
    for name in ("session_recall_at_1", "session_recall_at_5", "turn_recall_at_1", "hit_at_1", "mrr", "no_result_rate"):
        assert overall[f"{name}_lo"] <= overall[name] <= overall[f"{name}_hi"], name
    assert (overall["session_recall_at_1_lo"], overall["session_recall_at_1_hi"]) != (0.5, 0.5)  # three questions: 0, 0.5, 1
    assert overall["session_recall_at_5_lo"] == overall["session_recall_at_5_hi"] == 1.0  # every question 1.0
    assert overall["resamples"] == 200
    abstention = rows[3]
    assert abstention["mrr_lo"] is None and abstention["no_result_rate_lo"] == 1.0
    none = summary_rows(run, resamples=0)[-1]
    assert none["mrr"] == overall["mrr"] and none["mrr_lo"] is None and none["resamples"] == 0
    with pytest.raises(ValidationError, match="resamples"):
        summary_rows(run, resamples=-1)


async def test_paired_comparisons_pair_the_same_questions_and_say_which_is_better():
    keyword = await _keyword_run()
    same = await evaluate(scratch_manager(KeywordSessionRetriever()), _benchmark(), ks=KS)
    twin = [{**row, "retriever": "keyword-again"} for row in same.questions]
    rows = paired_comparisons(keyword.questions + twin, KS, resamples=100)
    assert {(row["a"], row["b"]) for row in rows} == {("keyword", "keyword-again")}
    assert [row["metric"] for row in rows] == [
        "session_recall_at_1", "session_recall_at_5", "turn_recall_at_1", "turn_recall_at_5", "hit_at_1", "hit_at_5", "mrr", "no_result_rate",
    ]
    for row in rows:
        assert row["difference"] == 0.0 and row["p_value"] == 1.0 and row["verdict"] == "no difference", row
        assert row["test"] == ("mcnemar" if row["metric"].startswith("hit") or row["metric"] == "no_result_rate" else "bootstrap")
        assert set(row) == set(COMPARISON_COLUMNS)
    assert paired_comparisons(keyword.questions + twin, KS, resamples=0) == []
    # a clearly better retriever on many questions: every answerable question hit at 1 vs missed
    better = [{**row, "question_id": f"{row['question_id']}-{i}", "hit_at_1": 1.0} for i in range(4) for row in keyword.questions]
    worse = [{**row, "retriever": "worse", "hit_at_1": 0.0 if row["hit_at_1"] is not None else None} for row in better]
    [hit] = [row for row in paired_comparisons(better + worse, KS, resamples=100) if row["metric"] == "hit_at_1"]
    assert hit["verdict"] == "better" and hit["p_value"] < 0.05 and hit["difference"] == 1.0 and (hit["a_only"], hit["b_only"]) == (12, 0)
    line = comparison_line({**hit, "a": hit["b"], "b": hit["a"], "difference": -1.0, "difference_lo": -1.0, "difference_hi": -1.0, "verdict": "worse"})
    assert line.startswith("keyword > worse on hand-built: hit@1 +1.000 [+1.000, +1.000], p < 0.001 (exact McNemar, 12 questions)")


async def test_the_table_prints_intervals_and_the_paired_comparison_line():
    spec = QualityBenchSpec(retrievers=("keyword", "bm25"), ks=(5,), scale=0, resamples=100)
    result = await run_bench_quality(spec, benchmark=_benchmark())
    table = format_quality_table(result)
    overall = next(row for row in result["rows"] if row["retriever"] == "keyword" and row["category"] == "all")
    assert f"{overall['mrr']:.3f} [{overall['mrr_lo']:.2f}, {overall['mrr_hi']:.2f}]" in table
    assert "paired (same questions)" in table and "keyword vs bm25" in table
    assert any(line.startswith(("keyword ~ bm25 on hand-built: session recall@5", "bm25 ~ keyword on hand-built: session recall@5 +", "keyword > bm25", "bm25 > keyword"))
               for line in table.splitlines())
    frame = to_frame(result, comparisons=True)
    assert list(frame.columns) == list(COMPARISON_COLUMNS) and len(frame) == 5 and str(frame["p_value"].dtype) == "Float64"
    target = result["targets"][0]
    assert target["value_lo"] <= target["value"] <= target["value_hi"]
    quiet = format_quality_table(await run_bench_quality(QualityBenchSpec(retrievers=("keyword",), ks=(5,), scale=0, resamples=0), benchmark=_benchmark()))
    assert "[" not in quiet.split("\n\n")[0] and "paired" not in quiet
    with pytest.raises(UsageError, match="--resamples"):
        await run_bench_quality(QualityBenchSpec(retrievers=("keyword",), scale=0, resamples=-1), benchmark=_benchmark())


async def test_compare_retrievers_runs_objects_under_their_names_and_pairs_them():
    bm25 = BM25SessionRetriever()
    result = await compare_retrievers(
        _benchmark(), {"kw": KeywordSessionRetriever(), "bm25": bm25, "bm25+mmr": (bm25, MMRSessionReranker())}, ks=KS, resamples=100
    )
    assert result["spec"]["retrievers"] == ["kw", "bm25", "bm25+mmr"] and result["spec"]["benchmark"] == "hand-built"
    assert [row["retriever"] for row in result["rows"] if row["category"] == "all"] == ["kw", "bm25", "bm25+mmr"]
    keyword = summary_rows(await _keyword_run(), resamples=100)
    measured = [name for name in keyword[0] if "_ms" not in name and not name.endswith("_s")]  # everything but the timings
    assert [{name: row[name] for name in measured} for row in result["rows"] if row["retriever"] == "kw"] == [
        {name: row[name] for name in measured} | {"retriever": "kw"} for row in keyword
    ]
    assert {(row["a"], row["b"]) for row in result["comparisons"]} == {("kw", "bm25"), ("kw", "bm25+mmr"), ("bm25", "bm25+mmr")}
    assert result["overlap"][0]["dataset"] == "hand-built"
    assert len(to_frame(result)) == 15 and len(to_frame(result, questions=True)) == 12
    assert list(to_frame(result, comparisons=True)["a"].unique()) == ["kw", "bm25"]
    for bad, match in (({}, "at least one"), ({" ": bm25}, "non-blank"), ({"x": "bm25"}, "SessionRetriever"),
                       ({"x": (bm25, "mmr")}, "SessionRetriever")):
        with pytest.raises(ValidationError, match=match):
            await compare_retrievers(_benchmark(), bad)
    with pytest.raises(ValidationError, match="resamples"):
        await compare_retrievers(_benchmark(), {"x": bm25}, resamples=-1)
    with pytest.raises(ValidationError, match="label"):
        await evaluate(scratch_manager(bm25), _benchmark(), label="")


async def test_frames_quality_carries_the_intervals(tmp_path):
    from memlab import MemoryStack, StackConfig
    from memlab.config import SessionConfig

    config = StackConfig(data_root=tmp_path, session=SessionConfig(retriever="bm25"))
    async with MemoryStack.from_config(config) as stack:
        frame = await stack.frames.quality(_benchmark(), k=KS, resamples=300, seed=1)
        plain = await stack.frames.quality(_benchmark(), k=KS, resamples=0)
    overall = frame[frame["category"] == "all"].iloc[0]
    assert overall["mrr_lo"] <= overall["mrr"] <= overall["mrr_hi"] and overall["resamples"] == 300
    assert str(frame["mrr_lo"].dtype) == "Float64" and plain["mrr_lo"].isna().all() and (plain["resamples"] == 0).all()
    direct = summary_rows(await evaluate(scratch_manager(BM25SessionRetriever()), _benchmark(), ks=KS), resamples=300, seed=1)[-1]
    assert overall["mrr_hi"] == pytest.approx(direct["mrr_hi"])
