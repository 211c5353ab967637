"""The keyword index stays right when another process writes the same SQLite session."""

import subprocess
import sys
import textwrap

from memlab.cache import SQLCache
from memlab.session import SessionManager

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from memlab.cache import SQLCache

    async def main(path, action, arg):
        cache = SQLCache(f"sqlite:///{path}")
        await cache.open()
        if action == "add":
            await cache.create_qa_entry("u", "s", question=arg, answer="from another process")
        elif action == "delete":
            assert await cache.delete_qa_entry("u", "s", arg)
        elif action == "edit":
            assert await cache.update_qa_entry("u", "s", arg, answer="rewritten elsewhere")
        await cache.close()

    asyncio.run(main(*sys.argv[1:]))
    """
)


def other_process(path, action, arg):
    subprocess.run([sys.executable, "-c", WRITER, str(path), action, arg], check=True, timeout=60)


async def test_index_sees_other_process_writes(tmp_path):
    path = tmp_path / "cache.db"
    cache = SQLCache(f"sqlite:///{path}")
    manager = SessionManager(cache)
    first = await manager.add_qa("u", "zebra facts", "stripes", session_id="s")
    assert [e.qa_id for e, _ in await manager.search("u", "zebra", session_id="s")] == [first]

    other_process(path, "add", "zebra habitat")
    hits = await manager.search("u", "zebra", session_id="s")
    assert [e.question for e, _ in hits] == ["zebra facts", "zebra habitat"]

    other_process(path, "edit", first)
    assert [e.answer for e, _ in await manager.search("u", "rewritten", session_id="s")] == ["rewritten elsewhere"]

    other_process(path, "delete", first)
    assert [e.question for e, _ in await manager.search("u", "zebra", session_id="s")] == ["zebra habitat"]
    await cache.close()
