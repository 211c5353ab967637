"""Configuration: :class:`StackConfig` and the only place names become classes.

``StackConfig`` has one nested section per strategy family. Build it directly,
or from the environment with :meth:`StackConfig.from_env`, which honours the
seeds' variables with their defaults (names are case-insensitive)::

    CACHING=true  CACHE_BACKEND=sqlite  CACHE_DB_URL=  CACHE_PURGE_INTERVAL_SECONDS=900
    CACHE_HOST=localhost CACHE_PORT=6379 CACHE_USERNAME= CACHE_PASSWORD= CACHE_SSL=false
    CACHE_SSL_CERT_REQS=required  CACHE_REDIS_CLUSTER=false  SESSION_TTL_SECONDS=604800
    SESSION_SEARCH_MODE=concurrent  AUTO_FEEDBACK=true  SESSION_ABANDON_AFTER_SECONDS=1800  MEMLAB_TTL_POLICY=auto
    MEMLAB_DATA_ROOT=./.memlab  TAPES_INGEST_URL=  TAPES_PROVIDER=openai
    LLM_MODEL=memlab/offline  LLM_API_KEY=  MEMLAB_OFFLINE_LATENCY_MS=0
    EMBEDDING_MODEL=memlab/minilm  EMBEDDING_API_KEY=  (falls back to LLM_API_KEY)
    MEMLAB_CHUNK_SIZE=  MEMLAB_CHUNK_OVERLAP=  (fit the embedder: 192/24 for memlab/minilm, else 512/64)
    MEMLAB_EXTRACTION_CONCURRENCY=8
    RECALL_WARMUP_SHORTCIRCUIT=true  RECALL_WARMUP_THRESHOLD=1  RECALL_WARMUP_CACHE_TTL=60  SKILL_GATE_ENABLED=true
    MEMLAB_MERGE_POLICY=dual_lane  MEMLAB_ANALYSIS_TIMEOUT_SECONDS=30  IMPROVE_DISTILL_MAX_BATCHES_PER_RUN=10
    SESSION_RETRIEVER=keyword  SESSION_RERANKER=none  SESSION_RERANK_TOP_N=20
    DEFAULT_FEEDBACK_INFLUENCE=0  MEMLAB_FEEDBACK_ALPHA=0.1
    DB_PROVIDER= DB_HOST= DB_PORT= DB_USERNAME= DB_PASSWORD= DB_NAME=   (postgres cache without CACHE_DB_URL)

Empty values mean "unset" (the default). Flags accept true/false, 1/0, yes/no,
on/off (any case); a bad flag or number raises :class:`~memlab.exceptions.ConfigError`
naming the variable and, for numbers, the allowed range. The recall guards
(``RECALL_WARMUP_*``, ``SKILL_GATE_ENABLED``) fail open: an unreadable value keeps
its default, as does an invalid ``SESSION_ABANDON_AFTER_SECONDS`` (1800).
``SKILL_GATE_ENABLED`` turns the gate off only for false/0/no, as
:func:`skill_gate_enabled` does.

``StackConfig.from_env()`` reads ``os.environ``; ``StackConfig.from_env(mapping)``
reads only that mapping (tests). Either also reads dotenv files when asked:
``StackConfig.from_env(env_file=".env")`` (a path or a list of paths; a missing
file is skipped). A variable set in the environment (or the mapping) takes
precedence over the same variable in a file. The variables are read by
pydantic-settings (``_EnvSettings``); the ``DB_*`` settings are read when the
postgres cache URL is built (:func:`sql_cache_url`), from ``os.environ`` only.

An unknown strategy name raises :class:`~memlab.exceptions.ConfigError` listing
the valid ones and the installed plugins. Each family has one name -> class map
here (``CACHE_BACKENDS``, ...); a name not in it is looked up among the family's
entry points (:mod:`memlab.plugins`), and the class builds itself with its
``from_config(config, **collaborators)``.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, cast, get_args

import pydantic
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from memlab.exceptions import ConfigError
from memlab.privacy import mask_url_passwords

__all__ = [
    "ANALYSIS_MODES",
    "AnalysisConfig",
    "CACHE_BACKENDS",
    "CacheConfig",
    "EmbeddingConfig",
    "GraphConfig",
    "LLMConfig",
    "MERGE_POLICIES",
    "MergeConfig",
    "RecallConfig",
    "SESSION_RERANKERS",
    "SESSION_RETRIEVERS",
    "SessionConfig",
    "StackConfig",
    "TTL_POLICIES",
    "TTLConfig",
    "build_analysis_mode",
    "build_cache_backend",
    "build_embedder",
    "build_llm_client",
    "build_merge_policy",
    "build_session_reranker",
    "build_session_retriever",
    "build_ttl_policy",
    "sql_cache_url",
]

#: longest duration any setting accepts (TTL, intervals, timeouts): 100 years, in seconds
MAX_SECONDS = 100 * 365 * 86400.0
#: largest chunk size / overlap, in estimated tokens
MAX_CHUNK_TOKENS = 1_000_000
#: chunk size / overlap (estimated tokens) when neither is set and the embedder has no short input window
DEFAULT_CHUNK_SIZE = 512
DEFAULT_CHUNK_OVERLAP = 64
#: estimated tokens (characters / 4) per embedder token that a derived chunk size assumes. Measured MiniLM
#: word pieces per estimated token: 0.76 (the benchmark corpus), 0.84 (licence texts), 0.94 (stdlib
#: docstrings), 1.15-1.24 (memlab's markdown docs). At 0.75 (256 word pieces -> 192 estimated tokens) all
#: chunks of the first three fit the window but 1%; of the README's chunks 8% are over it, losing 0.8% of its text
ESTIMATED_TOKENS_PER_EMBEDDER_TOKEN = 0.75
#: largest per-run cap on session-distillation curator batches (``IMPROVE_DISTILL_MAX_BATCHES_PER_RUN``)
MAX_DISTILL_BATCHES = 100_000

#: config name -> "module:Class" of each cache backend
CACHE_BACKENDS: dict[str, str] = {
    "memory": "memlab.cache._memory:MemoryCache",
    "sqlite": "memlab.cache._sql:SQLCache",
    "postgres": "memlab.cache._sql:SQLCache",
    "redis": "memlab.cache._redis:RedisCache",
    "fs": "memlab.cache._disk:DiskCache",
    "tapes": "memlab.cache._tapes:TapesCache",
}

#: config name -> "module:Class" of each TTL policy ("auto" picks the backend's default)
TTL_POLICIES: dict[str, str] = {
    "sliding": "memlab.ttl._sliding:SlidingTTL",
    "lazy_slack": "memlab.ttl._lazy_slack:LazySlackTTL",
    "none": "memlab.ttl._none:NoTTL",
}


#: config name -> "module:Class" of each merge policy (how raw and rewrite retrieval lanes combine)
MERGE_POLICIES: dict[str, str] = {
    "dual_lane": "memlab.merge._dual_lane:DualLaneMerge",
    "raw_only": "memlab.merge._raw_only:RawOnlyMerge",
    "rrf": "memlab.merge._rrf:RRFMerge",
}

#: config name -> "module:Class" of each session retriever (how recall's session lane ranks turns)
SESSION_RETRIEVERS: dict[str, str] = {
    "keyword": "memlab.session.retrievers._keyword:KeywordSessionRetriever",
    "bm25": "memlab.session.retrievers._bm25:BM25SessionRetriever",
    "vector": "memlab.session.retrievers._vector:VectorSessionRetriever",
    "hybrid": "memlab.session.retrievers._hybrid:HybridSessionRetriever",
}

#: config name -> "module:Class" of each session reranker ("none": no reranking, the default)
SESSION_RERANKERS: dict[str, str] = {
    "none": "",
    "mmr": "memlab.session.rerankers._mmr:MMRSessionReranker",
}

#: config name -> "module:Class" of each turn-analysis mode
ANALYSIS_MODES: dict[str, str] = {
    "concurrent": "memlab.analysis._concurrent:ConcurrentMode",
    "sequential": "memlab.analysis._sequential:SequentialMode",
    "off": "memlab.analysis._off:OffMode",
}


def skill_gate_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``SKILL_GATE_ENABLED`` is false/0/no (any case); true otherwise, including unset."""
    env = os.environ if environ is None else environ
    return _skill_gate_on(env.get("SKILL_GATE_ENABLED", ""))


