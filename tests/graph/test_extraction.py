"""The extraction step: schema normalisation, prompt, offline rules, and the real litellm path."""

from __future__ import annotations

import pytest

from memlab.graph._extraction import (
    CHUNK_CLOSE,
    CHUNK_OPEN,
    SUMMARY_MAX_CHARS,
    ChunkExtraction,
    ExtractedEntity,
    ExtractedRelation,
    chunk_from_messages,
    extract_offline,
    extraction_messages,
    normalize_entity_name,
    normalize_relation,
    offline_extraction,
    register_offline_extraction,
)
from memlab.llm import LLMClient, OfflineRequest


def entities(extraction: ChunkExtraction) -> list[tuple[str, str]]:
    return [(entity.name, entity.type) for entity in extraction.entities]


def names(text: str) -> list[str]:
    return [entity.name for entity in extract_offline(text).entities]


def triples(text: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.relation, r.target) for r in extract_offline(text).relationships]


# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Marie Curie", "marie curie"),
        ("  MARIE\t curie. ", "marie curie"),
        ("Straße", "strasse"),
        ("O'Brien", "obrien"),
        ("Curie’s", "curies"),
        ("U.S.", "us"),
        ("Jean-Paul Sartre", "jean paul sartre"),
        ("New York City, NY", "new york city ny"),
        ("3.5%", "3.5%"),
        ("$1,000", "$1,000"),
        ("AT&T", "at&t"),
        ("C++", "c++"),
        ("(Paris)", "paris"),
        ("snake_case", "snake case"),
        ("ﬁnance", "finance"),
        ("...", ""),
    ],
)
def test_normalize_entity_name(raw: str, expected: str) -> None:
    assert normalize_entity_name(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("lives in", "lives_in"), ("Lives In", "lives_in"), ("WORKS-AT", "works_at"), ("  was born in ", "was_born_in"), ("café's owner", "cafe_s_owner"), ("--", "")],
)
def test_normalize_relation(raw: str, expected: str) -> None:
    assert normalize_relation(raw) == expected


# --------------------------------------------------------------------------- schema


def test_every_schema_field_is_required() -> None:
    schema = ChunkExtraction.model_json_schema()
    assert schema["required"] == ["summary", "entities", "relationships"]
    assert schema["$defs"]["ExtractedEntity"]["required"] == ["name", "type"]
    assert schema["$defs"]["ExtractedRelation"]["required"] == ["source", "relation", "target"]


def test_chunk_extraction_normalises_what_it_is_given() -> None:
    extraction = ChunkExtraction(
        summary="  About Marie.  ",
        entities=[
            ExtractedEntity(name=" Marie  Curie ", type="Person"),
            ExtractedEntity(name="marie curie", type="Scientist"),
            ExtractedEntity(name="Paris", type=" "),
            ExtractedEntity(name="...", type="Junk"),
        ],
        relationships=[
            ExtractedRelation(source="MARIE CURIE", relation="Lives In", target="paris"),
            ExtractedRelation(source="Marie Curie", relation="lives_in", target="Paris"),
            ExtractedRelation(source="Marie Curie", relation="won", target="Nobel Prize"),
            ExtractedRelation(source="", relation="knows", target="Paris"),
            ExtractedRelation(source="Paris", relation="  ", target="Marie Curie"),
        ],
    )
    assert extraction.summary == "About Marie."
    assert entities(extraction) == [("Marie Curie", "Person"), ("Paris", "Entity"), ("Nobel Prize", "Entity")]
    assert [(r.source, r.relation, r.target) for r in extraction.relationships] == [
        ("Marie Curie", "lives_in", "Paris"),
        ("Marie Curie", "won", "Nobel Prize"),
    ]


def test_normalisation_is_stable_across_a_json_round_trip() -> None:
    extraction = extract_offline("Marie Curie was born in Warsaw in 1867.")
    assert ChunkExtraction.model_validate_json(extraction.model_dump_json()) == extraction


# --------------------------------------------------------------------------- prompt


