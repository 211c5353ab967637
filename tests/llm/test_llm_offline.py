"""The ``memlab/offline`` litellm provider, exercised through ``LLMClient`` (i.e. ``litellm.acompletion``)."""

from __future__ import annotations

import copy
import datetime as dt
import enum
import json
import time
import uuid
from typing import Literal

import pytest

from memlab.text import context_sentences
from pydantic import BaseModel, Field, field_validator

import memlab
from memlab.llm import (
    I_DONT_KNOW,
    LLMClient,
    LLMError,
    OfflineRequest,
    StructuredHandlers,
    StructuredOutputError,
    context_prompt,
    estimate_tokens,
)
from memlab.llm.offline import (
    HANDLERS_PARAM,
    LATENCY_ENV,
    PROVIDER,
    best_sentence,
    ensure_registered,
    fill_schema,
    parse_prompt,
)
from memlab.text import content_words

CONTEXT = (
    "Alice lives in Paris and works as a baker.\n"
    "---\n"
    "- Bob moved to Berlin in 2019.\n"
    "The Eiffel Tower is 330 metres tall. Carol prefers green tea over coffee."
)


@pytest.fixture
def client() -> LLMClient:
    return LLMClient()


def _joined(messages) -> str:
    return "\n".join(m["content"] for m in messages)


# --------------------------------------------------------------------------- plain completion


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Where does Alice live?", "Alice lives in Paris and works as a baker."),
        ("When did Bob move to Berlin?", "Bob moved to Berlin in 2019."),
        ("How tall is the Eiffel Tower?", "The Eiffel Tower is 330 metres tall."),
        ("Which tea does Carol prefer?", "Carol prefers green tea over coffee."),
    ],
)
async def test_extractive_answer_picks_the_best_overlapping_sentence(client, question, expected) -> None:
    result = await client.complete(context_prompt(question, CONTEXT))
    assert result.text == expected
    assert result.structured is None
    assert result.model == "memlab/offline"


async def test_no_overlap_gives_i_dont_know(client) -> None:
    result = await client.complete(context_prompt("What colour is the submarine?", CONTEXT))
    assert result.text == I_DONT_KNOW == "I don't know."


@pytest.mark.parametrize(
    "messages",
    [
        "Where does Alice live?",  # no context at all
        context_prompt("Where does Alice live?", ""),  # empty context block
        context_prompt("What is it?", CONTEXT),  # only stop words in the question
    ],
)
async def test_missing_context_or_question_gives_i_dont_know(client, messages) -> None:
    assert (await client.complete(messages)).text == I_DONT_KNOW


async def test_context_in_the_system_message_and_a_plain_user_question(client) -> None:
    messages = [
        {"role": "system", "content": "Answer from the context only.\nContext:\nDogs bark. Cats purr loudly."},
        {"role": "user", "content": "Do cats purr?"},
    ]
    assert (await client.complete(messages)).text == "Cats purr loudly."


async def test_the_last_question_wins_and_assistant_text_is_not_context(client) -> None:
    messages = [
        {"role": "user", "content": "Context:\nThe lab opens at 9. The lab closes at 17.\nQuestion: When does the lab open?"},
        {"role": "assistant", "content": "The cafeteria closes at noon."},
        {"role": "user", "content": "Question: When does the lab close?"},
    ]
    assert (await client.complete(messages)).text == "The lab closes at 17."
    messages[-1] = {"role": "user", "content": "Question: What does the cafeteria serve at noon?"}
    assert (await client.complete(messages)).text == I_DONT_KNOW


def test_prompt_parsing_helpers() -> None:
    question, context = parse_prompt(context_prompt("Who bakes?", ["Alice bakes.", "Bob sings."], instructions="Be brief."))
    assert question == "Who bakes?"
    assert context == "Alice bakes.\nBob sings."
    assert context_sentences("- one. two!\n---\n3) three?\n\n") == ["one.", "two!", "three?"]
    assert content_words("What are the Cities of France?") == {"city", "france"}
    assert best_sentence("bakes bread", ["Alice bakes cakes and pies daily.", "Bob bakes bread."]) == "Bob bakes bread."
    assert best_sentence("", ["anything"]) is None