def check_db_url(variable: str, url: str) -> None:
    """``ConfigError`` naming ``variable`` unless ``url`` is a SQLAlchemy URL of a supported database."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ConfigError(
            f"{variable} is not a database URL; use sqlite:///path or postgresql+asyncpg://user:password@host:port/db"
        ) from None
    backend, _, driver = parsed.drivername.partition("+")
    supported = (backend == "sqlite" and driver in ("", "aiosqlite", "pysqlite")) or (
        backend in ("postgresql", "postgres") and driver in ("", "asyncpg")
    )
    if not supported:
        raise ConfigError(
            f"{variable} names an unsupported database ({parsed.drivername!r}); use sqlite:///path or postgresql+asyncpg://..."
        )


def _choice(kind: str, value: str, choices: Mapping[str, Any]) -> str:
    """``value`` when it is a built-in name of the family ``kind`` or an installed plugin's; else ConfigError listing both."""
    if value in choices:
        return value
    from memlab import plugins

    if value.strip().lower() in plugins.installed(plugins.GROUPS[kind]):
        return value
    listed = plugins.describe(kind)
    raise ConfigError(
        f"unknown {kind} {value!r}; choose from {', '.join(sorted(choices))}" + (f"; installed plugins: {listed}" if listed else "")
    )


def _strategy(kind: str, choices: Mapping[str, str], name: str) -> Any:
    """The class ``name`` means in the family ``kind``: the built-in of ``choices`` (built-ins win), else the plugin's."""
    if name in choices:
        return _load(choices[name])
    from memlab import plugins

    return plugins.load(kind, name)