def test_extraction_messages_delimit_the_chunk() -> None:
    messages = extraction_messages("Alice lives in Paris.")
    assert [message["role"] for message in messages] == ["system", "user"]
    assert "snake_case" in messages[0]["content"] and "<chunk>" in messages[0]["content"]
    assert messages[1]["content"].endswith(f"{CHUNK_OPEN}\nAlice lives in Paris.\n{CHUNK_CLOSE}")


@pytest.mark.parametrize(
    "chunk",
    ["Alice lives in Paris.", "Context: tricky\nQuestion: also tricky", "a </chunk> inside\n</chunk>\nstill the chunk", "", "\n\n  spaced  \n"],
)
def test_chunk_from_messages_recovers_the_chunk_exactly(chunk: str) -> None:
    assert chunk_from_messages(extraction_messages(chunk)) == chunk


def test_chunk_from_messages_without_markers_uses_the_last_user_message() -> None:
    messages = [{"role": "user", "content": "old"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": " Bob is here. "}]
    assert chunk_from_messages(messages) == "Bob is here."
    assert chunk_from_messages([{"role": "user", "content": [{"type": "text", "text": "parts work"}]}]) == "parts work"
    assert chunk_from_messages([]) == ""


# --------------------------------------------------------------------------- offline rules


def test_capitalised_runs_are_entities() -> None:
    assert names("Marie Curie met Pierre Curie in New York City.") == ["Marie Curie", "Pierre Curie", "New York City"]
    assert names("She studied at the University of Paris with Dr. Smith and J. K. Rowling.") == [
        "University of Paris",
        "Dr. Smith",
        "J. K. Rowling",
    ]


def test_sentence_initial_common_words_are_dropped() -> None:
    assert names("The Eiffel Tower is tall. In Paris it rains. However Bob left. The end.") == ["Eiffel Tower", "Paris", "Bob"]
    assert names("I think Alice agrees.") == ["Alice"]
    assert names("Alice lives here. Scientists agree.") == ["Alice", "Scientists"]  # only common words are dropped


def test_possessives_split_and_labels_are_skipped() -> None:
    assert names("Marie Curie's Radium Institute opened.") == ["Marie Curie", "Radium Institute"]
    assert names("Name: Ada Lovelace\nCity: London") == ["Ada Lovelace", "London"]


def test_dates() -> None:
    text = "Events: 2024-03-12, 12 March 2024, March 12, 2024, 3rd of May 2021, Sept. 2020 and in 1867."
    assert entities(extract_offline(text)) == [
        ("2024-03-12", "Date"),
        ("12 March 2024", "Date"),
        ("March 12, 2024", "Date"),
        ("3rd of May 2021", "Date"),
        ("Sept. 2020", "Date"),
        ("1867", "Date"),
    ]


def test_years_need_context_and_other_numbers_are_numbers() -> None:
    extraction = extract_offline("The club has 1500 members. It was founded in 1999. It ended (1867) there.")
    assert entities(extraction) == [("1500 members", "Number"), ("1999", "Date"), ("1867", "Date")]
    assert entities(extract_offline("They sold 1999 chairs.")) == [("1999", "Number")]


def test_numbers_keep_adjacent_units() -> None:
    text = "Acme Corp grew 3.5% to $2.5 million, hired 5,000 people, drove 12 km and waited 40 minutes for 7 friends."
    assert [name for name, kind in entities(extract_offline(text)) if kind == "Number"] == [
        "3.5%",
        "$2.5 million",
        "5,000 people",
        "12 km",
        "40 minutes",
        "7",
    ]


def test_numbers_glued_to_words_are_not_numbers() -> None:
    assert entities(extract_offline("COVID-19 spread in the 1990s, v2.0 shipped.")) == [("COVID-19", "Entity")]


def test_subject_verb_object_triples() -> None:
    assert triples("Alice lives in Paris.") == [("Alice", "lives_in", "Paris")]
    assert triples("Marie Curie was born in Warsaw in 1867.") == [
        ("Marie Curie", "was_born_in", "Warsaw"),
        ("Marie Curie", "was_born_in", "1867"),
    ]
    assert triples("In 1903, Marie Curie, who studied in Paris, won the Nobel Prize.") == [
        ("Marie Curie", "studied_in", "Paris"),
        ("Marie Curie", "won", "Nobel Prize"),
    ]
    assert triples("Acme Corp employs 5,000 people and grew 3.5% in March 2024.") == [
        ("Acme Corp", "employs", "5,000 people"),
        ("Acme Corp", "grew", "3.5%"),
        ("Acme Corp", "grew_in", "March 2024"),
    ]


def test_coordination() -> None:
    assert triples("Alice and Bob live in Rome.") == [("Alice", "live_in", "Rome"), ("Bob", "live_in", "Rome")]
    assert triples("Alice visited Paris and London.") == [("Alice", "visited", "Paris"), ("Alice", "visited", "London")]
    assert triples("Alice lives in Paris and Bob works at Acme.") == [("Alice", "lives_in", "Paris"), ("Bob", "works_at", "Acme")]


def test_no_triple_without_a_verb_phrase_or_across_sentences() -> None:
    assert triples("Paris. London.") == []
    assert triples("Alice (an engineer) Bob.") == []
    assert triples("Alice went there. Bob stayed in Rome.") == [("Bob", "stayed_in", "Rome")]
    assert triples("Alice said that the long meeting with many other people was over before Bob arrived.") == []


def test_summary_is_the_first_sentence_or_two_capped() -> None:
    assert extract_offline("Short one. Second one. Third one.").summary == "Short one. Second one."
    long_first = "A fairly long first sentence that goes on and on about the river and the valley and the farms there."
    assert extract_offline(long_first + " Second.").summary == long_first
    summary = extract_offline("word " * 200).summary
    assert len(summary) <= SUMMARY_MAX_CHARS and summary.endswith("word…")
    assert extract_offline("  ").summary == ""


def test_offline_extraction_reads_the_chunk_from_the_request() -> None:
    text = "Alice lives in Paris."
    request = OfflineRequest(tuple(extraction_messages(text)), "", "", (), "", None, "ChunkExtraction")
    assert offline_extraction(request) == extract_offline(text)


def test_extraction_is_deterministic() -> None:
    text = "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891. " * 20
    assert extract_offline(text) == extract_offline(text)


# --------------------------------------------------------------------------- registration and the litellm path


def test_register_offline_extraction_is_idempotent() -> None:
    llm = LLMClient()
    register_offline_extraction(llm)
    register_offline_extraction(llm)
    assert llm.handlers.unregister("ChunkExtraction") is offline_extraction
    assert llm.handlers.lookup("ChunkExtraction") is None


def test_register_offline_extraction_keeps_a_custom_handler() -> None:
    def custom(request: OfflineRequest) -> dict:
        return {"summary": "custom", "entities": [], "relationships": []}

    llm = LLMClient()
    llm.handlers.register("ChunkExtraction", custom)
    register_offline_extraction(llm)
    assert llm.handlers.lookup("ChunkExtraction") is custom


def test_register_offline_extraction_registers_on_that_client_only() -> None:
    llm, other = LLMClient(), LLMClient()
    register_offline_extraction(llm)
    assert llm.handlers.lookup("ChunkExtraction") is offline_extraction
    assert other.handlers.lookup("ChunkExtraction") is None


async def test_the_litellm_path_returns_entities_and_triples() -> None:
    llm = LLMClient()
    register_offline_extraction(llm)
    text = "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891. Marie Curie won the Nobel Prize in 1903."
    result = await llm.complete(extraction_messages(text), response_model=ChunkExtraction)
    extraction = result.structured
    assert isinstance(extraction, ChunkExtraction)
    assert extraction.summary == "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891."
    assert entities(extraction) == [
        ("Marie Curie", "Entity"),
        ("Warsaw", "Entity"),
        ("1867", "Date"),
        ("Paris", "Entity"),
        ("1891", "Date"),
        ("Nobel Prize", "Entity"),
        ("1903", "Date"),
    ]
    assert [(r.source, r.relation, r.target) for r in extraction.relationships] == [
        ("Marie Curie", "was_born_in", "Warsaw"),
        ("Marie Curie", "was_born_in", "1867"),
        ("Marie Curie", "won", "Nobel Prize"),
        ("Marie Curie", "won_in", "1903"),
    ]
    assert result.tokens_in > 0 and result.tokens_out > 0
