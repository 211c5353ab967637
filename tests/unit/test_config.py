import pytest

from memlab import ConfigError, MemoryStack, StackConfig
from memlab.cache import MemoryCache, SQLCache
from memlab.config import CacheConfig, TTLConfig, build_cache_backend, build_ttl_policy
from memlab.testing import FakeClock
from memlab.ttl import LazySlackTTL, NoTTL, SlidingTTL


def test_from_env_defaults_match_the_seeds():
    cfg = StackConfig.from_env({})
    assert cfg.cache.enabled is True
    assert cfg.cache.backend == "sqlite"
    assert cfg.cache.purge_interval_seconds == 900
    assert cfg.ttl.seconds == 604800
    assert cfg.analysis.search_mode == "concurrent"
    assert cfg.analysis.auto_feedback is True
    assert cfg.session.abandon_after_seconds == 1800
    assert str(cfg.data_root) == ".memlab"


def test_from_env_reads_every_variable_case_insensitively(tmp_path):
    cfg = StackConfig.from_env(
        {
            "caching": "false",
            "CACHE_BACKEND": "memory",
            "CACHE_DB_URL": "sqlite:////tmp/x.db",
            "CACHE_PURGE_INTERVAL_SECONDS": "0",
            "CACHE_HOST": "cache.example",
            "CACHE_PORT": "6380",
            "CACHE_USERNAME": "me",
            "CACHE_PASSWORD": "s3cret",
            "CACHE_SSL": "true",
            "CACHE_SSL_CERT_REQS": "none",
            "SESSION_TTL_SECONDS": "60",
            "SESSION_SEARCH_MODE": "sequential",
            "AUTO_FEEDBACK": "0",
            "SESSION_ABANDON_AFTER_SECONDS": "120",
            "MEMLAB_TTL_POLICY": "sliding",
            "MEMLAB_DATA_ROOT": str(tmp_path),
        }
    )
    assert cfg.cache.enabled is False
    assert cfg.cache.backend == "memory"
    assert cfg.cache.db_url == "sqlite:////tmp/x.db"
    assert cfg.cache.purge_interval_seconds == 0
    assert (cfg.cache.host, cfg.cache.port, cfg.cache.username) == ("cache.example", 6380, "me")
    assert cfg.cache.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(cfg)
    assert cfg.cache.ssl is True and cfg.cache.ssl_cert_reqs == "none"
    assert cfg.ttl.seconds == 60 and cfg.ttl.policy == "sliding"
    assert cfg.analysis.search_mode == "sequential" and cfg.analysis.auto_feedback is False
    assert cfg.session.abandon_after_seconds == 120
    assert cfg.data_root == tmp_path


@pytest.mark.parametrize("raw", ["", "soon", "-5"])
def test_invalid_abandon_threshold_falls_back_to_1800(raw):
    assert StackConfig.from_env({"SESSION_ABANDON_AFTER_SECONDS": raw}).session.abandon_after_seconds == 1800


def test_unknown_backend_names_the_value_and_the_choices():
    with pytest.raises(ConfigError) as info:
        StackConfig.from_env({"CACHE_BACKEND": "mongo"})
    assert "mongo" in str(info.value) and "sqlite" in str(info.value) and "memory" in str(info.value)
    with pytest.raises(ConfigError):
        CacheConfig(backend="mongo")


def test_unknown_ttl_policy_and_bad_values_raise_config_error():
    with pytest.raises(ConfigError, match="forever"):
        TTLConfig(policy="forever")
    with pytest.raises(ConfigError, match="SESSION_TTL_SECONDS"):
        StackConfig.from_env({"SESSION_TTL_SECONDS": "a week"})
    with pytest.raises(ConfigError, match="CACHING"):
        StackConfig.from_env({"CACHING": "maybe"})
    with pytest.raises(ConfigError):
        StackConfig.from_env({"SESSION_SEARCH_MODE": "parallel"})
    with pytest.raises(ConfigError):
        StackConfig.from_env({"SESSION_TTL_SECONDS": "-1"})


def test_ttl_policy_resolution():
    def policy(**kw):
        return build_ttl_policy(StackConfig(**kw))

    assert isinstance(policy(), LazySlackTTL)  # sqlite default
    assert isinstance(policy(cache=CacheConfig(backend="memory")), SlidingTTL)
    assert isinstance(policy(ttl=TTLConfig(seconds=0)), NoTTL)
    assert isinstance(policy(ttl=TTLConfig(seconds=None, policy="sliding")), NoTTL)
    assert isinstance(policy(ttl=TTLConfig(policy="sliding")), SlidingTTL)
    slack = policy(ttl=TTLConfig(seconds=100, slack=0.2))
    assert slack.seconds == 100 and slack.slack == 0.2


def test_build_cache_backend(tmp_path):
    clock = FakeClock()
    sql = build_cache_backend(StackConfig(data_root=tmp_path), clock)
    assert isinstance(sql, SQLCache) and sql.path == tmp_path / "cache.db" and sql.clock is clock
    mem = build_cache_backend(StackConfig(cache=CacheConfig(backend="memory")), clock)
    assert isinstance(mem, MemoryCache)
    assert build_cache_backend(StackConfig(cache=CacheConfig(enabled=False)), clock) is None


def test_stack_from_env_uses_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLAB_DATA_ROOT", str(tmp_path))
    monkeypatch.setenv("CACHE_BACKEND", "memory")
    stack = MemoryStack.from_env()
    assert isinstance(stack.cache, MemoryCache)
    assert stack.config.data_root == tmp_path


def test_build_every_registered_backend(tmp_path):
    from memlab.cache import DiskCache, RedisCache, TapesCache

    clock = FakeClock()
    fs = build_cache_backend(StackConfig(data_root=tmp_path, cache=CacheConfig(backend="fs")), clock)
    assert isinstance(fs, DiskCache) and fs.path == tmp_path / ".memlab_fs_cache" / "sessions_db"
    redis = build_cache_backend(
        StackConfig.from_env({"CACHE_BACKEND": "redis", "CACHE_HOST": "h", "CACHE_PORT": "7000", "CACHE_PASSWORD": "pw"}), clock
    )
    assert isinstance(redis, RedisCache) and "pw" not in repr(redis)
    with pytest.raises(ConfigError, match="TAPES_INGEST_URL"):
        build_cache_backend(StackConfig(cache=CacheConfig(backend="tapes")), clock)
    tapes = build_cache_backend(
        StackConfig.from_env({"CACHE_BACKEND": "tapes", "TAPES_INGEST_URL": "http://127.0.0.1:9", "MEMLAB_DATA_ROOT": str(tmp_path)}),
        clock,
    )
    assert isinstance(tapes, TapesCache)
    with pytest.raises(ConfigError, match="CACHE_DB_URL"):
        build_cache_backend(StackConfig(cache=CacheConfig(backend="postgres")), clock)
