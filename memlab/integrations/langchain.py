"""LangChain adapters: a chat message history over a memlab session, a retriever over ``recall()``.

Needs ``pip install 'memlab[langchain]'`` (langchain-core)::

    from langchain_core.runnables.history import RunnableWithMessageHistory
    from memlab.integrations.langchain import MemlabChatMessageHistory, MemlabRetriever

    async with MemoryStack.from_config(cfg) as stack:
        chain = RunnableWithMessageHistory(model, lambda sid: MemlabChatMessageHistory(stack, sid))
        await chain.ainvoke("hi", config={"configurable": {"session_id": "chat-1"}})
        docs = await MemlabRetriever(stack=stack, k=5).ainvoke("who owns billing?")

**Messages and turns.** A memlab session stores turns (question, answer). A human
message followed by an AI message becomes one turn; a human message with no AI
message after it is stored at once as a turn with an empty answer, and the next AI
message fills that answer in (so a history read between the two sees the question);
an AI message with no question before it is a turn with an empty question (as
``remember(text, session_id=...)`` writes one). Reading gives each turn back as its
human message then its AI message (empty halves left out), ids ``<qa_id>:human`` /
``<qa_id>:ai``. Turns memlab itself writes (``search``, ``recall`` completions) read
back the same way. System, tool and function messages have no place in a turn and
raise :class:`~memlab.exceptions.ValidationError` before anything is written (keep
the system prompt in the prompt template, as ``RunnableWithMessageHistory`` does).
Content blocks are stored as the message's text.

**Lifetime.** ``clear()`` deletes the session (its turns and context entries). The
session expires as every memlab session does: ``SESSION_TTL_SECONDS`` under the
stack's TTL policy (``sliding``, ``lazy_slack`` or ``none``); the history adds no TTL
of its own.

**Sync and async.** Both adapters take an open :class:`~memlab.MemoryStack`. Their
async methods (``aget_messages``, ``aadd_messages``, ``aclear``, ``ainvoke``) run on
the stack's event loop from any loop; their sync methods (``messages``,
``add_messages``, ``clear``, ``invoke``) block the calling thread while the stack's
loop runs elsewhere (a server's loop, a background thread). The stack's loop is the
one running where the adapter is built, or the ``loop`` passed (see
:mod:`memlab.integrations._bridge`); a sync call on that loop itself raises
:class:`~memlab.exceptions.StackStateError` pointing at the async method.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("memlab.integrations.langchain needs langchain-core: pip install 'memlab[langchain]'") from exc

from pydantic import ConfigDict, Field, PrivateAttr

from memlab.exceptions import ValidationError
from memlab.integrations._bridge import StackBridge
from memlab.models import RecallResponse, SessionQAEntry

__all__ = ["MemlabChatMessageHistory", "MemlabRetriever", "recall_to_document"]

#: message types a turn holds: the question's and the answer's
_QUESTION_TYPES = frozenset({"human"})
_ANSWER_TYPES = frozenset({"ai"})


def _text(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else message.text


def _turn_messages(entry: SessionQAEntry) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    if entry.question:
        messages.append(HumanMessage(content=entry.question, id=f"{entry.qa_id}:human"))
    if entry.answer:
        messages.append(AIMessage(content=entry.answer, id=f"{entry.qa_id}:ai"))
    return messages


def _check_messages(messages: Sequence[BaseMessage]) -> None:
    for message in messages:
        if message.type not in _QUESTION_TYPES | _ANSWER_TYPES:
            raise ValidationError(
                f"a memlab session stores human and AI messages as turns; got a {message.type!r} message "
                f"({type(message).__name__}); keep system prompts in the prompt template"
            )


class MemlabChatMessageHistory(BaseChatMessageHistory):
    """LangChain chat history stored as the turns of one memlab session (see the module docstring).

    ``user``: a memlab user (a :class:`~memlab.User`, its id, or None for the default
    user), resolved as ``stack.session`` resolves it. ``loop``: the event loop the
    stack runs on, for the sync methods (default: the loop running here).
    """

    def __init__(
        self, stack: Any, session_id: str, *, user: Any = None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        if not isinstance(session_id, str) or not session_id.strip():
            raise ValidationError(f"session_id must be a non-blank str, got {session_id!r}")
        self.stack = stack
        self.session_id = session_id
        self.user = user
        self._bridge = StackBridge(loop)

    def __repr__(self) -> str:
        return f"MemlabChatMessageHistory(session_id={self.session_id!r})"

    async def _ids(self) -> tuple[str, str]:
        resolved: tuple[str, str] = await self.stack.session.resolve(self.session_id, self.user)
        return resolved

    # -- reading ---------------------------------------------------------------------

    async def _read(self) -> list[BaseMessage]:
        entries = await self.stack.session.get_session(self.session_id, user=self.user)
        return [message for entry in entries for message in _turn_messages(entry)]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's turns as messages, oldest first (blocking; see :meth:`aget_messages`)."""
        return self._bridge.run(self._read, name="get_messages")

    async def aget_messages(self) -> list[BaseMessage]:
        """The session's turns as messages, oldest first."""
        return await self._bridge.arun(self._read)

    # -- writing ---------------------------------------------------------------------

    async def _write(self, messages: Sequence[BaseMessage]) -> None:
        _check_messages(messages)
        if not messages:
            return
        user_id, session = await self._ids()
        manager = self.stack.session_manager
        async with manager.turn_lock(user_id, session):  # read-then-write of the open turn, one writer at a time
            last = await manager.get_session(user_id, last_n=1, session_id=session)
            # the stored turn still waiting for its answer (a question written alone earlier)
            open_qa = last[0].qa_id if last and last[0].question and not last[0].answer else None
            question: str | None = None  # a question of this batch not written yet
            for message in messages:
                if message.type in _QUESTION_TYPES:
                    if question is not None:  # two questions in a row: the first stays unanswered
                        await manager.add_qa(user_id, question, "", session_id=session)
                    question, open_qa = _text(message), None
                elif question is not None:
                    await manager.add_qa(user_id, question, _text(message), session_id=session)
                    question = None
                elif open_qa is not None:
                    await manager.update_qa(user_id, open_qa, session_id=session, answer=_text(message))
                    open_qa = None
                else:
                    await manager.add_qa(user_id, "", _text(message), session_id=session)
            if question is not None:
                await manager.add_qa(user_id, question, "", session_id=session)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` as turns (blocking; see :meth:`aadd_messages`)."""
        batch = list(messages)
        self._bridge.run(lambda: self._write(batch), name="add_messages")

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` as turns: human + AI pairs, an open question, a lone answer (module docstring)."""
        batch = list(messages)
        await self._bridge.arun(lambda: self._write(batch))

    # -- clearing --------------------------------------------------------------------

    async def _delete(self) -> None:
        user_id, session = await self._ids()
        await self.stack.session_manager.delete_session(user_id, session)

    def clear(self) -> None:
        """Delete the session (blocking; see :meth:`aclear`)."""
        self._bridge.run(self._delete, name="clear")

    async def aclear(self) -> None:
        """Delete the session: its turns and context entries."""
        await self._bridge.arun(self._delete)


def recall_to_document(result: RecallResponse) -> Document | None:
    """One ``recall()`` result as a LangChain ``Document``; None for a system marker (warming up, build failed).

    ``page_content`` is the result's text: a graph item's or answer's ``text``, a
    session turn as ``question`` / ``answer`` lines, a guidance block's ``content``, a
    skill's ``text``. ``metadata`` holds every other field of the result (JSON
    types), ``source`` among them; ``id`` is the result's id when it has one.
    """
    if result.source == "system":
        return None
    fields = result.model_dump(mode="json")
    if result.source == "session":
        content = f"Question: {fields.pop('question')}\nAnswer: {fields.pop('answer')}"
        doc_id = fields.get("qa_id")
    elif "content" in fields:
        content, doc_id = fields.pop("content"), None
    else:
        content = str(fields.pop("text", ""))
        doc_id = fields.get("id") or fields.get("trace_id")
    metadata = {key: value for key, value in fields.items() if value is not None}
    return Document(page_content=content, metadata=metadata, id=doc_id)


class MemlabRetriever(BaseRetriever):
    """LangChain retriever over :meth:`MemoryStack.recall` (see the module docstring).

    ``k`` results at most (``invoke(query, k=3)`` overrides it per call); ``query_type``
    defaults to ``CHUNKS`` (retrieved passages; a completion type returns the answer as
    one document); ``datasets``, ``session_id``, ``scope`` and ``user`` are passed to
    ``recall()`` as they are. Other keyword arguments of ``invoke`` are refused.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    stack: Any = Field(description="an open memlab MemoryStack")
    k: int = Field(default=4, ge=1, description="how many documents at most")
    query_type: Any = "CHUNKS"
    datasets: list[str] | None = None
    session_id: str | None = None
    scope: str | list[str] | None = None
    user: Any = None
    loop: Any = Field(default=None, exclude=True, description="the stack's event loop, for sync invoke()")
    _bridge: StackBridge = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        self._bridge = StackBridge(self.loop)

    async def _recall(self, query: str, k: int | None) -> list[Document]:
        limit = self.k if k is None else k
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError(f"k must be a positive int, got {limit!r}")
        results = await self.stack.recall(
            query,
            self.query_type,
            datasets=self.datasets,
            top_k=limit,
            scope=self.scope,
            session_id=self.session_id,
            user=self.user,
        )
        documents = [doc for doc in map(recall_to_document, results) if doc is not None]
        return documents[:limit]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return self._bridge.run(lambda: self._recall(query, k), name="invoke")

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return await self._bridge.arun(lambda: self._recall(query, k))
