"""chunk_text on random texts: coverage, size and overlap bounds, consistent offsets, determinism."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memlab.graph._chunking import chunk_text, sentence_spans
from memlab.llm import estimate_tokens

WORDS = st.one_of(
    st.sampled_from(["Dr.", "e.g.", "3.5", "U.S.", "J.", "word", "Paris", "it", "yes!", "why?", "end.", "...", '"quoted."', "x" * 90]),
    st.text("abcdefghijXYZ.,!?'-", min_size=1, max_size=12),
)
SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\t", " \n "])
TEXTS = st.lists(st.tuples(WORDS, SEPARATORS), max_size=160).map(lambda parts: "".join(w + s for w, s in parts))


@st.composite
def sizes(draw):
    chunk_size = draw(st.integers(16, 80))
    return chunk_size, draw(st.integers(0, chunk_size - 1))


@given(TEXTS, sizes())
def test_chunk_invariants(text: str, size: tuple[int, int]) -> None:
    chunk_size, overlap = size
    chunks = chunk_text(text, chunk_size=chunk_size, overlap=overlap)

    covered = bytearray(len(text))
    for index, chunk in enumerate(chunks):
        assert chunk.index == index
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.text and chunk.text == chunk.text.strip()
        assert chunk.tokens == estimate_tokens(chunk.text)
        if chunk.tokens > chunk_size:
            assert len(chunk.text.split()) == 1, "only a single unsplittable word may exceed chunk_size"
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace()), "every non-space character is in a chunk"

    for before, after in zip(chunks, chunks[1:]):
        assert before.start < after.start and before.end < after.end
        if after.start < before.end:
            assert estimate_tokens(text[after.start : before.end]) <= overlap

    assert chunk_text(text, chunk_size=chunk_size, overlap=overlap) == chunks


@given(TEXTS)
def test_sentences_partition_the_content(text: str) -> None:
    spans = sentence_spans(text)
    covered = bytearray(len(text))
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end
        assert text[start:end] == text[start:end].strip()
        covered[start:end] = b"\x01" * (end - start)
        previous_end = end
    assert all(covered[i] for i, ch in enumerate(text) if not ch.isspace())
