"""ExplorerPage, headless: the page memlab ui serves: the sessions grid, the latest session opened, refresh keeping state, auto-refresh."""

from __future__ import annotations

import asyncio

from memlab import MemoryStack
from memlab.testing import fast_config
from memlab.widgets import ExplorerPage, SessionExplorer


async def test_the_first_refresh_opens_the_latest_session_and_later_ones_keep_it(chat, ask) -> None:
    stack, _, qa_ids = chat
    stack.clock.advance(60)
    other = await ask("Who described the Turing machine?", session_id="other")
    page = ExplorerPage(stack)
    assert page.session is None and "not yet" in page.header.value
    await page.refresh()
    user = (await stack.users.default()).id
    assert page.usage.session_grid.widget.selected == f"{user}/other"  # the most recently active, its row selected
    assert isinstance(page.session, SessionExplorer) and page.session.turn_grid.widget.row_keys == [other]
    assert page.sessions_box.children == (page.usage.session_grid.widget,)
    assert page.usage.usage_grid.widget in page.details.children[0].children and page.details.selected_index is None  # folded
    assert str(stack.config.data_root.resolve()) in page.header.value and "2 sessions" in page.header.value

    stack.clock.advance(60)
    newer = await ask("Where did Alan Turing work?", session_id="chat")  # "chat" is now the latest
    page.usage.session_grid.select(f"{user}/other")
    await page.usage.settle()
    page.session.turn_grid.sort("turn", descending=True)
    await page.refresh()  # reads again; keeps the open session, its sort
    assert page.session.session_select.value == "other" and page.session.turn_grid.widget.sort_by == "turn"
    await page.refresh(latest=True)
    assert page.session.session_select.value == "chat" and page.session.turn_grid.widget.row_keys == [newer, *reversed(qa_ids)]


async def test_refresh_button_and_auto_refresh_read_again(chat) -> None:
    stack, _, _ = chat
    page = ExplorerPage(stack, interval=0.01)
    await page.refresh()
    first = page.loaded_at
    page.refresh_button.click()
    await page.settle()
    assert page.loaded_at > first
    page.auto_refresh.value = True  # as a click on the checkbox
    seen = page.loaded_at
    for _ in range(200):
        await asyncio.sleep(0.01)
        if page.loaded_at > seen:
            break
    assert page.loaded_at > seen, "auto-refresh did not reload"
    page.auto_refresh.value = False
    assert page._follow is None
    page.auto_refresh.value = True
    await page.close()  # stops the loop; the stack was not opened by the page: it stays open
    assert page._follow is None and stack.state.value == "open"


async def test_an_empty_data_root_shows_no_session(stack) -> None:
    page = ExplorerPage(stack)
    await page.refresh()
    assert page.session is None and page.usage.session_grid.widget.total == 0 and "0 sessions" in page.header.value


async def test_from_env_opens_the_stack_of_the_environment_and_close_closes_it(tmp_path, monkeypatch) -> None:
    async with MemoryStack.from_config(fast_config(tmp_path)) as stack:
        await stack.remember("Alice owns the billing service.", session_id="notes", self_improvement=False)
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("EMBEDDING_MODEL", "memlab/hashing")
    page = await ExplorerPage.from_env()
    try:
        assert page.session is not None and page.session.session_select.value == "notes"
        assert page.session.turn_frame()["source"].tolist() == ["stored"]
    finally:
        await page.close()
    assert page.stack.state.value == "closed"