def _load(target: str) -> type:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']} (got {_shown(err.get('input'))})" for err in exc.errors())


class _Section(BaseModel):
    """Config base: every invalid value raises ConfigError naming the field and value."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            error = ConfigError(f"invalid {type(self).__name__}: {_describe(exc)}")
            error.problems = [(tuple(err["loc"]), err["msg"], err.get("input")) for err in exc.errors()]
            raise error from None

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            super().__setattr__(name, value)
        except pydantic.ValidationError as exc:
            raise ConfigError(f"invalid {type(self).__name__}: {_describe(exc)}") from None


class CacheConfig(_Section):
    """Session cache: on/off, which backend, and how to reach it."""

    enabled: bool = True
    backend: str = "sqlite"
    db_url: Optional[str] = None
    purge_interval_seconds: float = Field(900.0, allow_inf_nan=False, ge=-MAX_SECONDS, le=MAX_SECONDS)
    host: str = "localhost"
    port: int = Field(6379, ge=1, le=65535)
    username: Optional[str] = None
    password: Optional[SecretStr] = None
    ssl: bool = False
    ssl_cert_reqs: Literal["required", "optional", "none"] = "required"
    #: ``redis`` backend: host/port is a startup node of a Redis Cluster (hash-tagged key layout)
    redis_cluster: bool = False
    tapes_ingest_url: Optional[str] = None
    tapes_provider: str = "openai"

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return _choice("cache backend", value, CACHE_BACKENDS)

    @field_validator("db_url")
    @classmethod
    def _parsable_url(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            check_db_url("CACHE_DB_URL", value)
        return value


class TTLConfig(_Section):
    """Session expiry. ``seconds`` 0/None disables expiry (policy ``none``)."""

    policy: str = "auto"
    seconds: Optional[float] = Field(604800.0, allow_inf_nan=False, ge=0.0, le=MAX_SECONDS)
    slack: float = Field(0.05, ge=0.0, lt=1.0)

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        return _choice("ttl policy", value, {"auto": None, **TTL_POLICIES})


class SessionConfig(_Section):
    """Session layer settings.

    ``distill_max_batches_per_run`` (``IMPROVE_DISTILL_MAX_BATCHES_PER_RUN``): curator
    batches one session distillation sends at most when ``max_batches`` is None;
    0 means no cap.

    ``retriever`` (``SESSION_RETRIEVER``): how recall's session lane ranks a
    session's turns: ``keyword`` (cognee's rule), ``bm25``, ``vector`` or
    ``hybrid`` (see :mod:`memlab.session.retrievers`). ``min_similarity``: the
    cosine floor of ``vector`` and ``hybrid`` (a turn below it is no match).

    ``reranker`` (``SESSION_RERANKER``): what reorders the top of that ranking: ``none``
    (the default) or ``mmr`` (maximal marginal relevance), on the retriever's best
    ``rerank_top_n`` (``SESSION_RERANK_TOP_N``) turns (see :mod:`memlab.session.rerankers`).
    """

    abandon_after_seconds: float = Field(1800.0, gt=0.0, le=MAX_SECONDS, allow_inf_nan=False)
    default_session_id: str = "default_session"
    distill_max_batches_per_run: int = Field(10, ge=0, le=MAX_DISTILL_BATCHES)
    #: record each session-scoped call's tokens and cost in session_records (``MEMLAB_USAGE_TRACKING``)
    track_usage: bool = True
    retriever: str = "keyword"
    min_similarity: float = Field(0.3, gt=0.0, le=1.0, allow_inf_nan=False)
    reranker: str = "none"
    rerank_top_n: int = Field(20, ge=1, le=10_000)
    #: the learning rate of feedback weights: a rated turn moves each element it used by this share
    #: of the way to its rating (``MEMLAB_FEEDBACK_ALPHA``; upstream's 0.1)
    feedback_alpha: float = Field(0.1, gt=0.0, le=1.0, allow_inf_nan=False)

    @field_validator("retriever")
    @classmethod
    def _known_retriever(cls, value: str) -> str:
        return _choice("session retriever", value, SESSION_RETRIEVERS)

    @field_validator("reranker")
    @classmethod
    def _known_reranker(cls, value: str) -> str:
        return _choice("session reranker", value, SESSION_RERANKERS)


class AnalysisConfig(_Section):
    """Turn analysis: the mode (SESSION_SEARCH_MODE: concurrent / sequential / off), AUTO_FEEDBACK, the timeout.

    ``off`` answers with history only (no analysis call, single-query retrieval);
    ``auto_feedback=False`` drops the analysis call in the other modes but keeps
    concurrent mode's dual-query retrieval (the seed's rule).
    """

    search_mode: str = "concurrent"
    auto_feedback: bool = True
    timeout_seconds: float = Field(30.0, ge=1e-3, le=MAX_SECONDS, allow_inf_nan=False)

    @field_validator("search_mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        return _choice("session search mode", value, ANALYSIS_MODES)


class MergeConfig(_Section):
    """How concurrent mode merges its raw and rewritten retrieval lanes (``rrf_k``: RRF's k)."""

    policy: str = "dual_lane"
    rrf_k: float = Field(60.0, ge=0.0, allow_inf_nan=False)

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        return _choice("merge policy", value, MERGE_POLICIES)


class LLMConfig(_Section):
    """The LLM every memlab call goes through (a litellm model string; see :mod:`memlab.llm`)."""

    model: str = "memlab/offline"
    api_key: Optional[SecretStr] = None
    offline_latency_ms: float = Field(0.0, ge=0.0, le=MAX_SECONDS * 1000, allow_inf_nan=False)
    #: charge calls at this litellm model's price (``LLM_PRICE_AS``; what-if costs of offline runs); None: the model's own
    price_as: Optional[str] = None

    @field_validator("model")
    @classmethod
    def _non_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("LLM model must be a non-empty litellm model string")
        return value.strip()


class EmbeddingConfig(_Section):
    """The embedder (see :func:`memlab.embeddings.embedder_from_model`); ``api_key`` None uses the LLM key."""

    model: str = "memlab/minilm"
    api_key: Optional[SecretStr] = None

    @field_validator("model")
    @classmethod
    def _non_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("embedding model must be a non-empty string")
        return value.strip()


class GraphConfig(_Section):
    """Permanent memory: chunk sizes (in estimated tokens) and LLM extraction parallelism.

    ``chunk_size`` / ``chunk_overlap`` None (the default) fit the embedder: see
    :meth:`chunking`. A chunk longer than the embedder's input window would be
    truncated by it, so the text past the window would be missing from the chunk's
    vector (measured with MiniLM on the ingest benchmark's 300-word documents at
    512: 27% of the text, and facts there were found at hit@5 0.03).
    """

    chunk_size: Optional[int] = Field(None, ge=16, le=MAX_CHUNK_TOKENS)
    chunk_overlap: Optional[int] = Field(None, ge=0, le=MAX_CHUNK_TOKENS)
    extraction_concurrency: int = Field(8, ge=1, le=256)

    @pydantic.model_validator(mode="after")
    def _overlap_below_size(self) -> "GraphConfig":
        if self.chunk_overlap is not None and self.chunk_size is not None and self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})")
        return self

    def chunking(self, max_tokens: Optional[int]) -> tuple[int, int]:
        """``(chunk_size, chunk_overlap)`` for an embedder whose input window is ``max_tokens`` of its own tokens.

        A set value is used as it is. An unset size is :data:`DEFAULT_CHUNK_SIZE`,
        or less when the window is short (``max_tokens`` times
        :data:`ESTIMATED_TOKENS_PER_EMBEDDER_TOKEN`: 192 for MiniLM's 256); ``max_tokens``
        None means no short window. An unset overlap is an eighth of the size (64 of
        512, 24 of 192). Raises :class:`ConfigError` when a set overlap is not below
        the derived size.
        """
        size = self.chunk_size
        if size is None:
            size = DEFAULT_CHUNK_SIZE if max_tokens is None else max(16, min(DEFAULT_CHUNK_SIZE, int(max_tokens * ESTIMATED_TOKENS_PER_EMBEDDER_TOKEN)))
        overlap = self.chunk_overlap if self.chunk_overlap is not None else size // 8
        if overlap >= size:
            raise ConfigError(
                f"MEMLAB_CHUNK_OVERLAP ({overlap}) must be smaller than the chunk size ({size}, the default for the "
                f"embedder{f' with a {max_tokens}-token window' if max_tokens is not None else ''}); set MEMLAB_CHUNK_SIZE too"
            )
        return size, overlap


