"""memlab's HTTP read API (FastAPI): sessions, usage and cost of the callers' visible sessions.

::

    GET /healthz                                 the stack state (no authentication)
    GET /api/v1/sessions                         SessionPage: ?status= &order_by= &descending= &limit= &offset=
    GET /api/v1/sessions/stats?range=30d         UsageStats over 24h | 7d | 30d | all
    GET /api/v1/sessions/cost-by-model?range=    list[ModelCost]
    GET /api/v1/sessions/{session_id}            SessionUsage with its per-model usage

Every ``/api/v1`` call needs ``Authorization: Bearer <key>`` (a key from
``stack.users.create_api_key(user)`` or ``memlab users create-key NAME``); the key's
user is the caller, and ``stack.usage`` applies the seed's visibility rule for it:
its own sessions, its agent users' sessions (``parent_user_id``), and the sessions
of datasets it may read. Statuses: 401 (no, unknown or revoked key, with
``WWW-Authenticate: Bearer``), 404 (a session that is unknown or not visible: the
same body either way), 422 (a bad query value, naming it), 503 (the stack is not
open or a store is down).

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
