"""Configuration: :class:`StackConfig` and the only place names become classes.

``StackConfig`` has one nested section per strategy family. Build it directly,
or from the environment with :meth:`StackConfig.from_env`, which honours the
seeds' variables with their defaults (names are case-insensitive)::

    CACHING=true  CACHE_BACKEND=sqlite  CACHE_DB_URL=  CACHE_PURGE_INTERVAL_SECONDS=900
    CACHE_HOST=localhost CACHE_PORT=6379 CACHE_USERNAME= CACHE_PASSWORD= CACHE_SSL=false
    CACHE_SSL_CERT_REQS=required  SESSION_TTL_SECONDS=604800  SESSION_SEARCH_MODE=concurrent
    AUTO_FEEDBACK=true  SESSION_ABANDON_AFTER_SECONDS=1800  MEMLAB_TTL_POLICY=auto
    MEMLAB_DATA_ROOT=./.memlab  TAPES_INGEST_URL=  TAPES_PROVIDER=openai
    LLM_MODEL=memlab/offline  LLM_API_KEY=  MEMLAB_OFFLINE_LATENCY_MS=0
    EMBEDDING_MODEL=memlab/minilm  EMBEDDING_API_KEY=  (falls back to LLM_API_KEY)
    MEMLAB_CHUNK_SIZE=512  MEMLAB_CHUNK_OVERLAP=64  MEMLAB_EXTRACTION_CONCURRENCY=8
    RECALL_WARMUP_SHORTCIRCUIT=true  RECALL_WARMUP_THRESHOLD=1  RECALL_WARMUP_CACHE_TTL=60  SKILL_GATE_ENABLED=true
    MEMLAB_MERGE_POLICY=dual_lane  MEMLAB_ANALYSIS_TIMEOUT_SECONDS=30
    DB_PROVIDER= DB_HOST= DB_PORT= DB_USERNAME= DB_PASSWORD= DB_NAME=   (postgres cache without CACHE_DB_URL)

An unknown strategy name raises :class:`~memlab.exceptions.ConfigError` listing
the valid ones.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Optional

import pydantic
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from memlab.exceptions import ConfigError

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
    "SessionConfig",
    "StackConfig",
    "TTL_POLICIES",
    "TTLConfig",
    "build_analysis_mode",
    "build_cache_backend",
    "build_embedder",
    "build_llm_client",
    "build_merge_policy",
    "build_ttl_policy",
    "sql_cache_url",
]

#: longest duration any setting accepts (TTL, intervals, timeouts): 100 years, in seconds
MAX_SECONDS = 100 * 365 * 86400.0
#: largest chunk size / overlap, in estimated tokens
MAX_CHUNK_TOKENS = 1_000_000

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

#: config name -> "module:Class" of each turn-analysis mode
ANALYSIS_MODES: dict[str, str] = {
    "concurrent": "memlab.analysis._concurrent:ConcurrentMode",
    "sequential": "memlab.analysis._sequential:SequentialMode",
    "off": "memlab.analysis._off:OffMode",
}


def skill_gate_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``SKILL_GATE_ENABLED`` is false/0/no (any case); true otherwise, including unset."""
    env = os.environ if environ is None else environ
    return env.get("SKILL_GATE_ENABLED", "").strip().lower() not in {"false", "0", "no"}


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
    if value not in choices:
        raise ConfigError(f"unknown {kind} {value!r}; choose from {', '.join(sorted(choices))}")
    return value


def _load(target: str) -> type:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'config'}: {err['msg']} (got {err.get('input')!r})" for err in exc.errors())


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
    seconds: Optional[float] = Field(604800.0, allow_inf_nan=False, le=MAX_SECONDS)
    slack: float = Field(0.05, ge=0.0, lt=1.0)

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        return _choice("ttl policy", value, {"auto": None, **TTL_POLICIES})

    @field_validator("seconds")
    @classmethod
    def _non_negative(cls, value: Optional[float]) -> Optional[float]:
        if value is not None and value < 0:
            raise ValueError(f"ttl seconds must be >= 0, got {value}")
        return value


class SessionConfig(_Section):
    """Session layer settings."""

    abandon_after_seconds: float = Field(1800.0, gt=0.0, allow_inf_nan=False)
    default_session_id: str = "default_session"