class RecallConfig(_Section):
    """``recall()``'s warm-up marker (SPEC §9.4) and skill gate (§9.5)."""

    warmup_shortcircuit: bool = True
    warmup_threshold: int = Field(1, ge=0)
    warmup_cache_ttl_seconds: float = Field(60.0, ge=0.0, le=MAX_SECONDS, allow_inf_nan=False)
    skill_gate_enabled: bool = True
    #: how much graph elements' feedback weights move a triplet's rank, 0 (off, upstream's default) to 1
    #: (``DEFAULT_FEEDBACK_INFLUENCE``; ``recall(feedback_influence=...)`` overrides it per call)
    feedback_influence: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False)


class StackConfig(_Section):
    """Everything a :class:`~memlab.MemoryStack` is assembled from."""

    data_root: Path = Path(".memlab")

    @field_validator("data_root")
    @classmethod
    def _usable_path(cls, value: Path) -> Path:
        text = str(value)
        if "\x00" in text:
            raise ValueError("the data root (MEMLAB_DATA_ROOT) may not contain a NUL character")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("the data root (MEMLAB_DATA_ROOT) contains a lone surrogate") from None
        return value

    #: memlab's metadata database (``MEMLAB_DB_URL``): None keeps it in ``{data_root}/memlab.db``;
    #: ``postgresql+asyncpg://...`` shares users, datasets, grants, documents and session records among machines
    db_url: Optional[str] = None

    @field_validator("db_url")
    @classmethod
    def _metadata_url(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            check_db_url("MEMLAB_DB_URL", value)
        return value

    cache: CacheConfig = Field(default_factory=CacheConfig)
    ttl: TTLConfig = Field(default_factory=TTLConfig)
    session: SessionConfig = Field(default_factory=SessionConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    merge: MergeConfig = Field(default_factory=MergeConfig)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        env_file: str | Path | Sequence[str | Path] | None = None,
    ) -> "StackConfig":
        """Build from environment variables: ``os.environ``, or the ``environ`` mapping when given.

        ``env_file`` (a path, or several, later files winning) also reads dotenv files; a
        variable set in the environment (or in ``environ``) takes precedence over the files,
        and a file that does not exist is skipped. Without ``env_file`` no file is read.
        """
        token = _GIVEN_ENVIRON.set(environ)
        try:
            settings = _EnvSettings(_env_file=env_file)
        except pydantic.ValidationError as exc:
            raise ConfigError(f"{_FROM_ENV}: {'; '.join(_env_problem(error) for error in exc.errors())}") from None
        finally:
            _GIVEN_ENVIRON.reset(token)
        return settings.stack_config()

    @property
    def cache_path(self) -> Path:
        """The default SQLite cache file: ``{data_root}/cache.db``."""
        return self.data_root / "cache.db"

    @property
    def fs_cache_dir(self) -> Path:
        """The fs/tapes cache directory: ``{data_root}/.memlab_fs_cache/sessions_db``."""
        return self.data_root / ".memlab_fs_cache" / "sessions_db"


# -- reading the environment ----------------------------------------------------------------------
#
# ``_EnvSettings`` (pydantic-settings) reads the variables; each field is named after the
# StackConfig field it fills (``<section>_<name>``, or ``data_root``) and None means "unset":
# the section's own default applies. Each setting's type, default and bounds are declared once,
# on its section field: ``_ENVIRONMENT`` gives a variable only its name, the field it sets and
# how its text is read, and its settings field takes the section field's type with the very
# constraint objects the section declares. The settings check what is specific to the
# environment (flag words, numbers and their ranges, the guards that fail open); the sections
# then check the rest (names, URLs, rules across fields), and every error names its variable.

_FROM_ENV = "invalid memlab configuration from the environment"
_FLAG_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})
_SKILL_GATE_OFF = frozenset({"false", "0", "no"})
#: the mapping given to :meth:`StackConfig.from_env`, read in place of ``os.environ``
_GIVEN_ENVIRON: ContextVar[Optional[Mapping[str, str]]] = ContextVar("memlab_config_environ", default=None)


