"""memlab's HTTP API (FastAPI): agent memory written and read as the caller, and the usage and cost of its visible sessions.

::

    GET  /healthz                                  the stack state (no authentication)
    GET  /api/v1/sessions                          SessionPage: ?status= &order_by= &descending= &limit= &offset=
    GET  /api/v1/sessions/stats?range=30d          UsageStats over 24h | 7d | 30d | all
    GET  /api/v1/sessions/cost-by-model?range=     list[ModelCost]
    GET  /api/v1/sessions/{session_id}             SessionUsage with its per-model usage
    POST /api/v1/remember                          RememberRequest -> RememberResult
    POST /api/v1/recall                            RecallRequest -> list of recall results (``source``-tagged)
    POST /api/v1/search                            SearchRequest -> list of recall results
    POST /api/v1/forget                            ForgetRequest (``dry_run``) -> ForgetResult with its cleanup receipt
    POST /api/v1/sessions/{session_id}/feedback    FeedbackRequest -> FeedbackResult
    POST /api/v1/sessions/{session_id}/end         EndRequest (optional: ``completed``) -> EndResult

**Who is calling.** Every ``/api/v1`` call needs ``Authorization: Bearer <key>`` (a key from
``stack.users.create_api_key(user)`` or ``memlab users create-key NAME``); the key's user is
the caller. Reads apply the seed's visibility rule for it: its own sessions, its agent users'
sessions (``parent_user_id``), and the sessions of datasets it may read. Writes act as the
caller with memlab's permission model (:mod:`memlab.datasets`): writing a dataset needs
``write`` on it, reading one ``read`` (an agent user holds its parent's permissions too);
sessions are the caller's own, so feedback and end never reach another user's session, even
one the caller may see (an agent's, a shared dataset's).

**Statuses.** 200 with the route's model (every POST too). 401: no, unknown or revoked key
(``WWW-Authenticate: Bearer``). 403: a write into a dataset the caller may read but not write
(remember into it; with ``session_id`` only when ``self_improvement`` would bridge the
session into it; forget it, dry run included). 404, one body per kind whatever the reason:
``session not found`` (unknown or not visible; ``end`` of a session the caller has no record
of), ``dataset not found`` (an id no dataset has, a name the caller owns no dataset of, a
dataset it may not read), ``document not found`` (forget's ``data_id``), ``turn not found``
(feedback for a ``qa_id`` the caller's session does not hold, or a session it has none of).
409: the call needs state that does not exist yet. 422: a bad query value or body, in
FastAPI's shape, naming the field, before the stack is called (memlab's own input rules run as
field validators; extra fields are refused). 502: an LLM or embedding call failed. 503: the
stack is not open, a store is down, or a session turn could not be stored because the session
cache is off or unreachable. Every memlab error has its status (:mod:`memlab.api._errors`);
none is a 500.

**Writes in detail.** ``remember`` without ``session_id`` stores documents in the dataset (a
name of the caller's, created when missing, or an id it may write) and answers when they are
chunked, extracted and embedded (``completed``). With ``session_id`` it stores one turn
(``session_stored``, ``data_ids == [qa_id]``, the id feedback takes; blank text is
``skipped_blank`` and stores nothing); with ``self_improvement`` (the default) the dataset is
checked for ``write`` first, and the bridge of the session into it runs in the background on
the server's stack, after the answer: closing the stack (the app's shutdown, when the app opened
it) waits for it (``MemoryStack.close``, at most its timeout). ``remember`` stores text only: a
``file://`` string, which the Python API reads as a server-side path, is a 422. ``recall`` and
``search`` take MCP's arguments (:mod:`memlab.remote`); a completion ``search`` stores its turn
in the caller's session. ``forget`` deletes a dataset, one document (``data_id``), the graph only
(``memory_only``) or everything the caller owns (``everything``); ``dry_run`` changes nothing and
answers what would go. Ending a session twice ends it again (the last status wins).

``create_app(stack)`` builds the app (it opens the stack on startup when it is not
open yet, and then closes it on shutdown); ``app_from_env()`` is the factory
``memlab serve`` uses (``uvicorn memlab.api:app_from_env --factory``); ``serve()``
runs uvicorn, through ``run_factory(target, factory, ...)``, which serves any app factory
the same way (``memlab bench serve`` serves its ceiling app with it). FastAPI and uvicorn come with ``pip install 'memlab[api]'``.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401 - fail here, with the extra to install, rather than deep inside
except ImportError as exc:  # pragma: no cover - the dev extra installs it
    raise ImportError("memlab.api needs FastAPI and uvicorn: pip install 'memlab[api]'") from exc

from memlab.api._app import ErrorBody, Health, app_from_env, create_app, run_factory, serve

__all__ = ["ErrorBody", "Health", "app_from_env", "create_app", "run_factory", "serve"]
