"""Session rerankers (issue 26 item 5): the built-ins' exact orders, the config names, objects first, the frames and the Grid."""

from __future__ import annotations

import pytest

from memlab import ConfigError, MemoryStack, StackConfig, ValidationError
from memlab.config import SESSION_RERANKERS, SessionConfig, build_session_reranker
from memlab.models import SessionQAEntry
from memlab.session import SessionManager
from memlab.session.rerankers import MAX_TOP_N, MMRSessionReranker, SessionReranker, jaccard
from memlab.session.retrievers import BM25SessionRetriever
from memlab.testing import fast_config


def _entry(qa_id: str, question: str, answer: str = "", time: str = "2024-01-01T00:00:00") -> SessionQAEntry:
    return SessionQAEntry(time=time, question=question, context="", answer=answer, qa_id=qa_id)


DUPLICATE_FIRST = [
    (_entry("a", "apple banana", "cherry"), 3.0),
    (_entry("a2", "apple banana", "cherry"), 2.9),  # the same turn again
    (_entry("b", "delta echo", "foxtrot"), 2.0),
]


async def test_mmr_pushes_a_near_duplicate_below_a_new_turn():
    # after "a": a2 = 0.7 * 2.9 / 3 - 0.3 * 1.0 = 0.377; b = 0.7 * 2 / 3 - 0.3 * 0.0 = 0.467
    reranked = await MMRSessionReranker(diversity=0.3).rerank("apple", DUPLICATE_FIRST, 3)
    assert [(entry.qa_id, score) for entry, score in reranked] == [("a", 1.0), ("b", 0.5), ("a2", pytest.approx(1 / 3))]
    kept = await MMRSessionReranker(diversity=0.0).rerank("apple", DUPLICATE_FIRST, 2)
    assert [entry.qa_id for entry, _ in kept] == ["a", "a2"]  # no diversity: the retriever's order
    assert reranked[0][0] is DUPLICATE_FIRST[0][0]  # the same turn objects, not copies
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3) and jaccard(set(), set()) == 0.0


def test_bad_parameters_are_refused():
    for bad in (-0.1, 1.5, True, "0.3"):
        with pytest.raises(ValidationError, match="diversity"):
            MMRSessionReranker(diversity=bad)  # type: ignore[arg-type]
    for bad in (0, MAX_TOP_N + 1, 2.5, True):
        with pytest.raises(ValidationError, match="top_n"):
            MMRSessionReranker(top_n=bad)  # type: ignore[arg-type]
    assert MMRSessionReranker(top_n=7).candidates(5) == 7 and MMRSessionReranker(top_n=7).candidates(30) == 30


def test_config_names_build_the_rerankers_and_none_builds_nothing(tmp_path, monkeypatch):
    assert set(SESSION_RERANKERS) == {"none", "mmr"}
    assert build_session_reranker(StackConfig(data_root=tmp_path)) is None  # the default
    built = build_session_reranker(StackConfig(data_root=tmp_path, session=SessionConfig(reranker="mmr", rerank_top_n=7)))
    assert isinstance(built, MMRSessionReranker) and built.top_n == 7
    with pytest.raises(ConfigError, match="unknown session reranker 'cross'; choose from mmr, none"):
        SessionConfig(reranker="cross")
    monkeypatch.setenv("SESSION_RERANKER", "mmr")
    monkeypatch.setenv("SESSION_RERANK_TOP_N", "12")
    config = StackConfig.from_env()
    assert (config.session.reranker, config.session.rerank_top_n) == ("mmr", 12)
    monkeypatch.setenv("SESSION_RERANK_TOP_N", "0")
    with pytest.raises(ConfigError, match="SESSION_RERANK_TOP_N must be a whole number from 1 to 10,000"):
        StackConfig.from_env()
    assert any(getattr(bound, "le", None) == MAX_TOP_N for bound in SessionConfig.model_fields["rerank_top_n"].metadata)  # the reranker's bound


class Counting(SessionReranker):
    """A toy reranker standing in for a user's cross-encoder: reverses the candidates, score 1 / rank, counts its calls."""

    name = "counting"

    def __init__(self, *, top_n: int = 4) -> None:
        super().__init__(top_n=top_n)
        self.calls: list[int] = []

    async def _rerank(self, query, hits):
        self.calls.append(len(hits))
        return [(entry, 1.0 / rank) for rank, (entry, _) in enumerate(reversed(hits), start=1)]


async def test_an_object_passed_to_the_stack_reranks_the_session_lane(tmp_path):
    toy = Counting(top_n=4)
    config = fast_config(tmp_path, session=SessionConfig(retriever="bm25", reranker="mmr"))  # the object wins over the name
    async with MemoryStack.from_config(config, session_reranker=toy) as stack:
        assert stack.session_manager.reranker is toy
        manager = stack.session_manager
        for word in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta"):
            await manager.add_qa("u", f"paris {word}", word, session_id="s")
        plain = await SessionManager(stack.cache, retriever=BM25SessionRetriever()).search("u", "paris", session_id="s", top_k=4)
        hits = await manager.search("u", "paris", session_id="s", top_k=2)
    assert toy.calls == [4]  # the retriever's best max(top_k, top_n) = 4
    assert [entry.qa_id for entry, _ in hits] == [entry.qa_id for entry, _ in reversed(plain)][:2]
    async with MemoryStack.from_config(config) as stack:
        assert isinstance(stack.session_manager.reranker, MMRSessionReranker)
    async with MemoryStack.from_config(fast_config(tmp_path / "plain")) as stack:
        assert stack.session_manager.reranker is None
    with pytest.raises(ConfigError, match="session_reranker= must be a session reranker .*memlab.session.rerankers.SessionReranker"):
        MemoryStack(fast_config(tmp_path), session_reranker=BM25SessionRetriever())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="the class Counting: pass an instance"):
        MemoryStack(fast_config(tmp_path), session_reranker=Counting)  # type: ignore[arg-type]


async def test_frames_quality_names_the_reranked_lane(tmp_path):
    import memlab.bench  # noqa: F401 - registers the quality evaluation
    from memlab.bench.conversations import synthetic

    config = fast_config(tmp_path, session=SessionConfig(retriever="bm25", reranker="mmr"))
    async with MemoryStack.from_config(config) as stack:
        frame = await stack.frames.quality(synthetic(size=12), k=(5,), resamples=50)
    assert set(frame["retriever"]) == {"bm25+mmr"}


def test_a_grid_varies_reranker_objects_and_refuses_them_beside_the_name():
    from memlab.experiments import ConversationalBenchmark, Grid

    workload = ConversationalBenchmark(size="tiny", limit=2)
    grid = Grid(base=fast_config("unused"), vary={"session_reranker": [MMRSessionReranker(), MMRSessionReranker(diversity=0.2, top_n=10)]},
                workload=workload)
    assert [cell.label() for cell in grid.cells] == [
        "session_reranker=MMRSessionReranker(diversity=0.5, top_n=20)",
        "session_reranker=MMRSessionReranker(diversity=0.2, top_n=10)",
    ]
    with pytest.raises(ConfigError, match="both decide session.reranker"):
        Grid(base=fast_config("unused"), vary={"session_reranker": [MMRSessionReranker()], "session.reranker": ["none", "mmr"]},
             workload=workload)
