"""UsageExplorer, headless: the sessions and per-model usage grids, cost by model, and a selected session opening in a SessionExplorer."""

from __future__ import annotations

from memlab.charts import format_value
from memlab.widgets import SessionExplorer, UsageExplorer


async def test_sessions_and_usage_are_grids_formatted_by_kind(chat, ask) -> None:
    stack, _, _ = chat
    await ask("Who described the Turing machine?", session_id="other")
    view = UsageExplorer(stack)
    await view.refresh()
    sessions = view.session_grid
    assert {row["session_id"] for row in sessions.page_rows} == {"chat", "other"} and sessions.widget.count == 2
    usage = await stack.usage.get("chat")
    chat_row = next(row for row in sessions.page_rows if row["session_id"] == "chat")
    assert chat_row["tokens_in"] == format_value(usage.tokens_in, "count") and chat_row["cost_usd"] == ""  # the offline model is unpriced
    assert {row["model"] for row in view.usage_grid.page_rows} >= {"memlab/offline"}
    assert "cost by model, last 30d" in view.cost.value and "memlab/offline" in view.cost.value
    sessions.sort("tokens_in", descending=True)
    assert sessions.page_rows[0]["session_id"] == "chat"  # three turns against one
    sessions.filter("session_id", "oth")
    assert [row["session_id"] for row in sessions.page_rows] == ["other"]
    view.range_select.value = "24h"
    await view.settle()
    assert "last 24h" in view.cost.value


async def test_selecting_a_session_opens_it_in_a_session_explorer(two_users) -> None:
    """The click-through of the usage view: a row's ``selected`` trait (what a click sets) opens that session below."""
    stack, qa_ids, other_qa, agent, agent_qa = two_users
    view = UsageExplorer(stack)
    await view.refresh()
    assert view.explorer is None
    key = f"{(await stack.users.default()).id}/chat"
    view.session_grid.widget.selected = key  # as the browser sets it
    await view.settle()
    explorer = view.explorer
    assert isinstance(explorer, SessionExplorer) and view.explorer_box.children == (explorer.widget,)
    assert explorer.session_select.value == "chat" and explorer.turn_grid.widget.row_keys == qa_ids
    view.usage_grid.select(f"{agent.id}/agent-chat")  # a row of the per-model grid opens its session too
    await view.settle()
    assert view.explorer is explorer and explorer.user_select.value == str(agent.id)
    assert explorer.turn_grid.widget.row_keys == [agent_qa]
    await view.open_session("other")
    assert explorer.turn_grid.widget.row_keys == [other_qa]


async def test_an_empty_stack_shows_empty_grids(stack) -> None:
    view = UsageExplorer(stack)
    await view.refresh()
    assert view.session_grid.widget.total == 0 and view.usage_grid.widget.total == 0 and "no model calls" in view.cost.value
    await view.refresh()  # a second refresh updates the same grids
    assert view.grids.children == (view.session_grid.widget, view.usage_grid.widget)


async def test_the_first_session_opened_is_read_once(two_users, monkeypatch) -> None:
    """Building the SessionExplorer loads the session it is opened on: no second read (a 10,000-turn session would take twice as long)."""
    stack, qa_ids, other_qa, agent, agent_qa = two_users
    reads = []
    get_session = stack.session.get_session

    async def counted(*args, **kwargs):
        reads.append(kwargs.get("session_id"))
        return await get_session(*args, **kwargs)

    monkeypatch.setattr(stack.session, "get_session", counted)
    view = UsageExplorer(stack)
    await view.refresh()
    explorer = await view.open_session("agent-chat", agent.id)  # a child user's session: its owner is found by the first load
    assert reads == ["agent-chat"] and explorer.user_select.value == str(agent.id)
    assert explorer.turn_grid.widget.row_keys == [agent_qa]
    await view.open_session("chat")  # the explorer exists: open() loads the other session
    assert reads == ["agent-chat", "chat"] and explorer.turn_grid.widget.row_keys == qa_ids