class AnalysisConfig(_Section):
    """Turn analysis: the mode (SESSION_SEARCH_MODE: concurrent / sequential / off), AUTO_FEEDBACK, the timeout.

    ``off`` answers with history only (no analysis call, single-query retrieval);
    ``auto_feedback=False`` drops the analysis call in the other modes but keeps
    concurrent mode's dual-query retrieval (the seed's rule).
    """

    search_mode: str = "concurrent"
    auto_feedback: bool = True
    timeout_seconds: float = Field(30.0, gt=0.0, le=MAX_SECONDS, allow_inf_nan=False)

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
    """Permanent memory: chunk sizes (in estimated tokens) and LLM extraction parallelism."""

    chunk_size: int = Field(512, ge=16, le=MAX_CHUNK_TOKENS)
    chunk_overlap: int = Field(64, ge=0, le=MAX_CHUNK_TOKENS)
    extraction_concurrency: int = Field(8, ge=1, le=256)

    @pydantic.model_validator(mode="after")
    def _overlap_below_size(self) -> "GraphConfig":
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_size ({self.chunk_size})")
        return self


class RecallConfig(_Section):
    """``recall()``'s warm-up marker (SPEC §9.4) and skill gate (§9.5)."""

    warmup_shortcircuit: bool = True
    warmup_threshold: int = Field(1, ge=0)
    warmup_cache_ttl_seconds: float = Field(60.0, ge=0.0, le=MAX_SECONDS, allow_inf_nan=False)
    skill_gate_enabled: bool = True


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
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "StackConfig":
        """Build from environment variables (``os.environ`` by default)."""
        env = {key.upper(): value for key, value in (os.environ if environ is None else environ).items()}
        reader = _EnvReader(env)
        if env.get("CACHE_DB_URL"):
            check_db_url("CACHE_DB_URL", env["CACHE_DB_URL"])
        ttl_seconds = reader.number("SESSION_TTL_SECONDS", 604800.0, lo=0.0)
        sections = reader.section  # each value's error names its variable
        try:
            return sections(
                cls,
                {"data_root": "MEMLAB_DATA_ROOT"},
                data_root=reader.path("MEMLAB_DATA_ROOT", ".memlab"),
                cache=sections(
                    CacheConfig,
                    {"enabled": "CACHING", "backend": "CACHE_BACKEND", "db_url": "CACHE_DB_URL", "host": "CACHE_HOST",
                     "username": "CACHE_USERNAME", "password": "CACHE_PASSWORD", "ssl_cert_reqs": "CACHE_SSL_CERT_REQS",
                     "tapes_ingest_url": "TAPES_INGEST_URL", "tapes_provider": "TAPES_PROVIDER"},
                    enabled=reader.flag("CACHING", True),
                    backend=env.get("CACHE_BACKEND", "sqlite").strip().lower() or "sqlite",
                    db_url=env.get("CACHE_DB_URL") or None,
                    purge_interval_seconds=reader.number("CACHE_PURGE_INTERVAL_SECONDS", 900.0),
                    host=env.get("CACHE_HOST") or "localhost",
                    port=reader.integer("CACHE_PORT", 6379, lo=1, hi=65535),
                    username=env.get("CACHE_USERNAME") or None,
                    password=env.get("CACHE_PASSWORD") or None,
                    ssl=reader.flag("CACHE_SSL", False),
                    ssl_cert_reqs=(env.get("CACHE_SSL_CERT_REQS") or "required").strip().lower(),
                    tapes_ingest_url=env.get("TAPES_INGEST_URL") or None,
                    tapes_provider=(env.get("TAPES_PROVIDER") or "openai").strip().lower(),
                ),
                ttl=sections(
                    TTLConfig,
                    {"policy": "MEMLAB_TTL_POLICY", "seconds": "SESSION_TTL_SECONDS"},
                    policy=(env.get("MEMLAB_TTL_POLICY") or "auto").strip().lower(),
                    seconds=ttl_seconds,
                ),
                session=SessionConfig(abandon_after_seconds=reader.abandon_after()),
                analysis=sections(
                    AnalysisConfig,
                    {"search_mode": "SESSION_SEARCH_MODE", "auto_feedback": "AUTO_FEEDBACK"},
                    search_mode=(env.get("SESSION_SEARCH_MODE") or "concurrent").strip().lower(),
                    auto_feedback=reader.flag("AUTO_FEEDBACK", True),
                    timeout_seconds=reader.number("MEMLAB_ANALYSIS_TIMEOUT_SECONDS", 30.0, lo=1e-3),
                ),
                merge=sections(MergeConfig, {"policy": "MEMLAB_MERGE_POLICY"}, policy=(env.get("MEMLAB_MERGE_POLICY") or "dual_lane").strip().lower()),
                llm=sections(
                    LLMConfig,
                    {"model": "LLM_MODEL", "api_key": "LLM_API_KEY"},
                    model=(env.get("LLM_MODEL") or "memlab/offline").strip(),
                    api_key=env.get("LLM_API_KEY") or None,
                    offline_latency_ms=reader.number("MEMLAB_OFFLINE_LATENCY_MS", 0.0, lo=0.0, hi=MAX_SECONDS * 1000),
                ),
                embedding=sections(
                    EmbeddingConfig,
                    {"model": "EMBEDDING_MODEL", "api_key": "EMBEDDING_API_KEY"},
                    model=(env.get("EMBEDDING_MODEL") or "memlab/minilm").strip(),
                    api_key=env.get("EMBEDDING_API_KEY") or None,
                ),
                graph=sections(
                    GraphConfig,
                    {"chunk_size": "MEMLAB_CHUNK_SIZE", "chunk_overlap": "MEMLAB_CHUNK_OVERLAP"},
                    chunk_size=reader.integer("MEMLAB_CHUNK_SIZE", 512, lo=16, hi=MAX_CHUNK_TOKENS),
                    chunk_overlap=reader.integer("MEMLAB_CHUNK_OVERLAP", 64, lo=0, hi=MAX_CHUNK_TOKENS),
                    extraction_concurrency=reader.integer("MEMLAB_EXTRACTION_CONCURRENCY", 8, lo=1, hi=256),
                ),
                recall=reader.recall(),
            )
        except ConfigError as exc:
            raise ConfigError(f"invalid memlab configuration from the environment: {exc}") from None

    @property
    def cache_path(self) -> Path:
        """The default SQLite cache file: ``{data_root}/cache.db``."""
        return self.data_root / "cache.db"

    @property
    def fs_cache_dir(self) -> Path:
        """The fs/tapes cache directory: ``{data_root}/.memlab_fs_cache/sessions_db``."""
        return self.data_root / ".memlab_fs_cache" / "sessions_db"


