# The two set-up commands of README.md: `make demo` and `make test`.
#
# Both work from nothing but `python3` (3.11+) and `make`: the Makefile creates its own
# virtual environment in .venv (so a PEP 668 "externally managed" system Python is fine)
# and installs into it the exact versions pinned in requirements/lock.txt.
PYTHON ?= python3
VENV ?= .venv
LOCK ?= requirements/lock.txt
BIN := $(VENV)/bin
PY := $(BIN)/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: install demo test-deps lint format test test-fast bench notebooks notebooks-check sample lock wheel docs clean

# The virtual environment. Debian/Ubuntu ship `venv` separately (python3-venv): install it
# when missing and we are root, else say what to do.
$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "make: Python >= 3.11 needed ($(PYTHON) is $$($(PYTHON) --version 2>&1))" >&2; exit 1; }
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
		rm -rf $(VENV); \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); \
		else echo "make: '$(PYTHON) -m venv' failed; install python3-venv (Debian/Ubuntu) and retry" >&2; exit 1; fi; }
	$(PIP) install -q --upgrade "pip>=24"

# Runtime install (what `make demo` needs), pinned by the lock.
$(VENV)/.installed: $(PY) pyproject.toml $(LOCK)
	$(PIP) install -q -c $(LOCK) -e .
	@touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m stac_gdal_mcp demo

# Test install: the package with its test extra, pinned by the same lock; PostgreSQL 15 +
# PostGIS 3 where missing (apt, as root or with sudo).
$(VENV)/.test-installed: $(PY) pyproject.toml $(LOCK)
	$(PIP) install -q -c $(LOCK) -e ".[test,docs]"
	@touch $@ $(VENV)/.installed

test-deps: $(VENV)/.test-installed
	bash scripts/install-test-deps.sh

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.test-installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The whole suite: lint, then every test (it starts its own pgstac STAC API and
# Range-capable COG server on 127.0.0.1).
test: test-deps lint
	CI=$${CI:-false} $(PY) -m pytest -q -p no:cacheprovider

# The fast lane: pure functions, no services (seconds).
test-fast: $(VENV)/.test-installed
	$(PY) -m pytest -q -p no:cacheprovider -m "not testbed"

bench: test-deps .peer-venv/bin/stac-mcp
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done
	@echo "== benchmarks/agent_tasks.py"; $(PY) benchmarks/agent_tasks.py

# The peer MCP servers benchmarks/agent_tasks.py runs beside ours, in a venv of their own.
.peer-venv/bin/stac-mcp: requirements/bench-peers.txt
	$(PYTHON) -m venv .peer-venv
	.peer-venv/bin/pip install -q --disable-pip-version-check -r requirements/bench-peers.txt

# The notebooks (notebooks/, on the bundled sample catalog): JupyterLab from the notebooks extra,
# opened on the folder. notebooks-check runs each one headless, as tests/test_notebooks.py does.
notebooks: $(VENV)/.installed
	$(PIP) install -q -c $(LOCK) -e ".[notebooks]"
	cd notebooks && $(abspath $(BIN))/jupyter lab

notebooks-check: $(VENV)/.test-installed
	$(PY) -m pytest -q -p no:cacheprovider tests/test_notebooks.py

sample: install
	$(PY) scripts/make_sample_catalog.py

# The docs site in site/ (the tool reference is generated from the tool schemas at build time).
# No -q: with -q, mkdocs does not count warnings and --strict passes anyway.
docs: $(VENV)/.test-installed
	$(BIN)/mkdocs build --strict

# Refresh the lock: resolve pyproject's ranges afresh in a throw-away venv and pin the result.
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q --upgrade "pip>=24"
	.lock-venv/bin/pip install -q ".[test,docs]"
	{ echo "# Pinned test/runtime environment: 'make lock' regenerates it from pyproject.toml."; \
	  .lock-venv/bin/pip freeze --exclude stac-gdal-mcp | sort -f; } > $(LOCK)
	rm -rf .lock-venv

# The package as users install it (wheel + sdist in dist/).
wheel: $(VENV)/.test-installed
	$(PY) -m build --outdir dist .

clean:
	rm -rf $(VENV) dist build .lock-venv
