"""MemlabChatMessageHistory with the real langchain-core: turns, RunnableWithMessageHistory, sync and async."""

from __future__ import annotations

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from memlab.exceptions import StackStateError, ValidationError
from memlab.integrations.langchain import MemlabChatMessageHistory


def _chain(model, seen: list):
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def record(value):
        seen.append(value.to_messages())
        return value

    return prompt | RunnableLambda(record) | model


#: RunnableWithMessageHistory is what issue 27 names; langchain-core 1.x deprecates it in favour of LangGraph
#: persistence (covered by test_langgraph_*), so its deprecation warning is expected here
_deprecated_runnable = pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")


def _pairs(messages):
    return [(type(m).__name__, m.content) for m in messages]


async def test_it_is_a_langchain_chat_history(stack):
    assert isinstance(MemlabChatMessageHistory(stack, "s1"), BaseChatMessageHistory)


async def test_a_human_and_ai_pair_is_one_memlab_turn(stack):
    history = MemlabChatMessageHistory(stack, "s1")
    await history.aadd_messages([HumanMessage("Where is the office?"), AIMessage("In Lyon.")])
    turns = await stack.session.get_session("s1")
    assert [(t.question, t.answer) for t in turns] == [("Where is the office?", "In Lyon.")]
    messages = await history.aget_messages()
    assert _pairs(messages) == [("HumanMessage", "Where is the office?"), ("AIMessage", "In Lyon.")]
    assert [m.id for m in messages] == [f"{turns[0].qa_id}:human", f"{turns[0].qa_id}:ai"]


async def test_a_question_alone_is_stored_at_once_and_the_next_answer_fills_it(stack):
    history = MemlabChatMessageHistory(stack, "s1")
    await history.aadd_messages([HumanMessage("Who owns billing?")])
    assert _pairs(await history.aget_messages()) == [("HumanMessage", "Who owns billing?")]
    await history.aadd_messages([AIMessage("Alice.")])
    turns = await stack.session.get_session("s1")
    assert [(t.question, t.answer) for t in turns] == [("Who owns billing?", "Alice.")]


async def test_an_answer_alone_and_two_questions_in_a_row(stack):
    history = MemlabChatMessageHistory(stack, "s1")
    await history.aadd_messages([AIMessage("Hello, how can I help?"), HumanMessage("q1"), HumanMessage("q2"), AIMessage("a2")])
    turns = await stack.session.get_session("s1")
    assert [(t.question, t.answer) for t in turns] == [("", "Hello, how can I help?"), ("q1", ""), ("q2", "a2")]
    assert _pairs(await history.aget_messages()) == [
        ("AIMessage", "Hello, how can I help?"), ("HumanMessage", "q1"), ("HumanMessage", "q2"), ("AIMessage", "a2"),
    ]


async def test_turns_memlab_writes_read_back_as_messages(stack):
    await stack.remember("Alice owns the billing service.", session_id="s1", self_improvement=False)
    history = MemlabChatMessageHistory(stack, "s1")
    assert _pairs(await history.aget_messages()) == [("AIMessage", "Alice owns the billing service.")]


@pytest.mark.parametrize("message", [SystemMessage("be nice"), ToolMessage("42", tool_call_id="t1")])
async def test_messages_a_turn_cannot_hold_are_refused_before_anything_is_written(stack, message):
    history = MemlabChatMessageHistory(stack, "s1")
    with pytest.raises(ValidationError, match="human and AI messages"):
        await history.aadd_messages([HumanMessage("q"), message])
    assert await history.aget_messages() == []


async def test_content_blocks_are_stored_as_their_text(stack):
    history = MemlabChatMessageHistory(stack, "s1")
    await history.aadd_messages([HumanMessage([{"type": "text", "text": "part one"}]), AIMessage("ok")])
    assert (await stack.session.get_session("s1"))[0].question == "part one"


