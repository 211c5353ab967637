"""``LiteLLMEmbedder`` through the real ``litellm.aembedding`` HTTP path, against a local fake
OpenAI embeddings server on 127.0.0.1 (litellm's embedding ``mock_response`` returns one fixed
vector whatever the input, so it cannot check batching or ordering)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

import memlab
from memlab.embeddings import EmbeddingError, HashingEmbedder, LiteLLMEmbedder

API_KEY = "sk-test-not-a-real-key-0123456789"
DIM = 32


def _vector(text: str) -> list[float]:
    """Deterministic, deliberately unnormalised vector of a text (so the embedder's normalisation shows)."""
    seed = int.from_bytes(text.encode("utf-8")[:8].ljust(8, b"\0"), "little") ^ len(text)
    return (np.random.default_rng(seed).standard_normal(DIM) * 3.0).tolist()


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.fail_with: tuple[int, dict[str, Any]] | None = None
        self.shuffle = False
        self.drop_one = False

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def log_message(self, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.server.fail_with is not None:
            status, payload = self.server.fail_with
            return self._send(status, payload)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for index, text in enumerate(inputs):
            vector = _vector(text)[: body.get("dimensions", DIM)]
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        if self.server.shuffle:
            data.reverse()
        if self.server.drop_one:
            data = data[:-1]
        tokens = sum(len(t.split()) for t in inputs)
        self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.shutdown()
        fake.server_close()
        thread.join(timeout=5)


def _embedder(server: FakeOpenAI, **kwargs: Any) -> LiteLLMEmbedder:
    kwargs.setdefault("dim", DIM)
    return LiteLLMEmbedder("openai/fake-embed", api_key=API_KEY, api_base=server.base, num_retries=0, timeout=10, **kwargs)


async def test_real_call_path_batches_orders_and_normalises(server: FakeOpenAI) -> None:
    texts = [f"text number {i}" for i in range(7)] + [""]
    embedder = _embedder(server, batch_size=3)
    vectors = await embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (8, DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = np.asarray([_vector(t or " ") for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert [r["path"] for r in server.requests] == ["/v1/embeddings"] * 3
    assert [r["body"]["input"] for r in server.requests] == [texts[0:3], texts[3:6], [texts[6], " "]]
    assert {r["body"]["model"] for r in server.requests} == {"fake-embed"}
    assert {r["auth"] for r in server.requests} == {f"Bearer {API_KEY}"}


async def test_out_of_order_rows_are_sorted_by_index(server: FakeOpenAI) -> None:
    server.shuffle = True
    texts = ["alpha", "beta", "gamma"]
    vectors = await _embedder(server).embed(texts)
    reference = np.asarray([_vector(t) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, reference / np.linalg.norm(reference, axis=1, keepdims=True), atol=1e-6)


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")  # the openai SDK's model types base64 rows as list[float]
async def test_dimensions_and_base64(server: FakeOpenAI) -> None:
    # litellm lets only text-embedding-3 models take `dimensions` (provider-side truncation)
    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", api_key=API_KEY, api_base=server.base, num_retries=0, dimensions=8, encoding_format="base64")
    assert embedder.dim == 8 and embedder.name == "litellm:openai/text-embedding-3-small@8"
    vectors = await embedder.embed(["alpha", "beta"])
    assert vectors.shape == (2, 8)
    body = server.requests[-1]["body"]
    assert body["model"] == "text-embedding-3-small"
    assert body["dimensions"] == 8 and body["encoding_format"] == "base64"
    expected = np.asarray(_vector("alpha")[:8], dtype=np.float32)
    np.testing.assert_allclose(vectors[0], expected / np.linalg.norm(expected), atol=1e-6)


async def test_provider_errors_are_wrapped_without_the_key(server: FakeOpenAI) -> None:
    server.fail_with = (401, {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error", "code": "invalid_api_key"}})
    with pytest.raises(EmbeddingError) as info:
        await _embedder(server).embed(["hello"])
    assert info.value.provider_error == "AuthenticationError"
    assert info.value.model == "openai/fake-embed"
    assert info.value.__cause__ is not None
    assert API_KEY not in str(info.value)
    server.fail_with = (500, {"error": {"message": "boom", "type": "server_error"}})
    with pytest.raises(EmbeddingError) as info:
        await _embedder(server).embed(["hello"])
    assert info.value.provider_error == "InternalServerError"


async def test_wrong_answers_are_errors(server: FakeOpenAI) -> None:
    with pytest.raises(EmbeddingError, match="size"):
        await _embedder(server, dim=DIM + 1).embed(["hello"])
    server.drop_one = True
    with pytest.raises(EmbeddingError, match="1 embeddings for 2 inputs"):
        await _embedder(server).embed(["hello", "world"])


async def test_unreachable_server_is_an_embedding_error() -> None:
    embedder = LiteLLMEmbedder("openai/fake-embed", api_key=API_KEY, dim=DIM, api_base="http://127.0.0.1:9/v1", num_retries=0, timeout=5)
    with pytest.raises(EmbeddingError) as info:
        await embedder.embed(["hello"])
    assert API_KEY not in str(info.value)


def test_dim_resolution_and_arguments() -> None:
    assert LiteLLMEmbedder("openai/text-embedding-3-small").dim == 1536  # litellm's bundled model map
    assert LiteLLMEmbedder("text-embedding-3-large").dim == 3072
    with pytest.raises(memlab.ValidationError, match="dim="):
        LiteLLMEmbedder("openai/some-unknown-embedding-model").dim  # noqa: B018
    with pytest.raises(memlab.ValidationError):
        LiteLLMEmbedder("openai/x", dim=8, dimensions=16)
    for bad in ("", "  ", None):
        with pytest.raises(memlab.ValidationError):
            LiteLLMEmbedder(bad)  # type: ignore[arg-type]
    with pytest.raises(memlab.ValidationError):
        LiteLLMEmbedder("openai/x", dim=0)
    embedder = LiteLLMEmbedder("openai/x", api_key=API_KEY, dim=4, timeout=3)
    assert API_KEY not in repr(embedder)
    call = embedder.request_kwargs(["a", ""])
    assert call == {"model": "openai/x", "input": ["a", " "], "api_key": API_KEY, "timeout": 3}
    assert "api_key" not in LiteLLMEmbedder("openai/x", dim=4).request_kwargs(["a"])


async def test_unknown_dim_fails_before_any_request(server: FakeOpenAI) -> None:
    embedder = LiteLLMEmbedder("openai/some-unknown-embedding-model", api_base=server.base)
    with pytest.raises(memlab.ValidationError):
        await embedder.embed(["hello"])
    assert server.requests == []


async def test_same_interface_as_the_offline_embedders(server: FakeOpenAI) -> None:
    for embedder in (_embedder(server), HashingEmbedder(DIM)):
        vectors = await embedder.embed(["one", "two"])
        assert vectors.shape == (2, embedder.dim) and vectors.dtype == np.float32