async def test_same_input_same_output(client) -> None:
    messages = context_prompt("Where did Bob move?", CONTEXT)
    first = await client.complete(messages)
    second = await LLMClient().complete(messages)
    assert (first.text, first.tokens_in, first.tokens_out) == (second.text, second.tokens_in, second.tokens_out)


# --------------------------------------------------------------------------- usage and latency


async def test_usage_is_estimated_from_prompt_and_output_and_reported_by_the_provider(client) -> None:
    messages = context_prompt("Where does Alice live?", CONTEXT, instructions="Answer briefly.")
    result = await client.complete(messages)
    assert result.exact_usage is True
    assert result.tokens_in == estimate_tokens(_joined(messages))
    assert result.tokens_out == estimate_tokens(result.text)
    usage = result.response.usage  # litellm's own usage fields carry the same figures
    assert (usage.prompt_tokens, usage.completion_tokens) == (result.tokens_in, result.tokens_out)
    assert usage.total_tokens == result.tokens_in + result.tokens_out
    assert result.cost_usd is None and result.usage_source == "provider"  # memlab/offline is not in litellm's cost map: unpriced


async def test_simulated_latency_from_the_client_argument() -> None:
    client = LLMClient(offline_latency_ms=60)
    started = time.perf_counter()
    result = await client.complete(context_prompt("Where does Alice live?", CONTEXT))
    assert time.perf_counter() - started >= 0.06
    assert result.latency_s >= 0.06


async def test_simulated_latency_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(LATENCY_ENV, "40")
    client = LLMClient()
    assert client.offline_latency_ms == 40.0
    result = await client.complete("Context: x.\nQuestion: y?")
    assert result.latency_s >= 0.04
    assert LLMClient(offline_latency_ms=0).offline_latency_ms == 0.0  # the argument wins


@pytest.mark.parametrize("raw", ["-1", "soon", "nan", "inf"])
def test_bad_latency_is_a_config_error(monkeypatch, raw) -> None:
    monkeypatch.setenv(LATENCY_ENV, raw)
    with pytest.raises(memlab.ConfigError, match=LATENCY_ENV):
        LLMClient()


def test_bad_latency_argument_is_a_config_error() -> None:
    with pytest.raises(memlab.ConfigError, match="offline_latency_ms"):
        LLMClient(offline_latency_ms=-5)


# --------------------------------------------------------------------------- structured output


class Place(BaseModel):
    city: str
    country: str = "France"
    population: int


class Person(BaseModel):
    name: str
    age: int
    home: Place
    previous_homes: list[Place]
    nickname: str | None = None


async def test_structured_output_fills_a_nested_model(client) -> None:
    result = await client.complete(context_prompt("Where does Alice live?", CONTEXT), response_model=Person)
    person = result.structured
    assert isinstance(person, Person)
    sentence = "Alice lives in Paris and works as a baker."
    assert person == Person(name=sentence, age=0, home=Place(city=sentence, population=0), previous_homes=[], nickname=sentence)
    assert json.loads(result.text) == person.model_dump()
    assert result.tokens_out == estimate_tokens(result.text)


async def test_structured_output_without_a_match_uses_empty_strings(client) -> None:
    result = await client.complete(context_prompt("What colour is the submarine?", CONTEXT), response_model=Place)
    assert result.structured == Place(city="", population=0)


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Rating(BaseModel):
    verdict: Literal["helpful", "harmful", "neutral"]
    score: int = Field(ge=1, le=5)
    confidence: float = Field(gt=0.75, le=1.0)
    weight: float = Field(0.9, ge=0.75)


class Everything(BaseModel):
    colour: Colour
    flag: bool
    ratio: float
    pair: tuple[int, str]
    counts: dict[str, int]
    tags: list[str] = Field(min_length=2)
    ratings: list[Rating]
    first_rating: Rating
    when: dt.datetime
    day: dt.date
    ident: uuid.UUID
    code: str = Field(min_length=3, max_length=5)
    maybe: Rating | None
    either: int | str