def _unset_if_blank(value: Any) -> Any:
    """A blank value (spaces only; empty ones are ignored by the source) leaves the setting unset."""
    return None if isinstance(value, str) and not value.strip() else value


def _flag_word(value: Any) -> Any:
    """Only true/false, 1/0, yes/no, on/off (any case); pydantic turns the word into a bool."""
    if not isinstance(value, str) or not value.strip():
        return _unset_if_blank(value)
    word = value.strip().lower()
    if word not in _FLAG_WORDS:
        raise ValueError("must be true or false (or 1/0, yes/no, on/off)")
    return word


def _skill_gate_on(value: Any) -> Any:
    """``SKILL_GATE_ENABLED``'s rule (SPEC §9.5): off for false/0/no (any case), on for anything else."""
    return value.strip().lower() not in _SKILL_GATE_OFF if isinstance(value, str) else value


def _unset_if_invalid(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Fail open (SPEC §9.4): a value that does not validate leaves the setting unset."""
    try:
        return handler(value)
    except pydantic.ValidationError:
        return None


#: a strategy or option name as the environment gives it: folded to lower case (the section checks it)
_Name = Optional[Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True)]]
_FailOpen = WrapValidator(_unset_if_invalid)


class _EnvBase(BaseSettings):
    """What every variable of :meth:`StackConfig.from_env` shares; :data:`_EnvSettings` adds one field per variable."""

    model_config = SettingsConfigDict(case_sensitive=False, env_ignore_empty=True, extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The environment (or the given mapping), then the dotenv files: the first one wins."""
        environ = _GIVEN_ENVIRON.get()
        if environ is not None:
            env_settings = _MappingEnvSource(settings_cls, environ)
        return env_settings, dotenv_settings

    def stack_config(self) -> StackConfig:
        """The :class:`StackConfig` of the variables that are set; every error names its variable."""
        values: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {}
        for name, value in self:
            if value is not None:
                path = _config_path(name)
                if len(path) == 1:
                    values[path[0]] = value
                else:
                    sections.setdefault(path[0], {})[path[1]] = value
        problems: list[tuple[tuple[Any, ...], str, Any]] = []
        for section, fields in sections.items():
            try:
                values[section] = cast("type[_Section]", StackConfig.model_fields[section].annotation)(**fields)
            except ConfigError as exc:
                problems.extend(((section, *loc), message, value) for loc, message, value in _problems(exc))
        if not problems:
            try:
                return StackConfig(**values)
            except ConfigError as exc:
                problems = _problems(exc)
        raise ConfigError(f"{_FROM_ENV}: {'; '.join(_config_problem(*problem) for problem in problems)}")


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, Optional[str]]:
        # the hook DotEnvSettingsSource overrides too; as EnvSettingsSource reads os.environ for
        # case-insensitive settings: names folded to lower case, empty values ignored
        return {key.lower(): value for key, value in self._environ.items() if not (self.env_ignore_empty and value == "")}


