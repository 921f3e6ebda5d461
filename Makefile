# Two commands do all the set-up on a fresh machine:
#   make run   - install and start the service (embedded: SQLite + in-process Celery worker) on :8000
#   make test  - install everything, start PostgreSQL/Redis if they are down, install Chromium for the
#                console's browser tests, run the linters, then the whole test suite
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run worker lint test services browser bench-accuracy bench-serving

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU torch wheel first (pip's find-links on this machine); a bare 'torch' would pull a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[service,test,bench]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/neurules-admin serve

# distributed mode: a Celery training worker (set NEURULES_MODE/DATABASE_URL/BROKER_URL first)
worker: $(STAMP)
	$(BIN)/neurules-admin worker

services:
	bash scripts/services.sh

# style, types and the layer contracts (pyproject.toml: [tool.ruff], [tool.mypy], [tool.importlinter]);
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# Debian's Chromium for the console's browser tests (tests/e2e/test_console_browser.py)
browser:
	bash scripts/browser.sh

test: $(STAMP) services browser lint
	$(BIN)/python -m pytest

bench-accuracy: $(STAMP)
	$(BIN)/python benchmarks/accuracy.py

bench-serving: $(STAMP)
	$(BIN)/python benchmarks/serving.py
