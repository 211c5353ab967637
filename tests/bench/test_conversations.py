"""``memlab.bench.conversations``: the model, the seeded generator, and the LongMemEval / LoCoMo loaders."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from datetime import date

import pytest

from memlab import ValidationError
from memlab.bench import conversations
from memlab.bench.conversations import (
    ABSTENTION_ANSWER,
    CATEGORIES,
    DEFAULT_SIZE,
    FRAME_COLUMNS,
    Benchmark,
    Conversation,
    Question,
    Session,
    Turn,
    category_counts,
    load_locomo,
    load_longmemeval,
    synthetic,
)
from memlab.text import content_words

#: The paraphrase bar: the mean share of a question's content words found in its evidence turns.
#: Questions have 2-4 content words, so 0.10 means fewer than one question word in every
#: three questions reaches the evidence: a retriever that ranks turns by shared words has
#: (almost) nothing to go on. Measured at seed 0, default size: 0.019.
MAX_PARAPHRASE_OVERLAP = 0.10


@pytest.fixture(scope="module")
def bench() -> Benchmark:
    return synthetic()


def _digest(benchmark: Benchmark) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(benchmark), sort_keys=True).encode()).hexdigest()


# -- the generator ----------------------------------------------------------------------------------


def test_same_seed_same_benchmark_other_seed_another() -> None:
    assert synthetic(seed=7, size=60) == synthetic(seed=7, size=60)
    assert synthetic(seed=7, size=60) != synthetic(seed=8, size=60)


def test_deterministic_across_processes_and_import_memlab_stays_light() -> None:
    code = (
        "import sys, memlab\n"
        "assert 'memlab.bench.conversations' not in sys.modules, 'import memlab loaded the benchmark'\n"
        "import dataclasses, hashlib, json\n"
        "from memlab.bench.conversations import synthetic\n"
        "b = synthetic(seed=5, size=30)\n"
        "print(hashlib.sha256(json.dumps(dataclasses.asdict(b), sort_keys=True).encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == _digest(synthetic(seed=5, size=30))


def test_default_size_and_documented_counts(bench: Benchmark) -> None:
    assert len(bench) == DEFAULT_SIZE >= 500
    assert bench.summary() == {category: DEFAULT_SIZE // 6 for category in CATEGORIES} == category_counts(DEFAULT_SIZE)
    assert bench.categories() == list(CATEGORIES)
    assert len(bench.conversations) == DEFAULT_SIZE // 6
    assert all([q.category for q in c.questions] == list(CATEGORIES) for c in bench.conversations)


def test_integer_size_splits_the_remainder_in_category_order() -> None:
    small = synthetic(seed=1, size=15)
    assert len(small) == 15
    assert small.summary() == category_counts(15) == {
        "single_session_fact": 3, "multi_session_aggregation": 3, "knowledge_update": 3,
        "temporal": 2, "preference": 2, "abstention": 2,
    }
    assert list(synthetic(seed=1, size=2).summary()) == ["single_session_fact", "multi_session_aggregation"]


@pytest.mark.parametrize("size", [0, -3, "big", True, 2.5])
def test_bad_size_is_a_validation_error(size) -> None:
    with pytest.raises(ValidationError, match="size"):
        synthetic(size=size)


def test_haystack_layout(bench: Benchmark) -> None:
    for conversation in bench.conversations:
        assert 12 <= len(conversation.sessions) <= 20
        dates = [session.date for session in conversation.sessions]
        assert dates == sorted(dates) and len({d[:10] for d in dates}) == len(dates)
        evidence_sessions = {s for q in conversation.questions for s in q.evidence_session_ids}
        assert len(evidence_sessions) < len(conversation.sessions) / 2, "most sessions are distractors"
        assert all(turn.time >= conversation.session(turn.session_id).date for turn in conversation.turns())
        assert all(q.question_date > dates[-1] for q in conversation.questions)


def test_evidence_ids_are_valid_user_turns_marked_has_answer(bench: Benchmark) -> None:
    for conversation in bench.conversations:
        evidence = set()
        for question in conversation.questions:
            turns = conversation.evidence_turns(question)
            assert [t.session_id for t in turns] == question.evidence_session_ids  # one evidence turn per session
            assert all(turn.role == "user" and turn.has_answer for turn in turns)
            evidence.update(question.evidence_turn_ids)
        assert {t.turn_id for t in conversation.turns() if t.has_answer} == evidence


def test_evidence_counts_per_category(bench: Benchmark) -> None:
    sizes: dict[str, set[int]] = {}
    for _, question in bench.questions():
        sizes.setdefault(question.category, set()).add(len(question.evidence_session_ids))
    assert sizes == {
        "single_session_fact": {1}, "multi_session_aggregation": {2, 3}, "knowledge_update": {2},
        "temporal": {1, 2}, "preference": {1}, "abstention": {0},
    }


def test_abstention_questions_have_no_evidence(bench: Benchmark) -> None:
    abstentions = [q for _, q in bench.questions() if q.category == "abstention"]
    assert abstentions and all(q.abstention for q in abstentions)
    assert all(q.evidence_session_ids == [] == q.evidence_turn_ids and q.answer == ABSTENTION_ANSWER for q in abstentions)
    assert not any(q.abstention for _, q in bench.questions() if q.category != "abstention")


def test_paraphrase_overlap_is_low_and_decoys_win_on_shared_words(bench: Benchmark) -> None:
    shares = []
    decoy_wins = 0
    for conversation, question in bench.questions():
        if question.abstention:
            continue
        words = content_words(question.question)
        assert words, question.question
        evidence = set().union(*(content_words(turn.text) for turn in conversation.evidence_turns(question)))
        shares.append(len(words & evidence) / len(words))
        best = max(conversation.turns(), key=lambda turn: len(words & content_words(turn.text)))
        decoy_wins += best.turn_id not in question.evidence_turn_ids
    overlap = sum(shares) / len(shares)
    print(f"mean paraphrase overlap {overlap:.3f}; top word-overlap turn is not evidence for {decoy_wins}/{len(shares)}")
    assert overlap < MAX_PARAPHRASE_OVERLAP
    assert decoy_wins / len(shares) > 0.8


def _core(answer: str) -> str:
    return answer.removeprefix("$").removesuffix(" a month")


def test_knowledge_update_the_latest_value_wins(bench: Benchmark) -> None:
    updates = [(c, q) for c, q in bench.questions() if q.category == "knowledge_update"]
    assert len(updates) == DEFAULT_SIZE // 6
    for conversation, question in updates:
        old, new = conversation.evidence_turns(question)
        assert conversation.session(old.session_id).date < conversation.session(new.session_id).date
        assert question.evidence_session_ids == [old.session_id, new.session_id]  # superseded first, latest last
        assert _core(question.answer) in new.text and _core(question.answer) not in old.text


def test_temporal_answers_follow_the_session_dates(bench: Benchmark) -> None:
    kinds = set()
    for conversation, question in bench.questions():
        if question.category != "temporal":
            continue
        days = [date.fromisoformat(conversation.session(s).date[:10]) for s in question.evidence_session_ids]
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", question.answer):
            kinds.add("when")
            assert [question.answer] == [d.isoformat() for d in days]
        elif re.fullmatch(r"\d+ days", question.answer):
            kinds.add("gap")
            assert question.answer == f"{(days[1] - days[0]).days} days"
        else:
            kinds.add("order")
            assert len(days) == 2 and question.answer in question.question
    assert kinds == {"when", "gap", "order"}


def test_multi_session_totals_are_numbers(bench: Benchmark) -> None:
    for _, question in bench.questions():
        if question.category == "multi_session_aggregation":
            assert re.fullmatch(r"\$?\d+( miles| hours)?", question.answer), question.answer


def test_to_frame_columns_and_dtypes() -> None:
    small = synthetic(seed=2, size=12)
    frame = small.to_frame()
    assert list(frame.columns) == list(FRAME_COLUMNS)
    assert {name: str(dtype) for name, dtype in frame.dtypes.items()} == FRAME_COLUMNS
    assert len(frame) == len(small) == 12
    row = frame.iloc[1]
    conversation, question = list(small.questions())[1]
    assert row["question_id"] == question.question_id and row["conversation_id"] == conversation.conversation_id
    assert row["evidence_turn_ids"] == question.evidence_turn_ids and row["n_evidence_turns"] == len(question.evidence_turn_ids)
    assert frame.groupby("category").size().to_dict() == small.summary()
    assert frame["abstention"].sum() == small.summary()["abstention"]


def test_public_names() -> None:
    public = {name for name in vars(conversations) if not name.startswith("_")} - {"annotations", "os"}
    assert set(conversations.__all__) == public


# -- the model ---------------------------------------------------------------------------------


def _turn(session: str, index: int, role: str = "user", **kwargs) -> Turn:
    return Turn(f"{session}:{index}", session, role, f"text {index}", **kwargs)  # type: ignore[arg-type]


def _conversation(*questions: Question) -> Conversation:
    sessions = [
        Session("a", "2024-01-01T10:00:00", [_turn("a", 0), _turn("a", 1, "assistant")]),
        Session("b", "2024-01-03T10:00:00", [_turn("b", 0), _turn("b", 1, "assistant")]),
    ]
    return Conversation("c1", sessions, list(questions))


def _question(sessions: list[str], turns: list[str], **kwargs) -> Question:
    return Question("q1", "single_session_fact", "Where?", "Here", sessions, turns, **kwargs)


def test_model_accepts_valid_evidence_and_rejects_unknown_ids() -> None:
    conversation = _conversation(_question(["a"], ["a:0"]))
    assert conversation.turn("a:0").text == "text 0" and [t.turn_id for t in conversation.evidence_turns(conversation.questions[0])] == ["a:0"]
    with pytest.raises(ValidationError, match="'zz:9'"):
        _conversation(_question(["a"], ["zz:9"]))
    with pytest.raises(ValidationError, match="evidence session id 'nope'"):
        _conversation(_question(["nope"], []))
    with pytest.raises(ValidationError, match="'b:0' lies in session 'b'"):
        _conversation(_question(["a"], ["b:0"]))
    with pytest.raises(ValidationError, match="no turn 'x'"):
        conversation.turn("x")


def test_model_rules() -> None:
    with pytest.raises(ValidationError, match="abstention question has no evidence"):
        _question(["a"], [], abstention=True)
    with pytest.raises(ValidationError, match="role"):
        _turn("a", 0, "system")
    with pytest.raises(ValidationError, match="ISO-8601"):
        _turn("a", 0, time="yesterday")
    with pytest.raises(ValidationError, match="names session"):
        Session("a", "", [_turn("b", 0)])
    with pytest.raises(ValidationError, match="not chronological"):
        Conversation("c", [Session("a", "2024-02-01", []), Session("b", "2024-01-01", [])], [])
    with pytest.raises(ValidationError, match="turn id 'a:0' occurs twice"):
        Conversation("c", [Session("a", "", [_turn("a", 0), _turn("a", 0)])], [])
    with pytest.raises(ValidationError, match="lists 'a' twice"):
        _question(["a", "a"], [])
    with pytest.raises(ValidationError, match="conversation id 'c1' occurs twice"):
        Benchmark("b", [_conversation(), _conversation()])


# -- LongMemEval ---------------------------------------------------------------------------------


def _longmemeval_items() -> list[dict]:
    return [
        {
            "question_id": "q-ku",
            "question_type": "knowledge-update",
            "question": "Where do I live now?",
            "answer": "Porto",
            "question_date": "2023/06/01 (Thu) 09:00",
            # unsorted, as in longmemeval_oracle.json
            "haystack_session_ids": ["answer_2", "noise_1", "answer_1"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/01 (Mon) 10:00", "2023/04/02 (Sun) 18:30"],
            "haystack_sessions": [
                [{"role": "user", "content": "We moved to Porto.", "has_answer": True}, {"role": "assistant", "content": "Nice!"}],
                [{"role": "user", "content": "Tell me a joke.", "has_answer": True}, {"role": "assistant", "content": "Knock knock.", "has_answer": False}],
                [{"role": "user", "content": "Hi"}, {"role": "user", "content": "I live in Lisbon.", "has_answer": True}],
            ],
            "answer_session_ids": ["answer_1", "answer_2"],
        },
        {
            "question_id": "q-ms_abs",
            "question_type": "multi-session",
            "question": "How many boats do I own?",
            "answer": 0,
            "haystack_session_ids": ["s1"],
            "haystack_dates": ["2023/01/01 (Sun) 08:00"],
            "haystack_sessions": [[{"role": "user", "content": "I like boats.", "has_answer": True}]],
            "answer_session_ids": ["s1"],
        },
        {
            "question_id": "q-pref",
            "question_type": "single-session-preference",
            "question": "Suggest a film.",
            "answer": "A thriller.",
            "question_date": None,
            "haystack_session_ids": ["p1"],
            "haystack_dates": ["not a date"],
            "haystack_sessions": [[{"role": "user", "content": "I love thrillers.", "has_answer": True}]],
            "answer_session_ids": ["p1"],
        },
    ]


def _write(tmp_path, data, name="data.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_load_longmemeval(tmp_path) -> None:
    bench = load_longmemeval(_write(tmp_path, _longmemeval_items()))
    assert bench.name == "longmemeval:data.json" and len(bench) == 3
    assert bench.summary() == {"knowledge_update": 1, "preference": 1, "abstention": 1}
    ku, abstain, pref = bench.conversations
    assert [s.session_id for s in ku.sessions] == ["answer_1", "noise_1", "answer_2"]  # sorted by date
    assert ku.sessions[0].date == "2023-04-02T18:30:00" and ku.sessions[0].turns[1].time == "2023-04-02T18:30:00"
    (question,) = ku.questions
    assert question.question_date == "2023-06-01T09:00:00" and question.answer == "Porto"
    assert question.evidence_session_ids == ["answer_1", "answer_2"]
    assert question.evidence_turn_ids == ["answer_1:1", "answer_2:0"]  # has_answer turns of answer sessions, in time order
    assert ku.turn("answer_2:0").has_answer and not ku.turn("noise_1:0").has_answer  # outside the answer sessions
    (question,) = abstain.questions
    assert question.abstention and question.category == "abstention" and question.evidence_turn_ids == [] and question.answer == "0"
    assert not abstain.turn("s1:0").has_answer  # has_answer marks evidence, and an abstention question has none
    assert pref.sessions[0].date == "not a date" and pref.sessions[0].turns[0].time == ""
    assert pref.questions[0].question_date == "" and pref.questions[0].evidence_turn_ids == ["p1:0"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda items: items[0].pop("haystack_dates"), r"item 0 \(question_id 'q-ku'\): missing field 'haystack_dates'"),
        (lambda items: items[1].pop("question_id"), r"item 1: missing field 'question_id'"),
        (lambda items: items[0].update(question_type="chit-chat"), r"item 0 .*unknown question_type 'chit-chat'"),
        (lambda items: items[0]["haystack_sessions"][2][1].update(role="system"), r"haystack_sessions\[2\]\[1\]: field 'role'"),
        (lambda items: items[0]["haystack_sessions"][0][0].pop("content"), r"haystack_sessions\[0\]\[0\]: missing field 'content'"),
        (lambda items: items[0]["haystack_sessions"][0][0].update(has_answer="yes"), r"field 'has_answer' must be bool"),
        (lambda items: items[0]["haystack_dates"].pop(), r"differ in length \(3, 2, 3\)"),
        (lambda items: items[0].update(answer_session_ids=["ghost"]), r"item 0 .*evidence session id 'ghost'"),
        (lambda items: items[0].update(haystack_sessions="nope"), r"field 'haystack_sessions' must be list"),
        (lambda items: items.append(["not", "an", "object"]), r"item 3: expected an object, got list"),
        (lambda items: items[0].update(question=None), r"item 0 .*field 'question' must be str, got NoneType"),
    ],
)
def test_load_longmemeval_wrong_shape(tmp_path, mutate, message) -> None:
    items = _longmemeval_items()
    mutate(items)
    path = _write(tmp_path, items)
    with pytest.raises(ValidationError, match=message) as caught:
        load_longmemeval(path)
    assert str(path) in str(caught.value)


def test_loaders_reject_missing_file_bad_json_and_a_non_list(tmp_path) -> None:
    for load in (load_longmemeval, load_locomo):
        with pytest.raises(ValidationError, match="no such file") as caught:
            load(tmp_path / "absent.json")
        assert "absent.json" in str(caught.value)
        with pytest.raises(ValidationError, match=r"bad\.json: not valid JSON \(line 1"):
            load(_write(tmp_path, "[{", "bad.json"))
        with pytest.raises(ValidationError, match="expected a JSON list .* got dict"):
            load(_write(tmp_path, {"a": 1}, "dict.json"))


@pytest.mark.parametrize("kind", ["longmemeval", "locomo"])
def test_loaders_take_the_turn_unit_and_refuse_another_before_reading(tmp_path, kind) -> None:
    load, data = (load_longmemeval, _longmemeval_items()) if kind == "longmemeval" else (load_locomo, _locomo_samples())
    path = _write(tmp_path, data)
    exchange, message = load(path), load(path, turns="message")
    assert (exchange.turns, message.turns, load(path, turns="exchange").turns) == ("exchange", "message", "exchange")
    assert message.conversations == exchange.conversations  # the model keeps messages; the unit is how they are written
    for bad in ("round", "messages", None, 1):
        with pytest.raises(ValidationError, match=f"turns must be 'exchange' .* or 'message' .*, got {re.escape(repr(bad))}") as caught:
            load(tmp_path / "absent.json", turns=bad)
        assert "no such file" not in str(caught.value)  # checked before the file is read
    with pytest.raises(ValidationError, match="benchmark 'b': turns must be"):
        Benchmark("b", [], turns="pairs")  # type: ignore[arg-type]


# -- LoCoMo ---------------------------------------------------------------------------------------


def _locomo_samples() -> list[dict]:
    return [
        {
            "sample_id": "conv-1",
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
                    {"speaker": "Melanie", "dia_id": "D1:2", "text": "That's great!", "blip_caption": "a photo of a sunset"},
                    {"speaker": "Caroline", "dia_id": "D1:3", "text": "I paint on weekends."},
                ],
                "session_2_date_time": "10:31 am on 13 October, 2023",
                "session_2": [
                    {"speaker": "Melanie", "dia_id": "D2:1", "text": "I ran a charity race."},
                    {"speaker": "Caroline", "dia_id": "D2:2", "text": "Wow."},
                ],
                "session_3_date_time": "9:00 am on 20 October, 2023",
                "session_3": [],
            },
            "qa": [
                {"question": "What does Caroline do?", "answer": "paints and attends a group", "evidence": ["D1:3; D2:01", "(D1:1)"], "category": 1},
                {"question": "When did Melanie run?", "answer": "October 2023", "evidence": ["D2:1"], "category": 2},
                {"question": "Would Caroline like art?", "answer": "Likely yes; she paints", "evidence": ["D1:3"], "category": 3},
                {"question": "What did Melanie share?", "answer": 2022, "evidence": ["D1:2"], "category": 4},
                {"question": "What did Melanie paint?", "adversarial_answer": "a sunset", "evidence": ["D1:2"], "category": 5},
            ],
        }
    ]


def test_load_locomo(tmp_path) -> None:
    bench = load_locomo(_write(tmp_path, _locomo_samples(), "locomo10.json"))
    assert bench.name == "locomo:locomo10.json"
    assert bench.summary() == {
        "single_session_fact": 1, "multi_session_aggregation": 1, "temporal": 1, "abstention": 1, "open_domain": 1,
    }
    (conversation,) = bench.conversations
    assert conversation.conversation_id == "conv-1"
    assert [s.session_id for s in conversation.sessions] == ["session_1", "session_2"]  # the empty session_3 skipped
    assert conversation.sessions[1].date == "2023-10-13T10:31:00" and conversation.turn("D1:1").time == "2023-05-08T13:56:00"
    assert conversation.turn("D1:1").role == "user" and conversation.turn("D2:1").role == "assistant"
    assert conversation.turn("D1:2").text == "Melanie: That's great! [shares a photo of a sunset]"
    multi, temporal, open_domain, single, adversarial = conversation.questions
    assert multi.question_id == "conv-1:q0" and multi.category == "multi_session_aggregation"
    assert multi.evidence_turn_ids == ["D1:1", "D1:3", "D2:1"] and multi.evidence_session_ids == ["session_1", "session_2"]
    assert temporal.category == "temporal" and open_domain.category == "open_domain"
    assert single.category == "single_session_fact" and single.answer == "2022"
    assert adversarial.abstention and adversarial.answer == "" and adversarial.evidence_turn_ids == []
    assert conversation.turn("D1:2").has_answer and not conversation.turn("D2:2").has_answer


def test_load_locomo_unknown_evidence_strict_and_lenient(tmp_path) -> None:
    samples = _locomo_samples()
    samples[0]["qa"][1]["evidence"] = ["D2:1", "D9:9"]
    path = _write(tmp_path, samples)
    with pytest.raises(ValidationError, match=r"item 0 \(sample_id 'conv-1'\), qa\[1\]: evidence id 'D9:9'"):
        load_locomo(path)
    with pytest.warns(UserWarning, match="dropped 1 evidence id.*conv-1:q1 D9:9"):
        bench = load_locomo(path, strict=False)
    assert bench.conversations[0].questions[1].evidence_turn_ids == ["D2:1"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s[0].pop("sample_id"), r"item 0: missing field 'sample_id'"),
        (lambda s: s[0].update(qa={}), r"item 0 \(sample_id 'conv-1'\): field 'qa' must be list"),
        (lambda s: s[0]["conversation"].pop("speaker_a"), r"conversation: missing field 'speaker_a'"),
        (lambda s: s[0]["conversation"]["session_2"][0].pop("dia_id"), r"conversation\.session_2\[0\]: missing field 'dia_id'"),
        (lambda s: s[0]["conversation"].update(session_2="text"), r"conversation\.session_2: expected a list of turns"),
        (lambda s: s[0]["qa"][0].update(category=7), r"qa\[0\]: unknown category 7"),
        (lambda s: s[0]["qa"][0].update(category="1"), r"qa\[0\]: field 'category' must be int"),
        (lambda s: s[0]["qa"][1].pop("answer"), r"qa\[1\]: missing field 'answer'"),
        (lambda s: s[0]["qa"][1].update(evidence=[3]), r"qa\[1\]: evidence\[0\] must be a string"),
        (lambda s: s[0]["conversation"]["session_2"][1].update(dia_id="D1:1"), r"turn id 'D1:1' occurs twice"),
    ],
)
def test_load_locomo_wrong_shape(tmp_path, mutate, message) -> None:
    samples = _locomo_samples()
    mutate(samples)
    path = _write(tmp_path, samples)
    with pytest.raises(ValidationError, match=message) as caught:
        load_locomo(path)
    assert str(path) in str(caught.value)
