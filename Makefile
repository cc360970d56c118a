# The two set-up commands of README.md: `make demo` and `make test`.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: install demo test-deps test bench sample

install:
	$(PIP) install -e .

demo: install
	$(PYTHON) -m stac_gdal_mcp demo

# Python packages for the tests, and PostgreSQL 15 + PostGIS 3 where missing (apt, as root or with sudo).
test-deps:
	$(PIP) install -e ".[test]"
	bash scripts/install-test-deps.sh

# The test suite starts its own services on 127.0.0.1 (pgstac STAC API, Range-capable COG server).
test: test-deps
	CI=$${CI:-false} $(PYTHON) -m pytest -q -p no:cacheprovider

bench: test-deps
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

sample:
	$(PYTHON) scripts/make_sample_catalog.py
