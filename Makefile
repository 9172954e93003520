# Two entry points on a fresh machine: `make run` and `make test`.
# torch is pinned by a constraint on every install so nothing pulls a newer (CUDA) build.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EXTRAS := emulate,search,report,onnx,hls,tables,dev

.PHONY: run test lint bench browser fuzz clean

# uv installs the packages pip would, from the same places, in less time (issue 36: pip took
# 100-160 s of a fresh clone's `make test`, uv about 30 s with an empty cache). uv reads no
# pip.conf, so pip's configured find-links and extra indexes (a machine's wheels on disk)
# are handed to it, and it weighs every index as pip does (best match, not first index). It
# compiles the bytecode as pip does: where PYTHONDONTWRITEBYTECODE is set (as on this
# project's machines) nothing else would, and every process importing torch and
# transformers would pay 10 s of CPU, not 4.5. uv keeps its downloads in its own cache
# (UV_CACHE_DIR, else ~/.cache/uv).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv==0.13.9
	echo "torch==2.13.0" > $(VENV)/constraints.txt
	UV_FIND_LINKS="$$($(BIN)/pip config get global.find-links 2>/dev/null)" \
	UV_EXTRA_INDEX_URL="$$($(BIN)/pip config get global.extra-index-url 2>/dev/null)" \
	UV_INDEX_STRATEGY=unsafe-best-match \
	$(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python \
	  --constraint $(VENV)/constraints.txt \
	  torch -e ".[$(EXTRAS)]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/archi plan gpt2-1.5b --cluster 4xu280 --strategy dfx --tokens 64:64

# Tests in one worker process per core, four at most (pytest-xdist). worksteal hands each
# worker a contiguous half of the tests in file order and lets an idle worker take half of
# another's queue, so the run ends within about one test of balanced; loadscope ended on its
# smallest modules, a few of them single slow tests (a browser, the notebook), with the other
# worker idle (issue 36 point 5). A module's tests stay together except where a queue is cut,
# so a module-scoped emulation or model runs once a worker at most.
test: $(STAMP) browser
	$(BIN)/ruff check archipelago tests benchmarks
	$(BIN)/pytest -n auto --maxprocesses 4 --dist worksteal

# The report pages are checked in a real headless Chromium (tests/test_report_browser.py):
# installed from the system's Debian packages when missing (needs root or sudo).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

lint: $(STAMP)
	$(BIN)/ruff check archipelago tests benchmarks

# 10,000 hostile inputs per kind through the loaders and the plan path; prints the counts.
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz 10000

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_plan

clean:
	rm -rf $(VENV) .pytest_cache