async def test_the_generic_filler_satisfies_a_wide_schema(client) -> None:
    result = await client.complete(context_prompt("How tall is the Eiffel Tower?", CONTEXT), response_model=Everything)
    value = result.structured
    assert value.colour is Colour.RED
    assert value.first_rating.verdict == "helpful"
    assert value.first_rating.score == 1
    assert 0.75 < value.first_rating.confidence <= 1.0
    assert value.first_rating.weight == 0.9
    assert len(value.tags) == 2
    assert value.code == "The E"
    # the filler also works on a plain JSON schema
    Everything.model_validate(fill_schema(Everything.model_json_schema(), "text"))


class TreeNode(BaseModel):
    label: str
    parent: TreeNode | None
    children: list[TreeNode]


async def test_the_filler_ends_recursive_models(client) -> None:
    result = await client.complete(context_prompt("Where does Alice live?", CONTEXT), response_model=TreeNode)
    assert result.structured == TreeNode(label="Alice lives in Paris and works as a baker.", parent=None, children=[])


async def test_json_object_mode_gives_an_answer_object(client) -> None:
    litellm = ensure_registered()
    response = await litellm.acompletion(
        model="memlab/offline", messages=context_prompt("Where does Alice live?", CONTEXT), response_format={"type": "json_object"}
    )
    assert json.loads(response.choices[0].message.content) == {"answer": "Alice lives in Paris and works as a baker."}


class AlwaysWrong(BaseModel):
    answer: str

    @field_validator("answer")
    @classmethod
    def _never(cls, value: str) -> str:
        raise ValueError("this validator rejects everything")


async def test_output_that_cannot_fill_the_model_raises_with_the_raw_text(client) -> None:
    with pytest.raises(StructuredOutputError) as caught:
        await client.complete(context_prompt("Where does Alice live?", CONTEXT), response_model=AlwaysWrong)
    error = caught.value
    assert isinstance(error, memlab.ValidationError)
    assert json.loads(error.raw_text) == {"answer": "Alice lives in Paris and works as a baker."}
    assert error.raw_text in str(error)
    assert "rejects everything" in str(error)
    assert error.response_model is AlwaysWrong
    assert error.__cause__ is not None


# --------------------------------------------------------------------------- structured handlers


class TurnVerdict(BaseModel):
    question: str
    sentences: int
    best: str


@pytest.fixture
def verdict_handler(client):
    calls: list[OfflineRequest] = []

    def handler(request: OfflineRequest) -> TurnVerdict:
        calls.append(request)
        return TurnVerdict(question=request.question, sentences=len(request.sentences), best=request.answer)

    assert client.handlers.register("TurnVerdict", handler) is None
    return calls


async def test_a_registered_handler_fills_its_schema(client, verdict_handler) -> None:
    result = await client.complete(context_prompt("When did Bob move?", CONTEXT), response_model=TurnVerdict)
    assert result.structured == TurnVerdict(question="When did Bob move?", sentences=4, best="Bob moved to Berlin in 2019.")
    request = verdict_handler[0]
    assert request.schema_name == "TurnVerdict"
    assert request.schema["title"] == "TurnVerdict"
    assert request.messages[-1]["content"].endswith("Question: When did Bob move?")


async def test_a_handler_string_is_the_raw_output(client) -> None:
    client.handlers.register("Place", lambda request: "not json at all")
    with pytest.raises(StructuredOutputError) as caught:
        await client.complete("Question: where?", response_model=Place)
    assert caught.value.raw_text == "not json at all"
    client.handlers.unregister("Place")
    assert (await client.complete("Question: where?", response_model=Place)).structured == Place(city="", population=0)


async def test_a_failing_handler_is_an_llm_error(client) -> None:
    def broken(request: OfflineRequest) -> dict:
        raise RuntimeError("handler exploded")

    client.handlers.register("Place", broken)
    with pytest.raises(LLMError, match="handler exploded") as caught:
        await client.complete("Question: where?", response_model=Place)
    assert isinstance(caught.value, memlab.MemlabError)
    assert caught.value.model == "memlab/offline"


def test_register_without_replace_keeps_the_registered_handler() -> None:
    def researcher(request: OfflineRequest) -> dict:
        return {}

    def default(request: OfflineRequest) -> dict:
        return {}

    handlers = StructuredHandlers()
    assert handlers.register("Place", default, replace=False) is None
    assert handlers.register("Place", default, replace=False) is default
    handlers.register("Place", researcher)
    assert handlers.register("Place", default, replace=False) is researcher
    assert handlers.lookup("Place") is researcher
    assert handlers.unregister("Place") is researcher
    assert handlers.unregister("Place") is None and handlers.lookup("Place") is None