def _config_path(name: str) -> tuple[str, ...]:
    """The StackConfig field an ``_EnvSettings`` field fills: ``cache_port`` -> ``("cache", "port")``."""
    section, _, field = name.partition("_")
    return (section, field) if field and section in StackConfig.model_fields else (name,)


def _setting(path: str) -> FieldInfo:
    """The section field ``path`` names (``"cache.port"``, or ``"data_root"``): where its type, default and bounds live."""
    section, _, name = path.rpartition(".")
    model = cast("type[BaseModel]", StackConfig.model_fields[section].annotation) if section else StackConfig
    return model.model_fields[name]


def _constrained(field: FieldInfo) -> Any:
    """A section field's type with its constraints (bounds, finiteness): the very objects the section declares."""
    return Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation


# how a variable's text is read, given its section field's constrained type (None: the variable is unset)
def _text(kind: Any) -> Any:
    return Optional[kind]


def _number(kind: Any) -> Any:
    return Annotated[Optional[kind], BeforeValidator(_unset_if_blank)]


def _flag(kind: Any) -> Any:
    return Annotated[Optional[kind], BeforeValidator(_flag_word)]


def _name(kind: Any) -> Any:
    """A strategy or option name, folded to lower case; the section checks it (its choices, its type)."""
    return _Name


def _name_or_blank(kind: Any) -> Any:
    return Annotated[_name(kind), BeforeValidator(_unset_if_blank)]


def _fail_open(read: Any) -> Any:
    """``read``, except that a value which does not validate leaves the variable unset (SPEC §9.4)."""
    return lambda kind: Annotated[read(kind), _FailOpen]


def _gate(kind: Any) -> Any:
    return Annotated[Optional[kind], BeforeValidator(_skill_gate_on)]


#: variable -> (the StackConfig field it sets, how its text is read). The variable declares no type,
#: default or bound of its own: those are the section field's (:func:`_setting`), so each setting is declared once
_ENVIRONMENT: dict[str, tuple[str, Any]] = {
    "MEMLAB_DATA_ROOT": ("data_root", _text),
    "MEMLAB_DB_URL": ("db_url", _text),
    "CACHING": ("cache.enabled", _flag),
    "CACHE_BACKEND": ("cache.backend", _name_or_blank),
    "CACHE_DB_URL": ("cache.db_url", _text),
    "CACHE_PURGE_INTERVAL_SECONDS": ("cache.purge_interval_seconds", _number),
    "CACHE_HOST": ("cache.host", _text),
    "CACHE_PORT": ("cache.port", _number),
    "CACHE_USERNAME": ("cache.username", _text),
    "CACHE_PASSWORD": ("cache.password", _text),
    "CACHE_SSL": ("cache.ssl", _flag),
    "CACHE_SSL_CERT_REQS": ("cache.ssl_cert_reqs", _name),
    "CACHE_REDIS_CLUSTER": ("cache.redis_cluster", _flag),
    "TAPES_INGEST_URL": ("cache.tapes_ingest_url", _text),
    "TAPES_PROVIDER": ("cache.tapes_provider", _name),
    "MEMLAB_TTL_POLICY": ("ttl.policy", _name),
    "SESSION_TTL_SECONDS": ("ttl.seconds", _number),
    # invalid, empty or out of range: the seed's 1800
    "SESSION_ABANDON_AFTER_SECONDS": ("session.abandon_after_seconds", _fail_open(_text)),
    "IMPROVE_DISTILL_MAX_BATCHES_PER_RUN": ("session.distill_max_batches_per_run", _number),
    "SESSION_RETRIEVER": ("session.retriever", _name),
    "SESSION_RERANKER": ("session.reranker", _name),
    "SESSION_RERANK_TOP_N": ("session.rerank_top_n", _number),
    "SESSION_SEARCH_MODE": ("analysis.search_mode", _name),
    "AUTO_FEEDBACK": ("analysis.auto_feedback", _flag),
    "MEMLAB_ANALYSIS_TIMEOUT_SECONDS": ("analysis.timeout_seconds", _number),
    "MEMLAB_MERGE_POLICY": ("merge.policy", _name),
    "LLM_MODEL": ("llm.model", _text),
    "LLM_API_KEY": ("llm.api_key", _text),
    "MEMLAB_OFFLINE_LATENCY_MS": ("llm.offline_latency_ms", _number),
    "LLM_PRICE_AS": ("llm.price_as", _text),
    "MEMLAB_USAGE_TRACKING": ("session.track_usage", _flag),
    "EMBEDDING_MODEL": ("embedding.model", _text),
    "EMBEDDING_API_KEY": ("embedding.api_key", _text),
    "MEMLAB_CHUNK_SIZE": ("graph.chunk_size", _number),
    "MEMLAB_CHUNK_OVERLAP": ("graph.chunk_overlap", _number),
    "MEMLAB_EXTRACTION_CONCURRENCY": ("graph.extraction_concurrency", _number),
    # the recall guards fail open: an unreadable value keeps its default
    "RECALL_WARMUP_SHORTCIRCUIT": ("recall.warmup_shortcircuit", _fail_open(_flag)),
    "RECALL_WARMUP_THRESHOLD": ("recall.warmup_threshold", _fail_open(_text)),
    "RECALL_WARMUP_CACHE_TTL": ("recall.warmup_cache_ttl_seconds", _fail_open(_text)),
    "SKILL_GATE_ENABLED": ("recall.skill_gate_enabled", _gate),
    "DEFAULT_FEEDBACK_INFLUENCE": ("recall.feedback_influence", _number),
    "MEMLAB_FEEDBACK_ALPHA": ("session.feedback_alpha", _number),
}

