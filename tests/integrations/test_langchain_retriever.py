"""MemlabRetriever against langchain-tests' official RetrieversIntegrationTests, and its own behaviour."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from memlab.integrations.langchain import MemlabRetriever, recall_to_document
from memlab.models import SessionRecallResponse, SystemRecallResponse

from tests.integrations.conftest import Threaded, running_stack

FACTS = [
    "Alice owns the billing service and its invoices.",
    "The billing service runs in the Lyon data centre.",
    "Bob maintains the billing database backups.",
    "Invoices for billing are sent on the first of the month.",
    "Carol reviews every billing change before release.",
]


@pytest.fixture(scope="module")
def billing_stack(tmp_path_factory) -> Iterator[Threaded]:
    """A stack (loop in its own thread) whose main_dataset holds five one-chunk billing documents."""
    with running_stack(tmp_path_factory.mktemp("retriever")) as threaded:
        result = threaded.run(threaded.stack.remember(FACTS))
        assert result.status == "completed"
        yield threaded


class TestMemlabRetrieverStandard(RetrieversIntegrationTests):
    """The official suite: k as a constructor parameter and per call, Documents from invoke and ainvoke."""

    @pytest.fixture(autouse=True)
    def _stack(self, billing_stack: Threaded) -> None:
        self._threaded = billing_stack

    @property
    def retriever_constructor(self) -> type[MemlabRetriever]:
        return MemlabRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"stack": self._threaded.stack, "loop": self._threaded.loop}

    @property
    def retriever_query_example(self) -> str:
        return "who owns billing?"


def test_documents_carry_the_recall_fields(billing_stack):
    retriever = MemlabRetriever(stack=billing_stack.stack, loop=billing_stack.loop, k=2)
    docs = retriever.invoke("who owns billing invoices?")
    assert len(docs) == 2
    assert all(doc.page_content in FACTS for doc in docs)
    assert {doc.metadata["source"] for doc in docs} == {"graph"}
    assert {doc.metadata["search_type"] for doc in docs} == {"CHUNKS"}
    assert all(doc.id for doc in docs)


def test_an_unknown_invoke_keyword_is_refused(billing_stack):
    retriever = MemlabRetriever(stack=billing_stack.stack, loop=billing_stack.loop)
    with pytest.raises(TypeError):
        retriever.invoke("billing", top_n=3)


async def test_session_scope_returns_turns(stack):
    await stack.remember("Alice owns billing.", session_id="s1", self_improvement=False)
    docs = await MemlabRetriever(stack=stack, query_type=None, session_id="s1", scope="session").ainvoke("who owns billing")
    assert [doc.page_content for doc in docs] == ["Question: \nAnswer: Alice owns billing."]
    assert docs[0].metadata["session_id"] == "s1"


def test_system_markers_are_not_documents():
    marker = SystemRecallResponse(status="memory_warming_up", text="warming up")
    assert recall_to_document(marker) is None
    turn = SessionRecallResponse(session_id="s", matched_tokens=1, time="t", question="q", context="", answer="a", qa_id="x")
    assert recall_to_document(turn) == Document(
        page_content="Question: q\nAnswer: a", id="x",
        metadata={"source": "session", "session_id": "s", "matched_tokens": 1, "time": "t", "context": "", "qa_id": "x"},
    )
