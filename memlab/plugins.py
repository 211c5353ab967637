"""Third-party strategies by name: one entry-point group per strategy family.

A distribution adds a strategy by declaring an entry point in its family's
group; after ``pip install`` its name works where a built-in name does
(``CACHE_BACKEND=<name>``, ...)::

    [project.entry-points."memlab.cache_backends"]
    mycache = "mypackage.cache:MyCache"

* ``memlab.cache_backends`` (``CACHE_BACKEND``): ``from_config(config, clock=, ttl=)``
* ``memlab.ttl_policies`` (``MEMLAB_TTL_POLICY``): ``from_config(config)``
* ``memlab.merge_policies`` (``MEMLAB_MERGE_POLICY``): ``from_config(config)``
* ``memlab.session_retrievers`` (``SESSION_RETRIEVER``): ``from_config(config, embedder=)``
* ``memlab.session_rerankers`` (``SESSION_RERANKER``): ``from_config(config)``
* ``memlab.analysis_modes`` (``SESSION_SEARCH_MODE``): ``from_config(config)``
* ``memlab.embedders`` (``EMBEDDING_MODEL``): ``from_config(config)``; memlab's own
  ``memlab/...`` names win, and a plugin's name wins over litellm's model strings

Subclassing memlab's base class of the family (``CacheBackend``, ``TTLPolicy``,
...) inherits a ``from_config``. Built-in names win over plugins of the same
name; names are matched without regard to case. Entry points are read on the
first lookup of a name that is not built in (never on ``import memlab``) and
cached; :func:`refresh` forgets them. A plugin that fails to import raises
:class:`~memlab.exceptions.ConfigError` naming the plugin and its distribution.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional

from memlab.exceptions import ConfigError

__all__ = ["GROUPS", "Plugin", "describe", "help_text", "installed", "load", "refresh"]

#: family (as config's errors name it) -> entry-point group
GROUPS: dict[str, str] = {
    "cache backend": "memlab.cache_backends",
    "ttl policy": "memlab.ttl_policies",
    "merge policy": "memlab.merge_policies",
    "session retriever": "memlab.session_retrievers",
    "session reranker": "memlab.session_rerankers",
    "session search mode": "memlab.analysis_modes",
    "embedder": "memlab.embedders",
}


@dataclass(frozen=True)
class Plugin:
    """One installed entry point: its (lower-case) ``name``, ``target`` (``module:attr``) and ``distribution``."""

    name: str
    target: str
    group: str
    distribution: Optional[str]

    def __str__(self) -> str:
        return f"{self.name} ({self.distribution or 'unknown distribution'})"

    def load(self) -> Any:
        """The object the entry point names; ConfigError naming the plugin and its distribution when it fails."""
        from importlib.metadata import EntryPoint

        try:
            return EntryPoint(self.name, self.target, self.group).load()
        except Exception as exc:  # any import-time failure of third-party code
            raise ConfigError(
                f"plugin {self.name!r} ({self.group}, {self.target}) of distribution "
                f"{self.distribution or 'unknown'!r} failed to load: {type(exc).__name__}: {exc}"
            ) from exc


@functools.cache
def installed(group: str) -> dict[str, Plugin]:
    """The plugins installed in ``group``, by lower-case name (the first one found wins); cached."""
    from importlib.metadata import entry_points

    found: dict[str, Plugin] = {}
    for point in entry_points(group=group):
        dist = getattr(point, "dist", None)
        found.setdefault(point.name.strip().lower(), Plugin(point.name.strip().lower(), point.value, group, dist.name if dist else None))
    return found


def refresh() -> None:
    """Forget the cached entry points (after installing a plugin in a running process)."""
    installed.cache_clear()


def load(family: str, name: str) -> Any:
    """The class the plugin ``name`` of ``family`` (a key of :data:`GROUPS`) names; ConfigError when none does."""
    plugin = installed(GROUPS[family]).get(name.strip().lower())
    if plugin is None:
        raise ConfigError(f"unknown {family} {name!r}: no built-in strategy or installed plugin has that name")
    cls = plugin.load()
    if not callable(getattr(cls, "from_config", None)):
        raise ConfigError(f"plugin {plugin} ({plugin.group}) names {plugin.target}, which has no from_config classmethod")
    return cls


def describe(family: str) -> str:
    """``"name (distribution), ..."`` of the installed plugins of ``family``; empty when there are none."""
    return ", ".join(str(plugin) for _, plugin in sorted(installed(GROUPS[family]).items()))


def help_text() -> str:
    """The installed plugins of every family, one line each (for ``memlab --help``); empty when there are none."""
    lines = [f"  {family} ({group}): {describe(family)}" for family, group in GROUPS.items() if installed(group)]
    return "installed plugins:\n" + "\n".join(lines) if lines else ""
