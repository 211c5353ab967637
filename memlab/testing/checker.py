"""``check(obj)``: run the conformance suite of one strategy without pytest (for a notebook).

:func:`check` finds the strategy's family by ``isinstance`` against the family base
classes, calls every test of that family's suite with ``obj`` as the suite's fixture
(each ``parametrize`` case on its own; a test that needs ``tmp_path`` gets a fresh
temporary directory; an ``async`` test runs on a fresh event loop) and returns a
:class:`Report`::

    >>> from memlab.testing import check
    >>> report = check(MyMerge())
    >>> report.ok, report.failed
    (False, {'test_result_never_exceeds_limit': 'AssertionError: 4 items returned with limit=3 ...'})

Inside a running event loop (Jupyter) the tests run in a worker thread, so the
suites' own ``asyncio.run`` calls still work.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import itertools
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab._html import row_table

__all__ = ["FAMILIES", "Outcome", "Report", "check"]

#: (family base class, suite class, the suite's fixture name), as ``module:attribute``; first match wins
FAMILIES: list[tuple[str, str, str]] = [
    ("memlab.session.retrievers:SessionRetriever", "memlab.testing.session_suite:SessionRetrieverSuite", "session_retriever"),
    ("memlab.session.rerankers:SessionReranker", "memlab.testing.reranker_suite:SessionRerankerSuite", "session_reranker"),
    ("memlab.merge:MergePolicy", "memlab.testing.policy_suites:MergePolicySuite", "merge_policy"),
    ("memlab.ttl:TTLPolicy", "memlab.testing.policy_suites:TTLPolicySuite", "ttl_policy"),
    ("memlab.analysis:AnalysisMode", "memlab.testing.analysis_suite:AnalysisModeSuite", "analysis_mode"),
    ("memlab.retrievers:Retriever", "memlab.testing.retriever_suite:RetrieverSuite", "retriever"),
    ("memlab.embeddings:Embedder", "memlab.testing.embedder_suite:EmbedderSuite", "embedder"),
]


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Outcome:
    """One test case: ``status`` is ``passed``, ``failed`` or ``skipped``; ``message`` why it failed or was skipped."""

    test: str
    status: str
    message: str = ""


@dataclass
class Report:
    """What :func:`check` found: the suite it ran on ``target`` and one :class:`Outcome` per test case."""

    target: str
    suite: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no test case failed and at least one passed."""
        return not self.failed and bool(self.passed)

    @property
    def passed(self) -> list[str]:
        return [outcome.test for outcome in self.outcomes if outcome.status == "passed"]

    @property
    def failed(self) -> dict[str, str]:
        """Failing test case -> its failure message."""
        return {outcome.test: outcome.message for outcome in self.outcomes if outcome.status == "failed"}

    @property
    def skipped(self) -> dict[str, str]:
        return {outcome.test: outcome.message for outcome in self.outcomes if outcome.status == "skipped"}

    def __repr__(self) -> str:
        verdict = "ok" if self.ok else f"{len(self.failed)} failed"
        return f"Report({self.target} against {self.suite}: {verdict}, {len(self.passed)} passed, {len(self.skipped)} skipped)"

    def _repr_html_(self) -> str:
        rows = [(outcome.test, outcome.status, outcome.message) for outcome in self.outcomes]
        title = f"{self.target} against {self.suite}: {'ok' if self.ok else 'NOT ok'}"
        return row_table(["test", "status", "message"], rows, title=title)

    def to_frame(self) -> Any:
        """The outcomes as a pandas DataFrame (columns ``test``, ``status``, ``message``); needs pandas."""
        import pandas as pd

        return pd.DataFrame([vars(outcome) for outcome in self.outcomes], columns=["test", "status", "message"])


def _family(obj: Any) -> tuple[type, str]:
    for base, suite, fixture in FAMILIES:
        if isinstance(obj, _load(base)):
            return _load(suite), fixture
    names = ", ".join(base.rpartition(":")[2] for base, _, _ in FAMILIES)
    raise TypeError(f"check() needs a strategy of one of the families {names}; got {type(obj).__name__}")


def _cases(function: Callable[..., Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(case id, parameters)`` of every ``pytest.mark.parametrize`` combination (one empty case without marks)."""
    axes = []
    for mark in reversed(getattr(function, "pytestmark", [])):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], list(mark.args[1])
        names = [name.strip() for name in names.split(",")] if isinstance(names, str) else list(names)
        ids = mark.kwargs.get("ids") or [str(index) for index in range(len(values))]
        axis = []
        for case_id, value in zip(ids, values):
            value = getattr(value, "values", value)  # pytest.param(...)
            row = value if len(names) > 1 else (value,)
            axis.append((str(case_id), dict(zip(names, row))))
        axes.append(axis)
    for combination in itertools.product(*axes):
        case_id = "-".join(part for part, _ in combination)
        params: dict[str, Any] = {}
        for _, case_params in combination:
            params.update(case_params)
        yield case_id, params


def _run_case(suite: Any, function: Callable[..., Any], kwargs: dict[str, Any]) -> Outcome | None:
    """Call one case; None when it passed, else its failed or skipped :class:`Outcome` (without the test name)."""
    parameters = [name for name in inspect.signature(function).parameters if name != "self"]
    try:
        with tempfile.TemporaryDirectory(prefix="memlab-check-") as tmp:
            extra = {"tmp_path": Path(tmp)} if "tmp_path" in parameters else {}
            missing = [name for name in parameters if name not in kwargs and name not in extra]
            if missing:
                return Outcome("", "skipped", f"needs the fixture(s) {', '.join(missing)}")
            result = function(suite, **{name: value for name, value in {**kwargs, **extra}.items() if name in parameters})
            if inspect.iscoroutine(result):
                asyncio.run(result)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a failed test, or pytest's Skipped (an OutcomeException)
        status = "skipped" if type(exc).__name__ == "Skipped" else "failed"
        text = str(exc).strip()
        return Outcome("", status, f"{type(exc).__name__}: {text}" if text else type(exc).__name__)
    return None


def _run_suite(suite_class: type, fixture: str, obj: Any) -> list[Outcome]:
    suite = suite_class()
    outcomes = []
    for name in sorted(attr for attr in dir(suite_class) if attr.startswith("test_")):
        function = getattr(suite_class, name)
        if not callable(function):
            continue
        for case_id, params in _cases(function):
            test = f"{name}[{case_id}]" if case_id else name
            outcome = _run_case(suite, function, {fixture: obj, **params})
            outcomes.append(Outcome(test, "passed") if outcome is None else Outcome(test, outcome.status, outcome.message))
    return outcomes


def check(obj: Any) -> Report:
    """Run the conformance suite of ``obj``'s family on it and report each test case (see the module docstring).

    ``TypeError`` when ``obj`` belongs to no family with a suite.
    """
    suite_class, fixture = _family(obj)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        outcomes = _run_suite(suite_class, fixture, obj)
    else:  # inside a running loop (a notebook): the suites start their own loops, so run them in a thread
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            outcomes = pool.submit(_run_suite, suite_class, fixture, obj).result()
    return Report(target=repr(obj), suite=suite_class.__name__, outcomes=outcomes)
