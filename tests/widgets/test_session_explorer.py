"""SessionExplorer, driven headless: users and sessions, the turns grid, a selected turn's detail and inspector, feedback."""

from __future__ import annotations

import html

from memlab.charts import format_value
from memlab.widgets import SessionExplorer, TurnInspector


async def test_it_shows_the_session_turns_usage_guidance_and_elements(chat, questions) -> None:
    stack, remembered, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    user = await stack.users.default()
    assert explorer.user_select.value == str(user.id) and explorer.session_select.value == "chat"
    grid = explorer.turn_grid
    assert grid.widget.row_keys == qa_ids and [row["question"] for row in grid.page_rows] == list(questions)
    assert [row["turn"] for row in grid.page_rows] == ["1", "2", "3"] and {row["source"] for row in grid.page_rows} == {"search"}
    summary = explorer.summary.value
    usage = await stack.usage.get("chat")
    assert f"{format_value(usage.tokens_in, 'count')} / {format_value(usage.tokens_out, 'count')}" in summary
    assert "memlab/offline" in summary and "unpriced" in summary
    assert explorer.inspector is None and "select a turn in the grid" in explorer.turn_detail.value
    # the second turn was served the rule the first one wrote, and used graph elements of the Curie document
    explorer.select_turn(qa_ids[1])
    detail = html.unescape(explorer.turn_detail.value)
    [rule] = [row for row in await stack.session_manager.get_context_entries(str(user.id), session_id="chat") if row["kind"] == "context"]
    assert rule["id"] in detail and "Always cite the source." in detail
    curie_doc = (await stack.datasets.list_data(remembered.dataset_id))[0]
    entry = (await stack.session.get_session(session_id="chat"))[1]
    assert all(element_id in detail for element_id in entry.used_graph_element_ids["edge_ids"])
    assert "Marie Curie discovered Polonium" in detail and curie_doc.name in detail
    assert grid.page_rows[1]["guidance"] == "1" and grid.page_rows[1]["elements"] == str(sum(map(len, entry.used_graph_element_ids.values())))


async def test_selecting_a_turn_opens_it_in_a_turn_inspector(chat) -> None:
    """The click-through: the grid's ``selected`` trait (what a click on a row sets) opens that turn's lanes and phases below."""
    stack, _, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    explorer.turn_grid.widget.selected = qa_ids[2]  # as the browser sets it
    await explorer.settle()
    inspector = explorer.inspector
    assert isinstance(inspector, TurnInspector) and (inspector.session_id, inspector.qa_id) == ("chat", qa_ids[2])
    assert explorer.inspector_box.children == (inspector.widget,)
    assert inspector.trace is not None and inspector.trace["lanes"]["rewrite"] is not None
    assert "And where did she work?" in html.unescape(inspector.facts.value)
    explorer.turn_grid.widget.selected = qa_ids[0]
    await explorer.settle()
    assert explorer.inspector.qa_id == qa_ids[0]
    explorer.select_turn(None)
    await explorer.settle()
    assert explorer.inspector is None and explorer.inspector_box.children == ()


async def test_the_turns_grid_sorts_filters_and_pages(chat, ask) -> None:
    stack, _, qa_ids = chat
    extra = [await ask(f"Who discovered Polonium, question {n}?") for n in range(4)]
    explorer = SessionExplorer(stack, page_size=3)
    await explorer.refresh()
    grid = explorer.turn_grid
    assert (grid.widget.total, grid.pages, grid.widget.row_keys) == (7, 3, qa_ids)
    grid.go_to(2)
    assert grid.widget.row_keys == [extra[-1]]
    grid.filter("question", "polonium")
    assert grid.widget.total == 5 and grid.widget.page == 0
    grid.sort("turn", descending=True)
    assert grid.widget.row_keys == [extra[3], extra[2], extra[1]]
    grid.filter("turn", "<=2")
    assert grid.widget.row_keys == [qa_ids[1]]  # "Who discovered Polonium?" is turn 2; turn 1 has no "polonium"