def test_lookup_falls_back_to_the_schema_title() -> None:
    handlers = StructuredHandlers()
    handlers.register("Place", dict)
    assert handlers.lookup(None, {"title": "Place"}) is dict
    assert handlers.lookup("Other", {"title": "Place"}) is dict
    assert handlers.lookup("Other", {"title": "Other"}) is None


def test_register_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        StructuredHandlers().register("  ", lambda request: {})
    with pytest.raises(TypeError):
        StructuredHandlers().register("X", "not callable")  # type: ignore[arg-type]


async def test_two_clients_never_see_each_others_handlers() -> None:
    first, second = LLMClient(), LLMClient()
    first.handlers.register("Place", lambda request: {"city": "Paris", "population": 1})
    assert (await first.complete("Question: where?", response_model=Place)).structured == Place(city="Paris", population=1)
    assert (await second.complete("Question: where?", response_model=Place)).structured == Place(city="", population=0)
    assert second.handlers.lookup("Place") is None


def test_the_registry_travels_in_the_call_kwargs_and_survives_a_copy(client) -> None:
    call = client._call_kwargs([{"role": "user", "content": "hi"}], None, {})
    assert call[HANDLERS_PARAM] is client.handlers
    assert copy.deepcopy(call)[HANDLERS_PARAM] is client.handlers  # a logger copying the kwargs keeps the client's handlers
    assert HANDLERS_PARAM not in LLMClient("openai/gpt-4o-mini")._call_kwargs([{"role": "user", "content": "hi"}], None, {})


def test_a_direct_litellm_call_carries_its_handlers_or_none() -> None:
    litellm = ensure_registered()
    handlers = StructuredHandlers()
    handlers.register("Place", lambda request: {"city": "Rome", "population": 2})
    messages = context_prompt("Where does Alice live?", CONTEXT)
    carried = litellm.completion(model="memlab/offline", messages=messages, response_format=Place, **{HANDLERS_PARAM: handlers})
    assert Place.model_validate_json(carried.choices[0].message.content) == Place(city="Rome", population=2)
    plain = litellm.completion(model="memlab/offline", messages=messages, response_format=Place)
    assert Place.model_validate_json(plain.choices[0].message.content).city.startswith("Alice")


async def test_a_registry_of_the_wrong_type_is_an_llm_error(client) -> None:
    with pytest.raises(LLMError, match=f"{HANDLERS_PARAM} must be a StructuredHandlers"):
        await client.complete("Question: where?", response_model=Place, **{HANDLERS_PARAM: {"Place": dict}})


# --------------------------------------------------------------------------- registration and routing


async def test_registration_is_idempotent(client, monkeypatch) -> None:
    litellm = ensure_registered()
    for _ in range(3):
        ensure_registered()
        await client.complete("Question: anything?")
        await LLMClient().complete("Question: anything?")
    assert [item["provider"] for item in litellm.custom_provider_map].count(PROVIDER) == 1
    # a notebook that resets the map gets the provider back on the next call
    monkeypatch.setattr(litellm, "custom_provider_map", [])
    assert (await client.complete(context_prompt("Who lives in Paris?", CONTEXT))).text.startswith("Alice")
    assert [item["provider"] for item in litellm.custom_provider_map] == [PROVIDER]


async def test_an_unknown_memlab_model_is_an_llm_error() -> None:
    with pytest.raises(LLMError, match="unknown memlab model memlab/nope"):
        await LLMClient("memlab/nope").complete("hello")


def test_the_sync_litellm_path_works_too() -> None:
    litellm = ensure_registered()
    messages = context_prompt("Where does Alice live?", CONTEXT)
    started = time.perf_counter()
    response = litellm.completion(model="memlab/offline", messages=messages, memlab_offline_latency_ms=30)
    assert time.perf_counter() - started >= 0.03
    assert response.choices[0].message.content == "Alice lives in Paris and works as a baker."
    assert response.usage.prompt_tokens == estimate_tokens(_joined(messages))
