"""MemlabStore inside a compiled StateGraph, and memlab's tools in LangGraph's prebuilt agent (real langgraph, fake models)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from memlab.integrations.langgraph import MemlabStore, memlab_tools


def _user(runtime: Runtime) -> str:
    return (runtime.context or {}).get("user", "anon")


def _fact(state: MessagesState) -> str | None:
    text = state["messages"][-1].content
    return text.removeprefix("remember: ") if isinstance(text, str) and text.startswith("remember: ") else None


def _prompt(state: MessagesState, memories: list) -> list:
    notes = "\n".join(item.value["text"] for item in memories)
    return [SystemMessage(f"Known about the user:\n{notes}"), *state["messages"]]


class _Recording(FakeListChatModel):
    """FakeListChatModel that keeps the prompts it was given."""

    prompts: list = []

    def _call(self, messages, *args, **kwargs):  # type: ignore[override]
        self.prompts.append([m.content for m in messages])
        return super()._call(messages, *args, **kwargs)


def _graph(model: Any, *, asynchronous: bool):
    """remember: a "remember: ..." message goes to ("memories", user); respond: the model answers with the memories found."""

    def remember(state: MessagesState, runtime: Runtime) -> dict:
        if (fact := _fact(state)) is not None:
            runtime.store.put(("memories", _user(runtime)), f"m{len(fact)}", {"text": fact})
        return {}

    def respond(state: MessagesState, runtime: Runtime) -> dict:
        found = runtime.store.search(("memories", _user(runtime)), query=state["messages"][-1].content, limit=2)
        return {"messages": [model.invoke(_prompt(state, found))]}

    async def aremember(state: MessagesState, runtime: Runtime) -> dict:
        if (fact := _fact(state)) is not None:
            await runtime.store.aput(("memories", _user(runtime)), f"m{len(fact)}", {"text": fact})
        return {}

    async def arespond(state: MessagesState, runtime: Runtime) -> dict:
        found = await runtime.store.asearch(("memories", _user(runtime)), query=state["messages"][-1].content, limit=2)
        return {"messages": [await model.ainvoke(_prompt(state, found))]}

    builder = StateGraph(MessagesState, context_schema=dict)
    builder.add_node("remember", aremember if asynchronous else remember)
    builder.add_node("respond", arespond if asynchronous else respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder


async def test_a_compiled_state_graph_remembers_and_recalls_through_memlab(stack):
    model = _Recording(responses=["Noted.", "You like green tea.", "Noted."], prompts=[])
    store = MemlabStore(stack, index={"fields": ["text"]})
    graph = _graph(model, asynchronous=True).compile(store=store)
    ann = {"user": "ann"}
    await graph.ainvoke({"messages": [HumanMessage("remember: Ann drinks green tea every morning")]}, context=ann)
    await graph.ainvoke({"messages": [HumanMessage("remember: Ann's bike is blue")]}, context=ann)
    out = await graph.ainvoke({"messages": [HumanMessage("what tea does Ann drink?")]}, context=ann)
    assert out["messages"][-1].content == "Noted."  # the fake's responses cycle; what matters is the prompt
    system = model.prompts[-1][0]
    assert system.splitlines()[1] == "Ann drinks green tea every morning"  # best match first
    # the items are memlab's: another store object on the stack reads them back
    items = await MemlabStore(stack).asearch(("memories", "ann"))
    assert sorted(item.value["text"] for item in items) == ["Ann drinks green tea every morning", "Ann's bike is blue"]
    # another user's namespace is separate
    await graph.ainvoke({"messages": [HumanMessage("what tea?")]}, context={"user": "bob"})
    assert model.prompts[-1][0] == "Known about the user:\n"


def test_the_same_graph_runs_sync_while_the_stack_runs_on_another_thread(threaded_stack):
    model = _Recording(responses=["Noted.", "Blue."], prompts=[])
    store = MemlabStore(threaded_stack.stack, loop=threaded_stack.loop, index={"fields": ["text"]})
    graph = _graph(model, asynchronous=False).compile(store=store)
    graph.invoke({"messages": [HumanMessage("remember: the bike is blue")]}, context={"user": "ann"})
    graph.invoke({"messages": [HumanMessage("which colour is the bike?")]}, context={"user": "ann"})
    assert model.prompts[-1][0] == "Known about the user:\nthe bike is blue"
    assert store.list_namespaces() == [("memories", "ann")]


class _ToolCallingFake(GenericFakeChatModel):
    """langchain-core's GenericFakeChatModel, accepting bind_tools (its scripted messages carry the tool calls)."""

    def bind_tools(self, tools, **kwargs):  # type: ignore[override]
        return self


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_memlab_tools_in_the_prebuilt_react_agent(stack):
    from langgraph.prebuilt import create_react_agent

    script = iter([
        AIMessage("", tool_calls=[{"name": "remember", "args": {"text": "Alice owns the billing service."}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "who owns the billing service?", "top_k": 3}, "id": "c2"}]),
        AIMessage("Alice owns it."),
    ])
    agent = create_react_agent(_ToolCallingFake(messages=script), memlab_tools(stack), store=MemlabStore(stack))
    out = await agent.ainvoke({"messages": [HumanMessage("Remember who owns billing, then tell me.")]})
    tool_results = {m.name: m.content for m in out["messages"] if isinstance(m, ToolMessage)}
    assert tool_results["remember"] == "remembered in main_dataset (completed)"
    assert "- Alice owns the billing service." in tool_results["recall"].splitlines()
    assert out["messages"][-1].content == "Alice owns it."
    # the fact is in memlab's permanent memory, where recall() finds it without the agent
    found = await stack.recall("who owns the billing service?", "CHUNKS", datasets=["main_dataset"])
    assert found[0].text == "Alice owns the billing service."


def test_tools_have_typed_schemas_and_run_sync(threaded_stack):
    remember, recall = memlab_tools(threaded_stack.stack, loop=threaded_stack.loop)
    assert (remember.name, recall.name) == ("remember", "recall")
    assert set(remember.args) == {"text"} and set(recall.args) == {"query", "top_k"}
    assert remember.invoke({"text": "Bob keeps the backups."}) == "remembered in main_dataset (completed)"
    assert recall.invoke({"query": "who keeps the backups?"}) == "- Bob keeps the backups."
    with pytest.raises(Exception, match="top_k"):
        recall.invoke({"query": "x", "top_k": 0})
