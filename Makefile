# The two commands of the README: `make serve` and `make test`. Everything else is a helper.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

VLLM_REQUIREMENTS ?= requirements-vllm.txt

.PHONY: serve test lint bench browser fuzz soak clean vllm node-examples

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The project itself is installed too (--no-deps: requirements.txt pins everything), for the
# `veena` command-line client (pyproject.toml [project.scripts]).
$(VENV)/.installed: requirements.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt $(VENV)/.installed
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

# The vLLM tier (docs/specs/engines.md §3.1): the CPU build's unpinned torchvision/torchaudio/torchcodec
# exist on PyPI only as CUDA builds that fail to import beside CPU torch, so they are removed again.
$(VENV)/.vllm-installed: $(VLLM_REQUIREMENTS) requirements.txt $(VENV)/.installed
	$(BIN)/pip install -q -r $(VLLM_REQUIREMENTS)
	if [ "$(VLLM_REQUIREMENTS)" = requirements-vllm.txt ]; then \
	  $(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec; fi
	$(BIN)/python -c "import vllm, snac"
	touch $@

## make vllm: install the vLLM engine tier into .venv (VLLM_REQUIREMENTS=requirements-vllm-gpu.txt on CUDA)
vllm: $(VENV)/.vllm-installed

# The openai npm SDK example (examples/node): its pinned packages, from the committed lock.
NODE_EXAMPLES := examples/node
$(NODE_EXAMPLES)/node_modules/.installed: $(NODE_EXAMPLES)/package.json $(NODE_EXAMPLES)/package-lock.json
	cd $(NODE_EXAMPLES) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## make node-examples: install the Node example's packages (make test does)
node-examples: $(NODE_EXAMPLES)/node_modules/.installed

## make serve: install, then `manage.py serve` migrates and starts (embedded without REDIS_URL, distributed with it)
serve: $(VENV)/.installed
	exec $(BIN)/python manage.py serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

## make test: install test tools and the vLLM tier, lint, run the whole suite
test: $(VENV)/.dev-installed $(VENV)/.vllm-installed node-examples browser lint
	$(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

## make soak: the short soak alone (50 sockets x 60 s, fake engines; make test runs it too); bench/soak.py for longer runs
soak: $(VENV)/.dev-installed
	$(BIN)/python -m pytest -p no:cacheprovider -m soak tests/e2e/test_soak.py -q

lint: $(VENV)/.dev-installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy gateway veena_site accounts tts asr openai_rest veena_cli

## make fuzz: the hostile-client fuzzer at 10,000 cases per endpoint (make test runs 2,000)
fuzz: $(VENV)/.dev-installed
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-10000} $(BIN)/python -m pytest -p no:cacheprovider tests/fuzz -q -s

## make browser: Debian's Chromium for the dashboard's browser tests (Playwright drives it; it never downloads one)
browser:
	@test -x /usr/bin/chromium || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

## make bench: every bench/*.py the installed tiers allow, one combined table and var/bench/<time>-<commit>.json
## (bench/compare.py; BENCH_ONLY=hop,admission picks some; compare two runs: .venv/bin/python bench/compare.py OLD.json NEW.json)
bench: $(VENV)/.dev-installed
	$(BIN)/python bench/compare.py

clean:
	rm -rf $(VENV) var $(NODE_EXAMPLES)/node_modules
