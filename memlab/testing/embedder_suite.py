"""The :class:`~memlab.embeddings.Embedder` conformance suite.

Subclass :class:`EmbedderSuite` in a test module and provide an ``embedder``
fixture; the suite checks only what the base contract promises for every
embedder (shape, dtype, unit rows, determinism, batch composition, argument
checks, ``dim`` / ``name`` / ``max_tokens``)::

    import pytest
    from memlab.testing import EmbedderSuite

    class TestMyEmbedder(EmbedderSuite):
        @pytest.fixture
        def embedder(self):
            return MyEmbedder()

The fixture's embedder serves every hypothesis example (one instance per model).
Register the module for assertion rewriting in your root ``conftest.py``:
``pytest.register_assert_rewrite("memlab.testing.embedder_suite")``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.embeddings import Embedder
from memlab.exceptions import ValidationError

__all__ = ["EmbedderSuite"]

_SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors])

_TEXT = st.one_of(
    st.sampled_from(["", "   ", "Alice lives in Paris.", "alice LIVES in paris!", "Ünïcödé façade 東京", "tea " * 40]),
    st.text(max_size=40),
)
_TEXTS = st.lists(_TEXT, min_size=1, max_size=6)
_ROUNDING = 1e-5


def _embed(embedder: Embedder, texts: Any) -> Any:
    return asyncio.run(embedder.embed(texts))


def _check_rows(embedder: Embedder, vectors: Any, count: int) -> None:
    import numpy as np

    assert isinstance(vectors, np.ndarray), f"embed returned {type(vectors).__name__}, not a numpy.ndarray"
    assert vectors.dtype == np.float32, f"dtype {vectors.dtype}, not float32"
    assert vectors.shape == (count, embedder.dim), f"shape {vectors.shape} for {count} texts of dim {embedder.dim}"
    norms = np.linalg.norm(vectors, axis=1)
    assert np.all(np.abs(norms - 1.0) < _ROUNDING * 10), f"rows not of unit norm: {norms!r}"


class EmbedderSuite:
    """The :class:`~memlab.embeddings.Embedder` contract; subclasses provide an ``embedder`` fixture."""

    @pytest.fixture
    def embedder(self) -> Embedder:
        raise NotImplementedError("an EmbedderSuite subclass must provide an `embedder` fixture")

    def test_dim_name_and_window(self, embedder: Embedder) -> None:
        assert isinstance(embedder.dim, int) and not isinstance(embedder.dim, bool) and embedder.dim > 0, f"dim {embedder.dim!r}"
        assert isinstance(embedder.name, str) and embedder.name, f"name {embedder.name!r}"
        window = embedder.max_tokens
        assert window is None or (isinstance(window, int) and not isinstance(window, bool) and window > 0), f"max_tokens {window!r}"
        assert isinstance(embedder.batch_size, int) and embedder.batch_size > 0, f"batch_size {embedder.batch_size!r}"

    def test_empty_input(self, embedder: Embedder) -> None:
        vectors = _embed(embedder, [])
        assert vectors.shape == (0, embedder.dim), f"shape {vectors.shape} for no texts"

    @pytest.mark.parametrize("texts", ["a bare string", b"bytes", ["ok", 3], [None], 42], ids=["str", "bytes", "int-item", "none-item", "int"])
    def test_bad_arguments_raise_validation_error(self, embedder: Embedder, texts: Any) -> None:
        with pytest.raises(ValidationError):
            _embed(embedder, texts)

    @_SETTINGS
    @given(texts=_TEXTS)
    def test_rows_are_unit_float32(self, embedder: Embedder, texts: list[str]) -> None:
        _check_rows(embedder, _embed(embedder, texts), len(texts))

    @_SETTINGS
    @given(texts=_TEXTS)
    def test_deterministic_and_batch_independent(self, embedder: Embedder, texts: list[str]) -> None:
        import numpy as np

        batch = _embed(embedder, texts)
        again = _embed(embedder, tuple(texts))
        assert np.allclose(batch, again, atol=_ROUNDING), "the same texts got other vectors"
        for index, text in enumerate(texts):
            single = _embed(embedder, [text])
            assert np.allclose(single[0], batch[index], atol=_ROUNDING), f"{text!r} alone differs from its row in a batch"
        reversed_rows = _embed(embedder, texts[::-1])[::-1]
        assert np.allclose(reversed_rows, batch, atol=_ROUNDING), "the order of a batch changed its rows"
