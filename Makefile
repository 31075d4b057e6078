# Slipway's two everyday commands: `make run` (embedded defaults) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test lint install install-dev cluster-build

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .  # the `slipway` command
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# The local Kubernetes control plane's binaries, built once per machine from Debian's source package.
cluster-build: $(VENV)/.installed
	$(PY) -m kubesim build

run: $(VENV)/.installed cluster-build
	$(PY) scripts/run_embedded.py

test: $(VENV)/.installed-dev cluster-build
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check apps config builder
	$(VENV)/bin/mypy apps config builder
