"""Every setting's type, default and bounds are declared once: on its section field (issue 23, deliverable 7).

The environment layer (``memlab.config._EnvSettings``) names the variables and says how their text
is read; a bound it declared of its own would be a second declaration that can drift from the
section's (as ``MEMLAB_ANALYSIS_TIMEOUT_SECONDS``' did: 0.001 there, > 0 on ``AnalysisConfig``).
"""

import inspect
import re
import typing
from typing import Annotated, Any, Optional

import pytest
from annotated_types import Ge, Le
from pydantic import BaseModel, BeforeValidator, Field, StringConstraints, WrapValidator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from memlab import StackConfig, config
from memlab.config import _ENV_FIELDS, _ENVIRONMENT, _EnvSettings, _setting

_READERS = (BeforeValidator, WrapValidator, StringConstraints)  # how a text is read, not what it may be


def _constraints(annotation: Any) -> list[Any]:
    """The constraint objects (bounds, finiteness) anywhere in ``annotation``, readers left out."""
    found: list[Any] = []
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Annotated:
        found += [meta for meta in annotation.__metadata__ if not isinstance(meta, _READERS)]
        args = args[:1]
    for arg in args:
        found += _constraints(arg)
    return found


def _own_declarations(settings: type[BaseModel], section_of: typing.Callable[[str], FieldInfo]) -> list[str]:
    """What ``settings``' fields declare themselves: a default, a bound on the field, a bound not the section's."""
    problems = []
    for name, field in settings.model_fields.items():
        section = section_of(name)
        if field.default is not None or field.default_factory is not None:
            problems.append(f"{name}: a default of its own ({field.default!r})")
        # Field(ge=...) (and an outer Annotated's constraints) land on the field: a bound the variable declares itself.
        # The section's constraints are inside the variable's Optional[...]. They are compared by value: typing
        # caches Annotated[int, Ge(ge=0)], so the same type may hold an equal Ge of pydantic's own (NonNegativeInt)
        problems += [f"{name}: a bound of its own ({meta!r})" for meta in field.metadata if not isinstance(meta, _READERS)]
        constraints = _constraints(field.annotation)
        problems += [f"{name}: {meta!r} is not the section's" for meta in constraints if meta not in section.metadata]
        problems += [f"{name}: does not check {meta!r}" for meta in section.metadata if meta not in constraints]
    return problems


_SECTION_OF = {path.replace(".", "_"): _setting(path) for path, _ in _ENVIRONMENT.values()}


def test_every_variable_takes_its_type_default_and_bounds_from_its_section_field():
    assert set(_EnvSettings.model_fields) == set(_SECTION_OF)
    assert _own_declarations(_EnvSettings, _SECTION_OF.__getitem__) == []


def test_the_checker_catches_a_bound_or_default_declared_twice():
    port = _setting("cache.port")

    class Twice(BaseSettings):
        cache_port: Optional[int] = Field(None, ge=1, le=65535, validation_alias="CACHE_PORT")
        cache_host: Optional[str] = Field("localhost", validation_alias="CACHE_HOST")

    problems = _own_declarations(Twice, {"cache_port": port, "cache_host": _setting("cache.host")}.__getitem__)
    assert any("cache_port: a bound of its own" in problem for problem in problems)
    assert any("cache_port: does not check" in problem for problem in problems)
    assert any("cache_host: a default of its own" in problem for problem in problems)

    class Drifted(BaseSettings):
        cache_port: Optional[Annotated[int, Ge(0), Le(65535)]] = Field(None, validation_alias="CACHE_PORT")

    problems = _own_declarations(Drifted, {"cache_port": port}.__getitem__)
    assert any("Ge(ge=0) is not the section's" in problem for problem in problems)


def test_the_environment_layer_declares_no_bound_in_its_source():
    source = inspect.getsource(config)
    environment = source[source.index("# -- reading the environment") :]
    assert not re.findall(r"\b(?:ge|gt|le|lt|allow_inf_nan|multiple_of)\s*=", environment)


def test_a_range_in_an_error_message_is_the_section_fields():
    assert _ENV_FIELDS["CACHE_PORT"] is _setting("cache.port")
    with pytest.raises(config.ConfigError, match=r"MEMLAB_CHUNK_SIZE must be a whole number from 16 to 1,000,000"):
        StackConfig.from_env({"MEMLAB_CHUNK_SIZE": "8"})


def test_unset_variables_leave_the_section_defaults():
    assert StackConfig.from_env({}) == StackConfig()
