"""chunk_text and sentence_spans: sentence rules, packing, overlap, long sentences, validation."""

from __future__ import annotations

import pytest

from memlab.exceptions import ValidationError
from memlab.graph._chunking import Chunk, chunk_text, sentence_spans
from memlab.llm import estimate_tokens


def sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Wait... What?! Yes.", ["Wait...", "What?!", "Yes."]),
        ('He said "stop." Then left.', ['He said "stop."', "Then left."]),
        ("It costs 3.5 dollars. Pi is 3.14159.", ["It costs 3.5 dollars.", "Pi is 3.14159."]),
        ("Dr. Smith met Mrs. Jones. They talked.", ["Dr. Smith met Mrs. Jones.", "They talked."]),
        ("Use tools, e.g. hammers, i.e. heavy ones. Done.", ["Use tools, e.g. hammers, i.e. heavy ones.", "Done."]),
        ("J. K. Rowling wrote it. The U.S. market grew.", ["J. K. Rowling wrote it.", "The U.S. market grew."]),
        ("line one\nline two\n\nnew paragraph", ["line one", "line two", "new paragraph"]),
        ("a.b.c is a name. end", ["a.b.c is a name.", "end"]),
        ("  padded  ", ["padded"]),
        ("", []),
        (" \n\t ", []),
    ],
)
def test_sentence_spans(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_sentence_spans_never_start_or_end_with_whitespace() -> None:
    text = "  A first one.   \n  A second one!\n\n"
    for start, end in sentence_spans(text):
        assert text[start:end] == text[start:end].strip()


def test_short_text_is_one_chunk() -> None:
    text = "  Alice lives in Paris. Bob works in Berlin.  \n"
    assert chunk_text(text) == [Chunk(index=0, text=text.strip(), start=2, end=44, tokens=estimate_tokens(text.strip()))]


@pytest.mark.parametrize("blank", ["", "   ", "\n\n\t"])
def test_blank_text_has_no_chunks(blank: str) -> None:
    assert chunk_text(blank) == []


def test_chunks_pack_whole_sentences_up_to_chunk_size() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))  # 26-27 chars = 6 tokens each
    chunks = chunk_text(text, chunk_size=32, overlap=0)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.tokens <= 32
        assert chunk.text.startswith("Sentence") and chunk.text.endswith("here.")
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.tokens == estimate_tokens(chunk.text)
    assert [chunk.index for chunk in chunks] == list(range(len(chunks)))
    # no overlap: chunks follow each other, separated by one space
    for before, after in zip(chunks, chunks[1:]):
        assert after.start == before.end + 1


def test_overlap_repeats_trailing_sentences_within_budget() -> None:
    text = " ".join(f"Fact {i:02d} holds." for i in range(30))  # 14 chars = 3 tokens each
    chunks = chunk_text(text, chunk_size=20, overlap=8)
    assert len(chunks) > 2
    for before, after in zip(chunks, chunks[1:]):
        shared = text[after.start : before.end]
        assert after.start < before.end, "consecutive chunks share sentences"
        assert estimate_tokens(shared) <= 8
        assert shared.startswith("Fact") and shared.endswith("holds.")
        assert after.end > before.end


def test_overlap_never_repeats_a_whole_chunk() -> None:
    text = "Tiny one. " + "word " * 70 + "end."
    chunks = chunk_text(text, chunk_size=16, overlap=15)
    for before, after in zip(chunks, chunks[1:]):
        assert after.start > before.start


def test_a_long_sentence_is_split_at_word_boundaries() -> None:
    text = " ".join(f"w{i:03d}" for i in range(200)) + "."
    chunks = chunk_text(text, chunk_size=16, overlap=0)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.tokens <= 16
        assert text[chunk.start - 1 : chunk.start].strip() == "" and text[chunk.end : chunk.end + 1].strip() in ("", ".")
    assert " ".join(chunk.text for chunk in chunks) == text


def test_an_unsplittable_word_is_its_own_oversized_chunk() -> None:
    giant = "x" * 200
    text = f"Before it. {giant} After it."
    chunks = chunk_text(text, chunk_size=16, overlap=4)
    assert [chunk.text for chunk in chunks] == ["Before it.", giant, "After it."]
    assert chunks[1].tokens == 50


def test_chunking_is_deterministic() -> None:
    text = "Alpha beta. " * 300 + "Gamma!"
    assert chunk_text(text, chunk_size=40, overlap=10) == chunk_text(text, chunk_size=40, overlap=10)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"chunk_size": 15}, "chunk_size"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"chunk_size": 16.0}, "chunk_size"),
        ({"chunk_size": True}, "chunk_size"),
        ({"overlap": -1}, "overlap"),
        ({"chunk_size": 32, "overlap": 32}, "overlap"),
        ({"overlap": 1.5}, "overlap"),
    ],
)
def test_bad_sizes_raise_validation_error(kwargs: dict, named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        chunk_text("Some text.", **kwargs)


def test_non_str_text_raises_validation_error() -> None:
    with pytest.raises(ValidationError, match="bytes"):
        chunk_text(b"bytes")  # type: ignore[arg-type]
