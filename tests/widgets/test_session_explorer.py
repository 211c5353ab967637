"""SessionExplorer, driven headless: users and sessions, turns with guidance and graph elements, feedback."""

from __future__ import annotations

import html

from memlab.widgets import SessionExplorer


async def test_it_shows_the_session_turns_usage_guidance_and_elements(chat, questions) -> None:
    stack, remembered, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    user = await stack.users.default()
    assert explorer.user_select.value == str(user.id) and explorer.session_select.value == "chat"
    table = html.unescape(explorer.turns.value)
    assert all(question in table for question in questions) and all(qa_id in table for qa_id in qa_ids)
    summary = explorer.summary.value
    usage = await stack.usage.get("chat")
    assert f"{usage.tokens_in} / {usage.tokens_out}" in summary and "memlab/offline" in summary and "unpriced" in summary
    assert explorer.turn_select.options[0][1] == qa_ids[0]
    # the second turn was served the rule the first one wrote, and used graph elements of the Curie document
    explorer.turn_select.value = qa_ids[1]
    detail = html.unescape(explorer.turn_detail.value)
    [rule] = [row for row in await stack.session_manager.get_context_entries(str(user.id), session_id="chat") if row["kind"] == "context"]
    assert rule["id"] in detail and "Always cite the source." in detail
    curie_doc = (await stack.datasets.list_data(remembered.dataset_id))[0]
    entry = (await stack.session.get_session(session_id="chat"))[1]
    assert all(element_id in detail for element_id in entry.used_graph_element_ids["edge_ids"])
    assert "Marie Curie discovered Polonium" in detail and curie_doc.name in detail


async def test_feedback_is_added_shown_and_deleted(chat) -> None:
    stack, _, qa_ids = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    explorer.turn_select.value = qa_ids[1]
    explorer.feedback_text.value = "spot on"
    explorer.feedback_score.value = 5
    explorer.save_button.click()
    await explorer.settle()
    stored = {entry.qa_id: entry for entry in await stack.session.get_session(session_id="chat")}
    assert (stored[qa_ids[1]].feedback_text, stored[qa_ids[1]].feedback_score) == ("spot on", 5)
    assert "5/5 · spot on" in explorer.turns.value and "5/5 · spot on" in explorer.turn_detail.value
    assert explorer.turn_select.value == qa_ids[1] and "feedback saved" in explorer.status.value
    explorer.delete_button.click()
    await explorer.settle()
    stored = {entry.qa_id: entry for entry in await stack.session.get_session(session_id="chat")}
    assert (stored[qa_ids[1]].feedback_text, stored[qa_ids[1]].feedback_score) == (None, None)
    assert "spot on" not in explorer.turns.value and explorer.feedback_text.value == "" and explorer.feedback_score.value == 0


async def test_saving_nothing_says_so_and_writes_nothing(chat) -> None:
    stack, _, _ = chat
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    explorer.save_button.click()
    await explorer.settle()
    assert "nothing to save" in explorer.status.value
    assert all(entry.feedback_text is None and entry.feedback_score is None for entry in await stack.session.get_session(session_id="chat"))


async def test_switching_session_and_user_updates_the_turns(chat, ask) -> None:
    stack, _, qa_ids = chat
    other_qa = await ask("Who described the Turing machine?", session_id="other")
    agent = await stack.users.create("agent", parent_user_id=(await stack.users.default()).id)
    agent_qa = await ask("Where did Alan Turing work?", session_id="agent-chat", user=agent)
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    assert {value for _, value in explorer.session_select.options} == {"chat", "other"}
    explorer.session_select.value = "other"
    await explorer.settle()
    assert other_qa in explorer.turns.value and qa_ids[0] not in explorer.turns.value
    assert str(agent.id) in [value for _, value in explorer.user_select.options]  # owns a session the default user may see
    explorer.user_select.value = str(agent.id)
    await explorer.settle()
    assert [value for _, value in explorer.session_select.options] == ["agent-chat"]
    assert agent_qa in explorer.turns.value and "Where did Alan Turing work?" in explorer.turns.value
    assert other_qa not in explorer.turns.value


async def test_a_user_without_sessions_and_a_stored_note(stack) -> None:
    explorer = SessionExplorer(stack)
    await explorer.refresh()
    assert explorer.session_select.options == () and "no sessions yet" in explorer.summary.value
    note = await stack.remember("just chatting", session_id="notes", self_improvement=False)
    await explorer.refresh()
    assert explorer.session_select.value == "notes"
    assert note.data_ids[0] in explorer.turns.value and "(stored) just chatting" in explorer.turn_select.label


async def test_session_id_picks_the_first_session_and_its_owner(chat, ask) -> None:
    stack, _, _ = chat
    agent = await stack.users.create("agent", parent_user_id=(await stack.users.default()).id)
    agent_qa = await ask("Where did Alan Turing work?", session_id="agent-chat", user=agent)
    explorer = SessionExplorer(stack, session_id="agent-chat")
    await explorer.refresh()
    assert (explorer.user_select.value, explorer.session_select.value) == (str(agent.id), "agent-chat")
    assert agent_qa in explorer.turns.value