async def test_feedback_is_added_shown_and_deleted(chat) -> None:
    stack, _, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    explorer.select_turn(qa_ids[1])
    explorer.feedback_text.value = "spot on"
    explorer.feedback_score.value = 5
    explorer.save_button.click()
    await explorer.settle()
    stored = {entry.qa_id: entry for entry in await stack.session.get_session(session_id="chat")}
    assert (stored[qa_ids[1]].feedback_text, stored[qa_ids[1]].feedback_score) == ("spot on", 5)
    assert explorer.turn_grid.page_rows[1]["feedback"] == "5/5 · spot on" and "5/5 · spot on" in explorer.turn_detail.value
    assert explorer.turn_grid.widget.selected == qa_ids[1] and "feedback saved" in explorer.status.value
    explorer.delete_button.click()
    await explorer.settle()
    stored = {entry.qa_id: entry for entry in await stack.session.get_session(session_id="chat")}
    assert (stored[qa_ids[1]].feedback_text, stored[qa_ids[1]].feedback_score) == (None, None)
    assert explorer.turn_grid.page_rows[1]["feedback"] == "" and explorer.feedback_text.value == "" and explorer.feedback_score.value == 0


def test_the_feedback_buttons_have_text_labels_and_no_icon_glyphs(stack) -> None:
    explorer = SessionExplorer(stack)
    for button in (explorer.save_button, explorer.delete_button):
        assert button.icon == "" and button.description.endswith("feedback")


async def test_saving_nothing_says_so_and_writes_nothing(chat) -> None:
    stack, _, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    explorer.save_button.click()
    await explorer.settle()
    assert "pick a turn first" in explorer.status.value
    explorer.select_turn(qa_ids[0])
    await explorer.settle()
    explorer.save_button.click()
    await explorer.settle()
    assert "nothing to save" in explorer.status.value
    assert all(entry.feedback_text is None and entry.feedback_score is None for entry in await stack.session.get_session(session_id="chat"))


async def test_switching_session_and_user_updates_the_turns(two_users) -> None:
    stack, qa_ids, other_qa, agent, agent_qa = two_users
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    assert {value for _, value in explorer.session_select.options} == {"chat", "other"}
    explorer.session_select.value = "chat"
    await explorer.settle()
    explorer.select_turn(qa_ids[0])
    await explorer.settle()
    explorer.session_select.value = "other"
    await explorer.settle()
    assert explorer.turn_grid.widget.row_keys == [other_qa] and explorer.turn_grid.widget.selected == "" and explorer.inspector is None
    assert str(agent.id) in [value for _, value in explorer.user_select.options]  # owns a session the default user may see
    explorer.user_select.value = str(agent.id)
    await explorer.settle()
    assert [value for _, value in explorer.session_select.options] == ["agent-chat"]
    assert explorer.turn_grid.widget.row_keys == [agent_qa] and explorer.turn_grid.page_rows[0]["question"] == "Where did Alan Turing work?"


async def test_open_jumps_to_a_session_of_another_user(two_users) -> None:
    stack, qa_ids, _, agent, agent_qa = two_users
    explorer = SessionExplorer(stack)
    await explorer.open("agent-chat", agent.id)
    assert (explorer.user_select.value, explorer.session_select.value) == (str(agent.id), "agent-chat")
    assert explorer.turn_grid.widget.row_keys == [agent_qa]
    await explorer.open("chat")
    assert explorer.session_select.value == "chat" and explorer.turn_grid.widget.row_keys == qa_ids


async def test_a_user_without_sessions_and_a_stored_note(stack) -> None:
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    assert explorer.session_select.options == () and "no sessions yet" in explorer.summary.value
    assert explorer.turn_grid.widget.total == 0
    note = await stack.remember("just chatting", session_id="notes", self_improvement=False)
    await explorer.refresh()
    assert explorer.session_select.value == "notes"
    [row] = explorer.turn_grid.page_rows
    assert row["qa_id"] == note.data_ids[0] and row["question"] == "(stored) just chatting" and row["source"] == "stored"
    assert row["mode"] == "" and row["latency_ms"] == ""


async def test_session_id_picks_the_first_session_and_its_owner(two_users) -> None:
    stack, _, _, agent, agent_qa = two_users
    explorer = SessionExplorer(stack, session_id="agent-chat")
    await explorer.refresh()
    assert (explorer.user_select.value, explorer.session_select.value) == (str(agent.id), "agent-chat")
    assert explorer.turn_grid.widget.row_keys == [agent_qa]
