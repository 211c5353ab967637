"""The keyword index answers exactly like scanning every turn (SPEC §9.2)."""

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.cache import MemoryCache
from memlab.session import SessionManager, tokenize
from memlab.testing import FakeClock

WORDS = st.sampled_from(["paris", "france", "tea", "Tea", "x", "déjà", "well-known", "the", "a1", "b_2"])
TEXT = st.lists(WORDS, max_size=6).map(" ".join)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), TEXT, TEXT),
        st.tuples(st.just("delete"), st.integers(0, 20), st.just("")),
        st.tuples(st.just("edit"), st.integers(0, 20), TEXT),
        st.tuples(st.just("search"), TEXT, st.integers(1, 5)),
    ),
    max_size=25,
)


def brute_force(entries, query, top_k):
    wanted = tokenize(query)
    scored = [(entry, len(wanted & tokenize(f"{entry.question} {entry.context} {entry.answer}"))) for entry in entries]
    ranked = sorted((item for item in scored if item[1] > 0), key=lambda item: -item[1])  # stable: oldest first
    return [(entry.qa_id, score) for entry, score in ranked[:top_k]]


@settings(max_examples=80, deadline=None)
@given(OPS)
def test_index_matches_full_scan(ops):
    async def run():
        manager = SessionManager(MemoryCache(clock=FakeClock()))
        ids = []
        for op in ops:
            if op[0] == "add":
                ids.append(await manager.add_qa("u", op[1], op[2], session_id="s"))
            elif op[0] == "delete" and ids:
                await manager.delete_qa("u", ids[op[1] % len(ids)], session_id="s")
            elif op[0] == "edit" and ids:
                await manager.update_qa("u", ids[op[1] % len(ids)], session_id="s", answer=op[2] or "-")
            elif op[0] == "search":
                entries = await manager.get_session("u", session_id="s")
                got = [(entry.qa_id, score) for entry, score in await manager.search("u", op[1], session_id="s", top_k=op[2])]
                assert got == brute_force(entries, op[1], op[2])

    asyncio.run(run())
