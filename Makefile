# The two commands of the README: `make serve` and `make test`. Everything else is a helper.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: serve test lint bench browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

## make serve: install, then `manage.py serve` migrates and starts (embedded without REDIS_URL, distributed with it)
serve: $(VENV)/.installed
	exec $(BIN)/python manage.py serve --host $(HOST) --port $(PORT)

## make test: install test tools, lint, run the whole suite
test: $(VENV)/.dev-installed lint
	$(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

lint: $(VENV)/.dev-installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy veena_site accounts tts asr

## make browser: Debian's Chromium for the dashboard's browser tests (Playwright drives it; it never downloads one)
browser:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

## make bench: every bench/*.py (bench/dashboard.py runs only when PostgreSQL answers)
bench: $(VENV)/.dev-installed
	@ls bench/*.py >/dev/null 2>&1 && for b in bench/*.py; do $(BIN)/python $$b || exit 1; done || echo "no benchmarks yet"

clean:
	rm -rf $(VENV) var
