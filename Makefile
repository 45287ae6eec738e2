# LakeMirror developer tasks. Everything installs into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TOOLS ?= .tools
DATA_DIR ?= ./lakemirror-data
DEMO_DIR ?= ./lakemirror-demo
DEMO_DURATION ?= 60
IMAGE ?= lakemirror:0.1.0
# pytest-xdist workers of `make test` (tests/conftest.py says how the suite is split)
TEST_WORKERS ?= 2

.PHONY: install tools demo run test test-fast lint bench clean image

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# helm, dynalite, buildah, debootstrap and Prometheus for the deployment tests; chromium and
# axe-core for the web UI's browser tests
$(TOOLS)/.installed: tests/tools/install.sh $(BIN)/.installed
	PYTHON=$(BIN)/python bash tests/tools/install.sh $(TOOLS)
	touch $@

tools: $(TOOLS)/.installed

demo: install
	$(BIN)/lakemirror demo --data-dir $(DEMO_DIR) --duration $(DEMO_DURATION)

run: install
	$(BIN)/lakemirror server --data-dir $(DATA_DIR)

# ruff, mypy strict, the layer contracts (docs/architecture.md), the security lint, and the
# declared dependencies against the imported ones
lint: install
	$(BIN)/ruff check mirror tests bench deploy
	$(BIN)/ruff format --check mirror deploy
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/bandit --configfile pyproject.toml --recursive mirror --quiet
	$(BIN)/deptry mirror

test: lint tools
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

test-fast: install
	$(BIN)/pytest -m "not slow and not spark and not e2e and not deploy and not ui"

bench: install
	$(BIN)/python -m bench.core

# the container image (deploy/Containerfile); BUILD_ARGS="--build-arg BASE_IMAGE=..." to change it
image:
	buildah bud --file deploy/Containerfile --tag $(IMAGE) $(BUILD_ARGS) .

clean:
	rm -rf $(VENV) $(TOOLS) $(DATA_DIR) $(DEMO_DIR) .mypy_cache .ruff_cache .pytest_cache .hypothesis