class _EnvReader:
    _TRUE = {"1", "true", "yes", "on"}
    _FALSE = {"0", "false", "no", "off"}

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def flag(self, name: str, default: bool) -> bool:
        raw = self.env.get(name)
        if raw is None or not raw.strip():
            return default
        value = raw.strip().lower()
        if value in self._TRUE:
            return True
        if value in self._FALSE:
            return False
        raise ConfigError(f"{name} must be true or false, got {raw!r}")

    def number(self, name: str, default: float, *, lo: float = -MAX_SECONDS, hi: float = MAX_SECONDS) -> float:
        """A finite number from ``lo`` to ``hi``; anything else is a ``ConfigError`` naming the variable and the range."""
        raw = self.env.get(name)
        if raw is None or not raw.strip():
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and lo <= value <= hi):
            raise ConfigError(f"{name} must be a number from {_show(lo)} to {_show(hi)}, got {raw!r}")
        return value

    def integer(self, name: str, default: int, *, lo: int, hi: int) -> int:
        """A whole number from ``lo`` to ``hi`` (``8`` or ``8.0``); anything else is a ``ConfigError``."""
        value = self.number(name, default, lo=lo, hi=hi)
        if value != int(value):
            raise ConfigError(f"{name} must be a whole number from {lo} to {hi}, got {self.env.get(name)!r}")
        return int(value)

    @staticmethod
    def section(cls: type[_Section], variables: Mapping[str, str], **values: Any) -> Any:
        """``cls(**values)``; an invalid value raises ``ConfigError`` naming its environment variable."""
        try:
            return cls(**values)
        except ConfigError as exc:
            problems = getattr(exc, "problems", None)
            if not problems:
                raise
            described = []
            for loc, message, value in problems:
                if loc:
                    described.append(f"{variables.get(str(loc[0]), '.'.join(map(str, loc)))}: {message} (got {value!r})")
                else:  # a rule across fields: name the variables of the fields it mentions
                    named = [variable for field, variable in variables.items() if field in message]
                    described.append(f"{', '.join(named) or cls.__name__}: {message}")
            raise ConfigError("; ".join(described)) from None

    def path(self, name: str, default: str) -> Path:
        raw = self.env.get(name) or default
        if "\x00" in raw:
            raise ConfigError(f"{name} may not contain a NUL character, got {raw!r}")
        return Path(raw)

    def recall(self) -> RecallConfig:
        """The recall guards fail open (SPEC §9.4): an unreadable value keeps its default."""
        values: dict[str, Any] = {}
        for name, key, parse in (
            ("RECALL_WARMUP_SHORTCIRCUIT", "warmup_shortcircuit", lambda raw: self.flag("RECALL_WARMUP_SHORTCIRCUIT", True)),
            ("RECALL_WARMUP_THRESHOLD", "warmup_threshold", lambda raw: int(raw)),
            ("RECALL_WARMUP_CACHE_TTL", "warmup_cache_ttl_seconds", float),
            ("SKILL_GATE_ENABLED", "skill_gate_enabled", lambda raw: skill_gate_enabled(self.env)),
        ):
            raw = self.env.get(name)
            if raw is None or not raw.strip():
                continue
            try:
                values[key] = parse(raw)
                RecallConfig(**{key: values[key]})
            except (ValueError, ConfigError):
                values.pop(key, None)
        return RecallConfig(**values)

    def abandon_after(self) -> float:
        """SESSION_ABANDON_AFTER_SECONDS: invalid or empty falls back to 1800 (seed rule)."""
        try:
            value = float(self.env.get("SESSION_ABANDON_AFTER_SECONDS", "1800"))
        except ValueError:
            return 1800.0
        return value if math.isfinite(value) and 0 < value <= MAX_SECONDS else 1800.0


