# LakeMirror developer tasks. Everything installs into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DATA_DIR ?= ./lakemirror-data
DEMO_DIR ?= ./lakemirror-demo
DEMO_DURATION ?= 60

.PHONY: install demo run test test-fast lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/lakemirror demo --data-dir $(DEMO_DIR) --duration $(DEMO_DURATION)

run: install
	$(BIN)/lakemirror server --data-dir $(DATA_DIR)

lint: install
	$(BIN)/ruff check mirror tests bench
	$(BIN)/ruff format --check mirror
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

test-fast: install
	$(BIN)/pytest -m "not slow and not spark and not e2e"

bench: install
	$(BIN)/python -m bench.core

clean:
	rm -rf $(VENV) $(DATA_DIR) $(DEMO_DIR) .mypy_cache .ruff_cache .pytest_cache .hypothesis
