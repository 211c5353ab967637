import pytest
from pydantic import ValidationError as PydanticValidationError

from memlab.models import SessionContextEntry, SessionFeedbackEntry, SessionQAEntry


def qa(**kw):
    return SessionQAEntry(time="t", question="q", context="", answer="a", **kw)


@pytest.mark.parametrize("score", [1, 3, 5])
def test_feedback_score_in_range(score):
    assert qa(feedback_score=score).feedback_score == score


@pytest.mark.parametrize("score", [0, 6, -1])
def test_feedback_score_out_of_range(score):
    with pytest.raises(PydanticValidationError):
        qa(feedback_score=score)


def test_empty_collections_normalise_to_none():
    entry = qa(used_graph_element_ids={}, used_session_context_ids=[], memify_metadata={})
    assert entry.used_graph_element_ids is None
    assert entry.used_session_context_ids is None
    assert entry.memify_metadata is None


def test_graph_ids_accept_only_node_and_edge_keys():
    assert qa(used_graph_element_ids={"node_ids": ["n1"]}).used_graph_element_ids == {"node_ids": ["n1"]}
    with pytest.raises(PydanticValidationError):
        qa(used_graph_element_ids={"chunk_ids": ["c"]})


def test_context_entry_rules():
    entry = SessionContextEntry(section="rules", content="  Always   Cite Sources  " + "x" * 400, confidence=1.7)
    assert entry.kind == "context"
    assert len(entry.content) == 280
    assert entry.normalized_content.startswith("always cite sources")
    assert entry.confidence == 1.0
    assert not SessionContextEntry(section="goals", content="g", harmful_count=1, confidence=0.9).usable
    assert SessionContextEntry(section="goals", content="g", confidence=0.75).usable
    with pytest.raises(PydanticValidationError):
        SessionContextEntry(section="tool_rules", content="x")  # agent section under qa profile
    assert SessionContextEntry(section="tool_rules", context_profile="agent", content="x").section == "tool_rules"
    with pytest.raises(PydanticValidationError):
        SessionContextEntry(section="rules", content="   ")
    with pytest.raises(PydanticValidationError):
        SessionContextEntry(section="rules", content="x", helpful_count=True)


@pytest.mark.parametrize("rating,expected", [(4, 4), (0, None), (9, None), (True, None), ("4", None), (None, None)])
def test_feedback_entry_rating(rating, expected):
    assert SessionFeedbackEntry(referenced_qa_rating=rating).referenced_qa_rating == expected