#: the settings class of :meth:`StackConfig.from_env`: one field per variable, named after the StackConfig
#: field it fills (``cache_port``), its type the section field's, read as :data:`_ENVIRONMENT` says
_ENV_FIELD_DEFINITIONS: dict[str, Any] = {
    path.replace(".", "_"): (read(_constrained(_setting(path))), Field(None, validation_alias=variable))
    for variable, (path, read) in _ENVIRONMENT.items()
}
_EnvSettings = pydantic.create_model(
    "_EnvSettings",
    __base__=_EnvBase,
    __doc__="One field per variable of :meth:`StackConfig.from_env` (see the module docstring).",
    **_ENV_FIELD_DEFINITIONS,
)

#: StackConfig field path -> the variable that sets it
_VARIABLES: dict[tuple[str, ...], str] = {tuple(path.split(".")): variable for variable, (path, _) in _ENVIRONMENT.items()}
#: variable -> the section field it sets
_ENV_FIELDS: dict[str, FieldInfo] = {variable: _setting(path) for variable, (path, _) in _ENVIRONMENT.items()}


def _expected_number(field: FieldInfo) -> Optional[str]:
    """``"a whole number from 1 to 65,535"``, from a numeric field's bounds; None for other fields."""
    bounds = {key: getattr(meta, key) for meta in field.metadata for key in ("ge", "le") if getattr(meta, key, None) is not None}
    if len(bounds) < 2:
        return None
    kind = "whole number" if int in (field.annotation, *get_args(field.annotation)) else "number"
    return f"a {kind} from {_show(bounds['ge'])} to {_show(bounds['le'])}"


def _env_problem(error: Mapping[str, Any]) -> str:
    """One ``_EnvSettings`` error as a sentence naming the variable (and the range of a number)."""
    variable = str(error["loc"][0]).upper() if error["loc"] else "the environment"
    expected = _expected_number(_ENV_FIELDS[variable]) if variable in _ENV_FIELDS else None
    if expected:
        return f"{variable} must be {expected}, got {_shown(error.get('input'))}"
    if error["type"] == "value_error":
        return f"{variable} {error['ctx']['error']}, got {_shown(error.get('input'))}"
    return f"{variable}: {error['msg']} (got {_shown(error.get('input'))})"


def _shown(value: Any) -> str:
    """``repr(value)`` for an error message, with any URL password masked (``://user:***@``)."""
    return mask_url_passwords(repr(value))


def _problems(exc: ConfigError) -> list[tuple[tuple[Any, ...], str, Any]]:
    """The (location, message, value) problems of a section's ConfigError."""
    return list(getattr(exc, "problems", None) or [((), str(exc), None)])


def _config_problem(loc: tuple[Any, ...], message: str, value: Any) -> str:
    """One StackConfig error of :meth:`StackConfig.from_env`, naming the variable(s) it is about."""
    message = message.removeprefix("Value error, ")
    variable = _VARIABLES.get(tuple(loc[:2])) or _VARIABLES.get(tuple(loc[:1]))
    if variable:
        return f"{message if variable in message else f'{variable}: {message}'} (got {_shown(value)})"
    # a rule across fields (chunk overlap below chunk size): name the variables of the fields it mentions
    named = [
        variable
        for path, variable in _VARIABLES.items()
        if path[: len(loc)] == tuple(loc) and re.search(rf"\b{re.escape(path[-1])}\b", message)
    ]
    return f"{', '.join(named) or '.'.join(map(str, loc)) or 'config'}: {message}"


def _show(bound: float) -> str:
    return f"{bound:,.0f}" if bound == int(bound) else str(bound)


def build_ttl_policy(config: StackConfig):
    """The TTL policy instance the config names (``auto``: the backend's default)."""
    ttl = config.ttl
    if not ttl.seconds:
        name = "none"
    elif ttl.policy == "auto":
        name = getattr(_strategy("cache backend", CACHE_BACKENDS, config.cache.backend), "default_ttl_policy", "sliding")
    else:
        name = ttl.policy
    return _strategy("ttl policy", TTL_POLICIES, name).from_config(config)


