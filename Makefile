# memlab: `make test` runs the suite against throw-away Redis and PostgreSQL servers.
SHELL   := /bin/bash
PY      := .venv/bin/python
OFFLINE := LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_OFFLINE_MODE=true HF_HUB_OFFLINE=1

.PHONY: venv demo test typecheck bench servers browser

venv: .venv/.installed

.venv/bin/python:
	python3 -m venv .venv

# Re-install only when pyproject.toml is newer than the stamp.
.venv/.installed: pyproject.toml | .venv/bin/python
	.venv/bin/pip install -q -e '.[dev]'
	touch $@

# The mode comparison (concurrent vs sequential vs off) on the embedded default stack, offline;
# `memlab demo session` is the session-memory walk-through.
demo: venv
	$(OFFLINE) $(PY) -m memlab demo

test: venv typecheck browser
	$(OFFLINE) scripts/with-servers.sh $(PY) -m pytest -q $(PYTEST_ARGS)

# Debian's chromium for the tests that open pages in a real browser (memlab.testing.browser)
browser:
	scripts/ensure-chromium.sh

# mypy on memlab/ with the settings in pyproject.toml ([tool.mypy])
typecheck: venv
	$(PY) -m mypy

bench: venv
	scripts/with-servers.sh $(PY) -m memlab bench cache

# A shell with both servers up and MEMLAB_TEST_*_URL exported; they stop when it exits.
servers:
	scripts/with-servers.sh $(SHELL)
