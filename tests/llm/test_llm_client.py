"""``LLMClient`` wiring: real providers through the same ``litellm.acompletion`` call (litellm's
``mock_response`` test hook, no network), error wrapping, argument checks, light imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import BaseModel

import memlab
import memlab.llm
from memlab.llm import LLMClient, LLMError, LLMResult, StructuredOutputError
from memlab.llm.offline import ensure_registered

API_KEY = "sk-test-not-a-real-key-0123456789"


class Answer(BaseModel):
    answer: str
    confidence: float


async def test_a_real_provider_is_a_config_change() -> None:
    client = LLMClient("openai/gpt-4o-mini", api_key=API_KEY)
    result = await client.complete("Say hi.", mock_response="hi there")
    assert isinstance(result, LLMResult)
    assert result.text == "hi there"
    assert result.structured is None
    assert result.model == "openai/gpt-4o-mini"
    assert result.exact_usage is True  # litellm reports (fixed, mock) usage; wiring only, not the numbers
    assert result.tokens_in > 0 and result.tokens_out > 0
    assert result.latency_s >= 0
    assert result.cost_usd > 0  # priced as gpt-4o-mini
    assert not client.is_offline
    assert API_KEY not in repr(client)


async def test_structured_output_from_a_real_provider_is_validated() -> None:
    client = LLMClient("openai/gpt-4o-mini", api_key=API_KEY, mock_response='{"answer": "Paris", "confidence": 0.9}')
    result = await client.complete("Where?", response_model=Answer)
    assert result.structured == Answer(answer="Paris", confidence=0.9)


async def test_fenced_json_is_accepted() -> None:
    client = LLMClient("openai/gpt-4o-mini", api_key=API_KEY)
    fenced = 'Here you go:\n```json\n{"answer": "Paris", "confidence": 1}\n```'
    result = await client.complete("Where?", response_model=Answer, mock_response=fenced)
    assert result.structured == Answer(answer="Paris", confidence=1.0)
    assert result.text == fenced


async def test_unparseable_real_output_raises_with_the_raw_text_truncated_in_the_message() -> None:
    raw = "I am sorry, " + "blah " * 400
    client = LLMClient("openai/gpt-4o-mini", api_key=API_KEY)
    with pytest.raises(StructuredOutputError) as caught:
        await client.complete("Where?", response_model=Answer, mock_response=raw)
    error = caught.value
    assert isinstance(error, memlab.ValidationError)
    assert error.raw_text == raw
    assert "I am sorry, blah" in str(error)
    assert "more chars]" in str(error)
    assert len(str(error)) < len(raw)


async def test_provider_errors_are_wrapped_and_never_show_the_key() -> None:
    client = LLMClient("openai/gpt-4o-mini", api_key=API_KEY)
    with pytest.raises(LLMError) as caught:
        await client.complete("hi", mock_response=Exception(f"bad key {API_KEY}"))
    error = caught.value
    assert isinstance(error, memlab.MemlabError)
    assert isinstance(error, RuntimeError)
    assert error.model == "openai/gpt-4o-mini"
    assert error.provider_error and error.__cause__ is not None
    assert API_KEY not in str(error)
    assert "***" in str(error)


async def test_per_call_kwargs_override_client_kwargs() -> None:
    client = LLMClient("openai/gpt-4o-mini", api_key=API_KEY, mock_response="from the client")
    assert (await client.complete("x")).text == "from the client"
    assert (await client.complete("x", mock_response="from the call")).text == "from the call"


async def test_usage_falls_back_to_litellms_token_counter_when_the_provider_reports_none(monkeypatch) -> None:
    litellm = ensure_registered()

    class Silent(litellm.CustomLLM):
        async def acompletion(self, model, messages, *args, **kwargs):
            response = kwargs["model_response"]
            response.choices[0].message.content = "twelve chars"
            return response

    monkeypatch.setattr(litellm, "custom_provider_map", [*litellm.custom_provider_map, {"provider": "memlabsilent", "custom_handler": Silent()}])
    result = await LLMClient("memlabsilent/any").complete("a prompt of 23 chars...")
    assert result.text == "twelve chars"
    assert result.exact_usage is False and result.usage_source == "tokenizer"
    counted_in = litellm.token_counter(model="memlabsilent/any", messages=[{"role": "user", "content": "a prompt of 23 chars..."}])
    assert (result.tokens_in, result.tokens_out) == (counted_in, litellm.token_counter(model="memlabsilent/any", text="twelve chars"))
    assert result.cost_usd is None  # an unknown model is unpriced


@pytest.mark.parametrize("messages", ["", "   ", [], {"role": "user", "content": "x"}, [{"content": "no role"}], 42])
async def test_bad_messages_are_validation_errors(messages) -> None:
    with pytest.raises(memlab.ValidationError):
        await LLMClient().complete(messages)


async def test_bad_response_model_and_reserved_kwargs_are_validation_errors() -> None:
    with pytest.raises(memlab.ValidationError, match="response_model"):
        await LLMClient().complete("x", response_model=dict)  # type: ignore[arg-type]
    with pytest.raises(memlab.ValidationError, match="model"):
        await LLMClient().complete("x", model="openai/gpt-4o")


@pytest.mark.parametrize("model", ["", "  ", None])
def test_a_model_string_is_required(model) -> None:
    with pytest.raises(memlab.ValidationError):
        LLMClient(model)  # type: ignore[arg-type]


def test_defaults() -> None:
    client = LLMClient()
    assert client.model == memlab.llm.OFFLINE_MODEL == "memlab/offline"
    assert client.is_offline
    assert repr(client) == "LLMClient(model='memlab/offline', offline_latency_ms=0.0)"


def test_public_names() -> None:
    assert memlab.llm.__all__ == sorted(memlab.llm.__all__)
    for name in ("LLMClient", "LLMResult", "estimate_tokens", "cost_usd", "StructuredHandlers", "OfflineRequest"):
        assert name in memlab.llm.__all__
    for name in memlab.llm.__all__:
        assert getattr(memlab.llm, name) is not None


def test_import_memlab_llm_does_not_import_litellm() -> None:
    code = "import sys, memlab.llm; print(json.dumps('litellm' in sys.modules))"
    done = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout.strip()) is False
