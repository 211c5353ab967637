"""``memlab.bench.conversations.overlap`` (questions in the evidence's words), lexical overlap, and the dev / held-out splits."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import statistics
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab import ValidationError
from memlab.bench.conversations import (
    DEV_SHARE,
    PARAPHRASE_SHARE,
    SPLITS,
    Benchmark,
    Conversation,
    Question,
    Session,
    Turn,
    category_counts,
    overlap,
    split_of,
    synthetic,
)

#: what the overlap benchmark promises about its words (module docstring of memlab.bench._overlap):
#: echo questions share at least this mean share of content words with their evidence ...
MIN_ECHO_OVERLAP = 0.4
#: ... and its paraphrases, like the synthetic benchmark's questions, at most this
MAX_PARAPHRASE_OVERLAP = 0.10


@pytest.fixture(scope="module")
def bench() -> Benchmark:
    return overlap()


def _digest(benchmark: Benchmark) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(benchmark), sort_keys=True).encode()).hexdigest()


# -- the overlap benchmark ----------------------------------------------------------------------


def test_same_seed_same_benchmark_other_seed_another_and_across_processes() -> None:
    assert overlap(seed=7, size=60) == overlap(seed=7, size=60)
    assert overlap(seed=7, size=60) != overlap(seed=8, size=60)
    assert overlap(seed=7, size=60, paraphrase=0.5) != overlap(seed=7, size=60)
    code = (
        "import dataclasses, hashlib, json\n"
        "from memlab.bench.conversations import overlap\n"
        "b = overlap(seed=5, size=30)\n"
        "print(hashlib.sha256(json.dumps(dataclasses.asdict(b), sort_keys=True).encode()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "999"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == _digest(overlap(seed=5, size=30))


def test_names_sizes_and_layout_are_the_synthetic_benchmarks(bench: Benchmark) -> None:
    assert bench.name == "overlap-seed0-600" and overlap(size=12, paraphrase=0.5).name == "overlap-seed0-12-p0.5"
    assert bench.summary() == category_counts(600) == synthetic().summary()
    for conversation in bench.conversations:
        assert conversation.conversation_id.startswith("ovl-") and 12 <= len(conversation.sessions) <= 20
        evidence_sessions = {s for q in conversation.questions for s in q.evidence_session_ids}
        assert len(evidence_sessions) < len(conversation.sessions) / 2


@pytest.mark.parametrize("kwargs", [{"size": 0}, {"size": "big"}, {"paraphrase": -0.1}, {"paraphrase": 1.5}, {"paraphrase": True}])
def test_bad_arguments_are_validation_errors(kwargs) -> None:
    with pytest.raises(ValidationError):
        overlap(**kwargs)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(1, 40), share=st.floats(0.0, 1.0))
def test_gold_evidence_and_the_stated_paraphrase_proportion(seed: int, size: int, share: float) -> None:
    bench = overlap(seed, size, share)
    assert len(bench) == size
    answerable = [q for _, q in bench.questions() if not q.abstention]
    paraphrased = sum(bool(q.paraphrase) for q in answerable)
    assert paraphrased == int(share * len(answerable) + 0.5)  # exactly the stated share, rounded half up
    evidence: set[str] = set()
    for conversation, question in bench.questions():
        if question.abstention:
            assert question.paraphrase is None and not question.evidence_turn_ids
            continue
        assert isinstance(question.paraphrase, bool)
        turns = conversation.evidence_turns(question)
        assert [t.session_id for t in turns] == question.evidence_session_ids  # one evidence turn per evidence session
        for turn in turns:
            assert turn.has_answer and turn.text
            if turn.role == "assistant":  # the assistant's fact: its reply to the user's request just before
                request = conversation.session(turn.session_id).turns[int(turn.turn_id.rsplit(":", 1)[1]) - 1]
                assert request.role == "user" and not request.has_answer
        evidence.update(question.evidence_turn_ids)
    assert {t.turn_id for c in bench.conversations for t in c.turns() if t.has_answer} == evidence


def test_some_facts_are_the_assistants(bench: Benchmark) -> None:
    roles = {turn.role for conversation, question in bench.questions() for turn in conversation.evidence_turns(question)}
    assert roles == {"user", "assistant"}


def test_the_overlap_distribution_is_higher_than_the_synthetic_ones(bench: Benchmark) -> None:
    frame = bench.to_frame()
    answerable = frame[~frame["abstention"]]
    echo = answerable[~answerable["paraphrase"].astype(bool)]["overlap"]
    para = answerable[answerable["paraphrase"].astype(bool)]["overlap"]
    ours, theirs = bench.overlaps(), synthetic().overlaps()
    print(f"overlap: mean {statistics.mean(ours):.3f} median {statistics.median(ours):.3f} (echo {echo.mean():.3f}, "
          f"paraphrase {para.mean():.3f}); synthetic: mean {statistics.mean(theirs):.3f} median {statistics.median(theirs):.3f}")
    assert echo.mean() >= MIN_ECHO_OVERLAP and para.mean() <= MAX_PARAPHRASE_OVERLAP
    assert statistics.median(ours) >= MIN_ECHO_OVERLAP > MAX_PARAPHRASE_OVERLAP > statistics.mean(theirs) == pytest.approx(0.019, abs=0.005)
    assert sum(value > 0 for value in ours) / len(ours) > 0.7 > sum(value > 0 for value in theirs) / len(theirs)


def test_frame_carries_paraphrase_and_overlap(bench: Benchmark) -> None:
    frame = synthetic(size=12).to_frame()
    assert str(frame["paraphrase"].dtype) == "boolean" and str(frame["overlap"].dtype) == "Float64"
    assert frame["paraphrase"].isna().tolist() == frame["abstention"].tolist()  # synthetic: every answerable one a paraphrase
    assert frame["overlap"].isna().tolist() == frame["abstention"].tolist()
    assert len(bench.overlaps()) == len(bench) - bench.summary()["abstention"]


def test_lexical_overlap_counts_content_words_of_the_evidence() -> None:
    session = Session("a", "", [Turn("a:0", "a", "user", "I adopted two beagles."), Turn("a:1", "a", "assistant", "Lovely!")])
    questions = [
        Question("q1", "single_session_fact", "Which beagle did I adopt?", "", ["a"], ["a:0"]),  # {beagle, adopt}: 'beagles' folds
        Question("q2", "single_session_fact", "the of and", "", ["a"], ["a:0"]),  # no content word
        Question("q3", "abstention", "What boat?", "", [], [], abstention=True),
    ]
    conversation = Conversation("c", [session], questions)
    assert [conversation.lexical_overlap(q) for q in questions] == [0.5, None, None]
    with pytest.raises(ValidationError, match="paraphrase"):
        Question("q4", "single_session_fact", "Why?", "", [], [], paraphrase="yes")  # type: ignore[arg-type]


# -- splits ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [synthetic, overlap], ids=["synthetic", "overlap"])
def test_splits_are_disjoint_cover_the_benchmark_and_are_deterministic(make) -> None:
    bench = make()
    dev, heldout = bench.split("dev"), bench.split("heldout")
    assert (dev.name, heldout.name) == (f"{bench.name}/dev", f"{bench.name}/heldout")
    dev_ids = {c.conversation_id for c in dev.conversations}
    held_ids = {c.conversation_id for c in heldout.conversations}
    assert not dev_ids & held_ids and dev_ids | held_ids == {c.conversation_id for c in bench.conversations}
    assert len(dev) + len(heldout) == len(bench) and 0.4 < len(dev) / len(bench) < 0.6
    assert dev == make().split("dev")  # the same split on every call
    small = make(size=60).split("dev")  # a conversation's part depends on its id alone
    assert {c.conversation_id for c in small.conversations} == dev_ids & {c.conversation_id for c in make(size=60).conversations}


@given(ids=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=20, unique=True),
       low=st.floats(0.05, 0.5), high=st.floats(0.5, 0.95))
def test_split_of_is_monotone_in_the_dev_share(ids: list[str], low: float, high: float) -> None:
    for conversation_id in ids:
        assert split_of(conversation_id, low) in SPLITS
        if split_of(conversation_id, low) == "dev":
            assert split_of(conversation_id, high) == "dev"  # a larger dev part only adds conversations


def test_split_arguments_are_checked() -> None:
    assert DEV_SHARE == 0.5 and PARAPHRASE_SHARE == 0.25
    for bad in (0, 1, 1.5, True, "half"):
        with pytest.raises(ValidationError, match="dev_share"):
            split_of("c", bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="part"):
        synthetic(size=6).split("test")  # type: ignore[arg-type]
