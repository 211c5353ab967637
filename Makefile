# memlab: `make test` runs the suite against throw-away Redis and PostgreSQL servers.
SHELL   := /bin/bash
PY      := .venv/bin/python
OFFLINE := LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_OFFLINE_MODE=true HF_HUB_OFFLINE=1

.PHONY: venv demo test typecheck bench servers browser docs

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

# The docs site is built first, inside the same servers (notebook 04 runs every backend it finds):
# its executed notebooks are what tests/test_notebooks.py checks, so each notebook runs once. The
# tests run even when the build fails (a failing notebook then fails its own test too); make test fails.
test: venv typecheck browser
	$(OFFLINE) scripts/with-servers.sh bash -c '$(DOCS); docs=$$?; $(PY) -m pytest -q $(PYTEST_ARGS); tests=$$?; \
	  [ $$docs -eq 0 ] || echo "make test: the docs build failed (see above)" >&2; exit $$(( tests ? tests : docs ))'

# The docs site in site/: the notebooks executed (build/docs/), the API reference, strict and offline
# (scripts/docs_build.py; docs/contributing.md, "The docs site"). MEMLAB_DOCS_JOBS notebooks run at once.
MEMLAB_DOCS_JOBS ?= 2
DOCS := $(PY) scripts/docs_build.py --jobs $(MEMLAB_DOCS_JOBS)
docs: venv
	$(OFFLINE) $(DOCS)

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
