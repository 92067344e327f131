# The two commands a newcomer needs; README.md and .ci/run use exactly these.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two workers: much of the suite waits on real processes (sshd, training, grace periods), so two
# cores run it in about 6 minutes instead of 10.5. `make test TEST_WORKERS=0` runs it serially.
TEST_WORKERS ?= 2

.PHONY: run test lint

# No --hosts: the bundled configs/local.toml until the first edit copies it to your own hosts
# file, which is used from then on (README); --hosts configs/local.toml kept reopening the bundled one.
run: $(VENV)/.installed
	$(BIN)/heet-tui

test: $(VENV)/.installed-dev
	$(BIN)/ruff check heet_tui tests examples
	@status=0; $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: the suite is missing" >&2; exit 1; fi; \
	exit $$status

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check heet_tui tests examples

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch comes from its own pinned spec first: an unpinned resolve would fetch a multi-GB CUDA build.
# `make run` needs it too: the local hosts train the example jobs with this venv's python.
$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[train]'
	@touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml setup.py
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@ $(VENV)/.installed
