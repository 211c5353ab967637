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


# -- environment reading (pydantic-settings), .env files and precedence ---------------------------


def _dotenv(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_every_settings_field_fills_a_stack_config_field():
    from memlab.config import _EnvSettings, _config_path

    for name, field in _EnvSettings.model_fields.items():
        path = _config_path(name)
        target = StackConfig.model_fields[path[0]]
        if len(path) == 2:
            assert path[1] in target.annotation.model_fields, (name, path)
        assert str(field.validation_alias).isupper(), name


@pytest.mark.parametrize(
    "raw, expected",
    [("true", True), ("FALSE", False), ("1", True), ("0", False), ("yes", True), ("No", False), ("on", True),
     (" OFF ", False), ("", True), ("   ", True)],
)
def test_flags_accept_the_six_words_and_blank_means_default(raw, expected):
    assert StackConfig.from_env({"CACHING": raw}).cache.enabled is expected
    assert StackConfig.from_env({"AUTO_FEEDBACK": raw}).analysis.auto_feedback is expected


@pytest.mark.parametrize("raw", ["t", "y", "2", "maybe", "enabled"])
def test_other_flag_words_are_config_errors_naming_the_variable(raw):
    with pytest.raises(ConfigError, match="CACHE_SSL must be true or false"):
        StackConfig.from_env({"CACHE_SSL": raw})


def test_empty_and_blank_values_keep_the_defaults():
    blank = {name: "" for name in ("CACHE_BACKEND", "CACHE_HOST", "CACHE_PORT", "CACHE_USERNAME", "CACHE_PASSWORD",
                                   "SESSION_TTL_SECONDS", "LLM_MODEL", "MEMLAB_DATA_ROOT", "MEMLAB_CHUNK_SIZE")}
    assert StackConfig.from_env(blank) == StackConfig()
    spaces = {"CACHE_BACKEND": "  ", "CACHE_PORT": " ", "SESSION_TTL_SECONDS": "\t", "MEMLAB_CHUNK_SIZE": " "}
    assert StackConfig.from_env(spaces) == StackConfig()


def test_number_errors_name_the_variable_and_the_range():
    with pytest.raises(ConfigError, match=r"CACHE_PORT must be a whole number from 1 to 65,535, got '99999'"):
        StackConfig.from_env({"CACHE_PORT": "99999"})
    with pytest.raises(ConfigError, match=r"MEMLAB_ANALYSIS_TIMEOUT_SECONDS must be a number from 0.001 to 3,153,600,000"):
        StackConfig.from_env({"MEMLAB_ANALYSIS_TIMEOUT_SECONDS": "0"})
    assert StackConfig.from_env({"CACHE_PORT": " 7000 ", "MEMLAB_CHUNK_SIZE": "256.0"}).cache.port == 7000


@pytest.mark.parametrize(
    "env",
    [
        {"CACHE_PORT": "nope", "SESSION_TTL_SECONDS": "-1", "CACHING": "maybe"},  # unreadable values
        {"CACHE_BACKEND": "mongo", "LLM_MODEL": " ", "MEMLAB_TTL_POLICY": "forever"},  # readable, but invalid
    ],
)
def test_every_bad_variable_is_reported_at_once(env):
    with pytest.raises(ConfigError) as info:
        StackConfig.from_env(env)
    for variable in env:
        assert variable in str(info.value)


def test_a_rule_across_fields_names_both_variables():
    with pytest.raises(ConfigError, match="MEMLAB_CHUNK_SIZE, MEMLAB_CHUNK_OVERLAP: chunk_overlap"):
        StackConfig.from_env({"MEMLAB_CHUNK_SIZE": "32", "MEMLAB_CHUNK_OVERLAP": "32"})


@pytest.mark.parametrize(
    "variable, raw",
    [("RECALL_WARMUP_SHORTCIRCUIT", "perhaps"), ("RECALL_WARMUP_THRESHOLD", "-3"), ("RECALL_WARMUP_THRESHOLD", "x"),
     ("RECALL_WARMUP_CACHE_TTL", "nan"), ("RECALL_WARMUP_CACHE_TTL", "-1"), ("RECALL_WARMUP_CACHE_TTL", "1e300")],
)
def test_recall_guards_fail_open(variable, raw):
    assert StackConfig.from_env({variable: raw}).recall == StackConfig().recall


def test_recall_guards_read_valid_values():
    recall = StackConfig.from_env(
        {"recall_warmup_shortcircuit": "off", "RECALL_WARMUP_THRESHOLD": " 3 ", "RECALL_WARMUP_CACHE_TTL": "5.5", "SKILL_GATE_ENABLED": "NO"}
    ).recall
    assert (recall.warmup_shortcircuit, recall.warmup_threshold, recall.warmup_cache_ttl_seconds, recall.skill_gate_enabled) == (
        False, 3, 5.5, False
    )


@pytest.mark.parametrize("raw", ["false", "0", "no", " No ", "true", "1", "", "off", "garbage"])
def test_skill_gate_variable_follows_skill_gate_enabled(raw):
    from memlab.config import skill_gate_enabled

    assert StackConfig.from_env({"SKILL_GATE_ENABLED": raw}).recall.skill_gate_enabled is skill_gate_enabled({"SKILL_GATE_ENABLED": raw})


@pytest.mark.parametrize("raw", ["0", "-5", "nan", "inf", "1e300", "soon", " "])
def test_abandon_threshold_never_raises(raw):
    assert StackConfig.from_env({"SESSION_ABANDON_AFTER_SECONDS": raw}).session.abandon_after_seconds == 1800


def test_a_given_mapping_ignores_os_environ_and_dotenv(monkeypatch, tmp_path):
    monkeypatch.setenv("CACHE_PORT", "not a port")
    monkeypatch.setenv("CACHE_BACKEND", "memory")
    _dotenv(tmp_path / ".env", "CACHE_HOST=from-dotenv\n")
    monkeypatch.chdir(tmp_path)
    config = StackConfig.from_env({"MEMLAB_DATA_ROOT": str(tmp_path)})
    assert (config.cache.port, config.cache.backend, config.cache.host) == (6379, "sqlite", "localhost")
    assert config.data_root == tmp_path


def test_no_dotenv_file_is_read_unless_asked(monkeypatch, tmp_path):
    _dotenv(tmp_path / ".env", "CACHE_BACKEND=memory\nCACHE_PORT=not a port\n")
    monkeypatch.chdir(tmp_path)
    for name in ("CACHE_BACKEND", "CACHE_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert StackConfig.from_env().cache.backend == "sqlite"
    assert StackConfig.from_env({}).cache.backend == "sqlite"


def test_from_env_reads_a_dotenv_file(tmp_path):
    env_file = _dotenv(
        tmp_path / "memlab.env",
        "# memlab settings\n"
        "CACHE_BACKEND=Memory\n"
        "cache_port=7000\n"
        "export CACHE_SSL=on\n"
        'CACHE_PASSWORD="s3cret"\n'
        "SESSION_TTL_SECONDS=60  # a minute\n"
        "CACHE_HOST=\n"
        "UNRELATED_SETTING=ignored\n",
    )
    config = StackConfig.from_env({}, env_file=env_file)
    assert (config.cache.backend, config.cache.port, config.cache.ssl, config.ttl.seconds) == ("memory", 7000, True, 60)
    assert config.cache.password.get_secret_value() == "s3cret" and "s3cret" not in repr(config)
    assert config.cache.host == "localhost"  # empty in the file: the default
    assert StackConfig.from_env({}, env_file=str(env_file)) == config  # a str path too


def test_os_environ_takes_precedence_over_the_dotenv_file(monkeypatch, tmp_path):
    env_file = _dotenv(tmp_path / ".env", "CACHE_BACKEND=memory\nCACHE_PORT=7000\nCACHE_HOST=file-host\n")
    monkeypatch.setenv("cache_port", "7001")  # names are case-insensitive in both places
    monkeypatch.setenv("CACHE_HOST", "")  # empty counts as unset: the file's value applies
    monkeypatch.delenv("CACHE_BACKEND", raising=False)
    config = StackConfig.from_env(env_file=env_file)
    assert (config.cache.backend, config.cache.port, config.cache.host) == ("memory", 7001, "file-host")


def test_a_given_mapping_takes_precedence_over_the_dotenv_file(tmp_path):
    env_file = _dotenv(tmp_path / ".env", "CACHE_BACKEND=memory\nCACHE_PORT=7000\n")
    config = StackConfig.from_env({"Cache_Port": "7002"}, env_file=env_file)
    assert (config.cache.backend, config.cache.port) == ("memory", 7002)


def test_later_dotenv_files_win_and_missing_ones_are_skipped(tmp_path):
    base = _dotenv(tmp_path / "base.env", "CACHE_BACKEND=memory\nCACHE_PORT=7000\n")
    local = _dotenv(tmp_path / "local.env", "CACHE_PORT=7003\n")
    config = StackConfig.from_env({}, env_file=[base, tmp_path / "missing.env", local])
    assert (config.cache.backend, config.cache.port) == ("memory", 7003)
    assert StackConfig.from_env({}, env_file=tmp_path / "missing.env") == StackConfig()


def test_bad_dotenv_values_name_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="MEMLAB_CHUNK_SIZE must be a whole number from 16"):
        StackConfig.from_env({}, env_file=_dotenv(tmp_path / ".env", "memlab_chunk_size=8\n"))


# -- construction on the classes, plugins by name (issue 23) --------------------------------------


def test_the_builders_hold_no_per_name_branches():
    import ast
    import inspect

    import memlab.config as config_module

    families = ("CACHE_BACKENDS", "TTL_POLICIES", "MERGE_POLICIES", "SESSION_RETRIEVERS", "SESSION_RERANKERS", "ANALYSIS_MODES")
    names = set().union(*(getattr(config_module, family) for family in families))
    builders = ("build_cache_backend", "build_merge_policy", "build_session_retriever", "build_session_reranker", "build_analysis_mode",
                "build_ttl_policy")
    for builder in builders:
        tree = ast.parse(inspect.getsource(getattr(config_module, builder)))
        compared = {node.value for compare in ast.walk(tree) if isinstance(compare, ast.Compare) for node in ast.walk(compare) if isinstance(node, ast.Constant)}
        # "auto" (the TTL policy the backend picks) and "none" (no reranker) are the only sentinels
        assert not compared & (names - {"auto", "none"}), f"{builder} compares against strategy names {compared & names}"


def test_each_builtin_builds_itself_from_config(tmp_path):
    from memlab.analysis import SequentialMode
    from memlab.config import MergeConfig, SessionConfig, build_merge_policy, build_session_retriever
    from memlab.embeddings import HashingEmbedder
    from memlab.merge import RRFMerge
    from memlab.session.retrievers import HybridSessionRetriever

    config = StackConfig(data_root=tmp_path, merge=MergeConfig(policy="rrf", rrf_k=7.0), ttl=TTLConfig(policy="lazy_slack", slack=0.2))
    assert RRFMerge.from_config(config).k == build_merge_policy(config).k == 7.0
    policy = LazySlackTTL.from_config(config)
    assert (policy.seconds, policy.slack) == (604800.0, 0.2)
    backend = SQLCache.from_config(config, clock=FakeClock(), ttl=policy)
    assert backend.ttl is policy and backend.url == f"sqlite:///{config.cache_path}"
    assert isinstance(MemoryCache.from_config(config).ttl, LazySlackTTL)  # ttl None: the one config.ttl names
    assert SequentialMode.from_config(config).config is config.analysis
    embedder = HashingEmbedder(32)
    hybrid = StackConfig(data_root=tmp_path, session=SessionConfig(retriever="hybrid", min_similarity=0.5))
    assert isinstance(HybridSessionRetriever.from_config(hybrid, embedder=embedder), HybridSessionRetriever)
    assert isinstance(build_session_retriever(hybrid, embedder), HybridSessionRetriever)


class _PluginCache(MemoryCache):
    default_ttl_policy = "none"


def test_a_plugin_name_is_accepted_and_built_and_built_ins_win(monkeypatch, tmp_path):
    from memlab import plugins

    found = {
        "memlab.cache_backends": {
            "mine": plugins.Plugin("mine", f"{__name__}:_PluginCache", "memlab.cache_backends", "mine-dist"),
            "memory": plugins.Plugin("memory", f"{__name__}:_PluginCache", "memlab.cache_backends", "mine-dist"),
        }
    }
    monkeypatch.setattr(plugins, "installed", lambda group: found.get(group, {}))
    config = StackConfig.from_env({"CACHE_BACKEND": "Mine", "MEMLAB_DATA_ROOT": str(tmp_path)})
    backend = build_cache_backend(config, FakeClock())
    assert type(backend) is _PluginCache and isinstance(backend.ttl, NoTTL)  # auto: the plugin's default policy
    assert type(build_cache_backend(StackConfig(data_root=tmp_path, cache=CacheConfig(backend="memory")), FakeClock())) is MemoryCache
    with pytest.raises(ConfigError, match=r"choose from .*; installed plugins: memory \(mine-dist\), mine \(mine-dist\)"):
        CacheConfig(backend="nosuch")


def test_a_plugin_without_from_config_or_failing_to_import_is_a_config_error(monkeypatch):
    from memlab import plugins

    found = {
        "memlab.merge_policies": {
            "plain": plugins.Plugin("plain", "builtins:object", "memlab.merge_policies", "plain-dist"),
            "gone": plugins.Plugin("gone", "memlab_no_such_module:Policy", "memlab.merge_policies", "gone-dist"),
        }
    }
    monkeypatch.setattr(plugins, "installed", lambda group: found.get(group, {}))
    with pytest.raises(ConfigError, match=r"plain \(plain-dist\).*no from_config"):
        plugins.load("merge policy", "plain")
    with pytest.raises(ConfigError, match=r"plugin 'gone' .*'gone-dist' failed to load: ModuleNotFoundError"):
        plugins.load("merge policy", "gone")