def _show(bound: float) -> str:
    return f"{bound:,.0f}" if bound == int(bound) else str(bound)


def build_ttl_policy(config: StackConfig):
    """The TTL policy instance the config names (``auto``: the backend's default)."""
    ttl = config.ttl
    if not ttl.seconds:
        name = "none"
    elif ttl.policy == "auto":
        name = _load(CACHE_BACKENDS[config.cache.backend]).default_ttl_policy
    else:
        name = ttl.policy
    cls = _load(TTL_POLICIES[name])
    if name == "lazy_slack":
        return cls(ttl.seconds, slack=ttl.slack)
    return cls(ttl.seconds)


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


def build_cache_backend(config: StackConfig, clock):
    """The cache backend the config names, or None when caching is off."""
    cache = config.cache
    if not cache.enabled:
        return None
    cls = _load(CACHE_BACKENDS[cache.backend])
    common = {"ttl": build_ttl_policy(config), "clock": clock, "purge_interval_seconds": cache.purge_interval_seconds}
    if cache.backend == "memory":
        return cls(**common)
    if cache.backend in ("sqlite", "postgres"):
        return cls(sql_cache_url(config), **common)
    if cache.backend == "redis":
        password = cache.password.get_secret_value() if cache.password else None
        return cls(
            host=cache.host,
            port=cache.port,
            username=cache.username,
            password=password,
            ssl=cache.ssl,
            ssl_cert_reqs=cache.ssl_cert_reqs,
            **common,
        )
    if cache.backend == "fs":
        return cls(config.fs_cache_dir, **common)
    if cache.backend == "tapes":
        if not cache.tapes_ingest_url:
            raise ConfigError("the tapes cache backend needs TAPES_INGEST_URL (the Tapes ingest service)")
        return cls(config.fs_cache_dir, ingest_url=cache.tapes_ingest_url, provider=cache.tapes_provider, **common)
    raise ConfigError(f"cache backend {cache.backend!r} has no builder")  # pragma: no cover - registry and builders agree


def build_llm_client(config: StackConfig):
    """The :class:`~memlab.llm.LLMClient` of the config (litellm is imported on its first call)."""
    from memlab.llm import LLMClient

    llm = config.llm
    return LLMClient(
        llm.model,
        api_key=llm.api_key.get_secret_value() if llm.api_key else None,
        offline_latency_ms=llm.offline_latency_ms,
    )


def build_embedder(config: StackConfig):
    """The :class:`~memlab.embeddings.Embedder` ``embedding.model`` names (loaded on first use)."""
    from memlab.embeddings import embedder_from_model
    from memlab.exceptions import ValidationError

    key = config.embedding.api_key or config.llm.api_key
    try:
        return embedder_from_model(config.embedding.model, api_key=key.get_secret_value() if key else None)
    except ValidationError as exc:
        raise ConfigError(f"invalid embedding.model: {exc}") from None


def build_merge_policy(config: StackConfig):
    """The merge policy ``merge.policy`` names."""
    cls = _load(MERGE_POLICIES[config.merge.policy])
    return cls(k=config.merge.rrf_k) if config.merge.policy == "rrf" else cls()


def build_analysis_mode(config: StackConfig):
    """The turn-analysis mode ``analysis.search_mode`` names (see :mod:`memlab.analysis`)."""
    return _load(ANALYSIS_MODES[config.analysis.search_mode])(config.analysis)
