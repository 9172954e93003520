# Two entry points on a fresh machine: `make run` and `make test`.
# torch is pinned first so nothing later pulls a newer (CUDA) build.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[emulate,search,report,onnx,dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/archi plan gpt2-1.5b --cluster 4xu280 --strategy dfx --tokens 64:64

test: $(STAMP)
	$(BIN)/ruff check archipelago tests benchmarks
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check archipelago tests benchmarks

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_plan

clean:
	rm -rf $(VENV) .pytest_cache