async def test_clear_deletes_the_session_and_leaves_others(stack):
    one, two = MemlabChatMessageHistory(stack, "s1"), MemlabChatMessageHistory(stack, "s2")
    await one.aadd_messages([HumanMessage("q"), AIMessage("a")])
    await two.aadd_messages([HumanMessage("q2"), AIMessage("a2")])
    await one.aclear()
    assert await stack.session.get_session("s1") == []
    assert len(await stack.session.get_session("s2")) == 1


async def test_each_user_has_their_own_session_of_the_same_id(stack):
    other = await stack.users.create("bob")
    await MemlabChatMessageHistory(stack, "s1").aadd_messages([HumanMessage("mine"), AIMessage("yes")])
    assert await MemlabChatMessageHistory(stack, "s1", user=other).aget_messages() == []


async def test_a_blank_session_id_is_refused(stack):
    with pytest.raises(ValidationError):
        MemlabChatMessageHistory(stack, " ")


async def test_a_sync_call_on_the_stacks_own_loop_points_at_the_async_method(stack):
    history = MemlabChatMessageHistory(stack, "s1")
    with pytest.raises(StackStateError, match="aget_messages"):
        history.messages  # noqa: B018


def test_a_sync_call_without_a_known_loop_says_what_to_pass(threaded_stack):
    history = MemlabChatMessageHistory(threaded_stack.stack, "s1")  # built outside the stack's loop, no loop=
    with pytest.raises(StackStateError, match="loop="):
        history.add_messages([HumanMessage("q")])


@_deprecated_runnable
async def test_runnable_with_message_history_async(stack):
    seen: list = []
    model = FakeListChatModel(responses=["Lyon.", "Since 2019."])
    chain = RunnableWithMessageHistory(
        _chain(model, seen),
        lambda session_id: MemlabChatMessageHistory(stack, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "chat-1"}}
    first = await chain.ainvoke({"question": "Where is the office?"}, config=config)
    second = await chain.ainvoke({"question": "Since when?"}, config=config)
    assert (first.content, second.content) == ("Lyon.", "Since 2019.")
    # the second prompt carried the first exchange, read back from memlab
    assert _pairs(seen[1]) == [
        ("SystemMessage", "You are terse."), ("HumanMessage", "Where is the office?"), ("AIMessage", "Lyon."),
        ("HumanMessage", "Since when?"),
    ]
    turns = await stack.session.get_session("chat-1")
    assert [(t.question, t.answer) for t in turns] == [("Where is the office?", "Lyon."), ("Since when?", "Since 2019.")]


@_deprecated_runnable
def test_runnable_with_message_history_sync_while_the_stack_runs_on_another_thread(threaded_stack):
    stack, loop = threaded_stack.stack, threaded_stack.loop
    seen: list = []
    chain = RunnableWithMessageHistory(
        _chain(FakeListChatModel(responses=["Lyon.", "Since 2019."]), seen),
        lambda session_id: MemlabChatMessageHistory(stack, session_id, loop=loop),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "chat-1"}}
    chain.invoke({"question": "Where is the office?"}, config=config)
    chain.invoke({"question": "Since when?"}, config=config)
    assert _pairs(seen[1])[1:3] == [("HumanMessage", "Where is the office?"), ("AIMessage", "Lyon.")]
    history = MemlabChatMessageHistory(stack, "chat-1", loop=loop)
    assert len(history.messages) == 4
    history.clear()
    assert history.messages == []
    assert threaded_stack.run(stack.session.get_session("chat-1")) == []


async def test_async_methods_work_from_another_loop_than_the_stacks(threaded_stack):
    history = MemlabChatMessageHistory(threaded_stack.stack, "s1", loop=threaded_stack.loop)
    await history.aadd_messages([HumanMessage("q"), AIMessage("a")])
    assert _pairs(await history.aget_messages()) == [("HumanMessage", "q"), ("AIMessage", "a")]
    await history.aclear()
    assert await history.aget_messages() == []