def _postgres_cache_url(config: StackConfig, environ: Mapping[str, str]) -> str:
    """The postgres cache URL: ``cache.db_url``, else the relational ``DB_*`` settings.

    ``DB_PROVIDER=postgres`` with ``DB_HOST`` (localhost), ``DB_PORT`` (5432),
    ``DB_USERNAME``, ``DB_PASSWORD``, ``DB_NAME``; names are case-insensitive.
    """
    if config.cache.db_url:
        return config.cache.db_url
    env = {key.upper(): value for key, value in environ.items()}
    if (env.get("DB_PROVIDER") or "").strip().lower() not in ("postgres", "postgresql"):
        raise ConfigError("postgres cache needs CACHE_DB_URL or DB_PROVIDER=postgres with DB_* settings")
    from sqlalchemy.engine import URL

    port = (env.get("DB_PORT") or "5432").strip()
    if not port.isdigit():
        raise ConfigError(f"DB_PORT must be a port number, got {port!r}")
    return URL.create(
        "postgresql+asyncpg",
        username=env.get("DB_USERNAME") or None,
        password=env.get("DB_PASSWORD") or None,
        host=(env.get("DB_HOST") or "localhost").strip(),
        port=int(port),
        database=env.get("DB_NAME") or None,
    ).render_as_string(hide_password=False)


def sql_cache_url(config: StackConfig, environ: Mapping[str, str] | None = None) -> str:
    """The SQL cache URL of a ``sqlite`` or ``postgres`` config (``CACHE_DB_URL`` wins)."""
    if config.cache.backend == "sqlite":
        return config.cache.db_url or f"sqlite:///{config.cache_path}"
    if config.cache.backend == "postgres":
        return _postgres_cache_url(config, os.environ if environ is None else environ)
    raise ConfigError(f"cache backend {config.cache.backend!r} is not a SQL backend; migrations apply to sqlite and postgres")


def build_cache_backend(config: StackConfig, clock, *, ttl: Any = None):
    """The cache backend the config names, or None when caching is off.

    ``ttl`` is the :class:`~memlab.ttl.TTLPolicy` the backend stamps expiries with;
    None builds the one ``config.ttl`` describes (:func:`build_ttl_policy`).
    """
    if not config.cache.enabled:
        return None
    cls = _strategy("cache backend", CACHE_BACKENDS, config.cache.backend)
    return cls.from_config(config, clock=clock, ttl=ttl if ttl is not None else build_ttl_policy(config))


def build_llm_client(config: StackConfig):
    """The :class:`~memlab.llm.LLMClient` of the config (litellm is imported on its first call)."""
    from memlab.llm import LLMClient

    return LLMClient.from_config(config)


def build_embedder(config: StackConfig):
    """The :class:`~memlab.embeddings.Embedder` ``embedding.model`` names (loaded on first use)."""
    from memlab.embeddings import embedder_from_model
    from memlab.exceptions import ValidationError

    model = config.embedding.model
    if not model.lower().startswith("memlab/"):  # memlab's names win; a plugin's name wins over litellm's open namespace
        from memlab import plugins

        if model.lower() in plugins.installed(plugins.GROUPS["embedder"]):
            return plugins.load("embedder", model).from_config(config)
    key = config.embedding.api_key or config.llm.api_key
    try:
        return embedder_from_model(config.embedding.model, api_key=key.get_secret_value() if key else None)
    except ValidationError as exc:
        raise ConfigError(f"invalid embedding.model: {exc}") from None


def build_merge_policy(config: StackConfig):
    """The merge policy ``merge.policy`` names."""
    return _strategy("merge policy", MERGE_POLICIES, config.merge.policy).from_config(config)


def build_session_retriever(config: StackConfig, embedder: Any = None):
    """The session retriever ``session.retriever`` names (see :mod:`memlab.session.retrievers`).

    ``embedder`` is the stack's :class:`~memlab.embeddings.Embedder`, or a zero-argument
    callable returning it (resolved on the first search); a retriever that embeds
    (``vector``, ``hybrid``) gets it, and without one builds its own from the config
    (:func:`build_embedder`).
    """
    return _strategy("session retriever", SESSION_RETRIEVERS, config.session.retriever).from_config(config, embedder=embedder)


def build_session_reranker(config: StackConfig):
    """The session reranker ``session.reranker`` names, or None for ``none`` (see :mod:`memlab.session.rerankers`)."""
    if config.session.reranker == "none":
        return None
    return _strategy("session reranker", SESSION_RERANKERS, config.session.reranker).from_config(config)


def build_analysis_mode(config: StackConfig):
    """The turn-analysis mode ``analysis.search_mode`` names (see :mod:`memlab.analysis`)."""
    return _strategy("session search mode", ANALYSIS_MODES, config.analysis.search_mode).from_config(config)
