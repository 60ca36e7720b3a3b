# lakeline: developer and CI entry points.
#
#   make test    install into .venv if needed, run `make lint`, start a throwaway PostgreSQL,
#                run the suite without soak tests, then the model tests again with
#                LAKELINE_NATIVE=0 (what CI runs, through .ci/run)
#   make lint    ruff check, ruff format --check and mypy (configured in pyproject.toml)
#   make soak    the same with only the long soak/torture tests
#   make demo    the `lakeline demo` walk-through
#   make bench   benchmarks against peers (python -m bench)
#   make venv    create .venv and install lakeline with every extra (.[dev])
#   make clean   remove caches and build leftovers (keeps .venv); distclean also drops .venv
#
# Variables: PYTEST_ARGS (default -q), PYTHON (interpreter for the venv), PG_BIN
# (PostgreSQL server binaries; default: version 15 from Debian, else the newest found).

SHELL := /bin/bash
.DEFAULT_GOAL := test

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# Installing is slow (pyspark, deltalake, ...): redo it only when the build inputs changed
# (an editable install compiles indexes/_native.c and table/_position_filter.c in place).
STAMP := $(VENV)/.installed-stamp
PG_SERVER := /usr/lib/postgresql/15/bin/postgres
WITH_PG := scripts/with-postgres.sh
PYTEST_ARGS ?= -q --durations=40

.PHONY: test lint soak demo demo-runner bench venv postgres chromium java clean distclean

venv: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml setup.py indexes/_native.c table/_position_filter.c | $(PY)
	$(PY) -m pip install -e '.[dev]'
	touch $@

# The tests need a real server (they never skip PostgreSQL under CI). Install Debian's
# only when it is missing; the package's own cluster is not used.
postgres:
	@if [ ! -x $(PG_SERVER) ]; then \
	    if [ "$$(id -u)" -ne 0 ]; then \
	        echo "PostgreSQL 15 is not installed ($(PG_SERVER)); run as root or: sudo apt-get install -y postgresql-15" >&2; \
	        exit 1; \
	    fi; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update && (apt-get install -y postgresql-15 || apt-get install -y postgresql); \
	fi

# ruff on the whole checkout (package, tests, bench, scripts); mypy on the package as it is
# installed, `lakeline.*`, through a symlink tree of the package-dir mapping (mypy cannot
# follow the editable install's import hook; see scripts/typecheck-tree.py). Both run even
# when the first fails, so one pass shows every finding; paths are printed as in the checkout.
TYPECHECK_TREE := build/typecheck

lint: venv
	@status=0; \
	echo "ruff check ."; $(VENV)/bin/ruff check --output-format concise . || status=1; \
	echo "ruff format --check ."; $(VENV)/bin/ruff format --check . || status=1; \
	$(PY) scripts/typecheck-tree.py $(TYPECHECK_TREE) || exit 1; \
	echo "mypy -p lakeline"; \
	set -o pipefail; $(VENV)/bin/mypy | sed -e 's#^$(TYPECHECK_TREE)/lakeline/##' || status=1; \
	exit $$status

# The timeline report's test renders the page in a real headless browser (Debian's
# chromium); installed only when missing. Under CI=true a missing browser fails that test.
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	    if [ "$$(id -u)" -ne 0 ]; then \
	        echo "chromium is not installed; run as root or: sudo apt-get install -y chromium" >&2; \
	        exit 1; \
	    fi; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update && apt-get install -y chromium; \
	fi

# Spark (the pyspark wheel) needs a Java 17 or newer; installed only when missing. Under
# CI=true a missing Java fails the Spark tests (tests/spark/conftest.py).
java:
	@if ! command -v java >/dev/null 2>&1; then \
	    if [ "$$(id -u)" -ne 0 ]; then \
	        echo "Java is not installed; run as root or: sudo apt-get install -y openjdk-17-jre-headless" >&2; \
	        exit 1; \
	    fi; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update && apt-get install -y openjdk-17-jre-headless; \
	fi; \
	v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	if [ -n "$$v" ] && [ "$$v" -lt 17 ]; then echo "Spark 4 needs Java 17 or newer; found Java $$v" >&2; exit 1; fi

# The write, read and index model tests run a second time without the C extensions
# (LAKELINE_NATIVE=0: numpy and Arrow do their work), as an install without a compiler
# runs them: the two paths must be one behaviour (issue 45). About 45 s on 2 idle cores.
NATIVE_OFF_TESTS := tests/table/test_model.py tests/table/merge_engines/test_engine_model.py \
	tests/table/schema/test_schema_model.py tests/table/read/test_mor_reads.py \
	tests/table/read/change_feed/test_change_feed.py \
	tests/indexes/record_index/test_record_index.py::test_exact_through_every_write_and_service \
	tests/indexes/test_table_indexes.py::test_pruned_scans_equal_unpruned_and_validate_is_clean \
	tests/indexes/test_native.py::test_lakeline_native_0_turns_every_c_loop_off

test: venv lint postgres chromium java
	$(WITH_PG) $(PY) -m pytest -m "not soak" $(PYTEST_ARGS)
	LAKELINE_NATIVE=0 $(PY) -m pytest -m "not soak and not postgres and not s3" -q $(NATIVE_OFF_TESTS)

soak: venv postgres java
	$(WITH_PG) $(PY) -m pytest -m soak $(PYTEST_ARGS)

# The schedule explorer (tests/explorer): a seeded campaign of random schedules plus every
# small scenario enumerated with a crash; prints each violation and a summary.
EXPLORE_ARGS ?= --campaign 1000 --budget 600 --scenarios --preemptions 2 --crashes 1 --max-runs 60 --keep-going
.PHONY: explore
explore: venv
	$(PY) -m tests.explorer $(EXPLORE_ARGS)

# The walk-through on the embedded engine, then the same table from a local Spark
# application (lakeline.spark.demo): a DataFrame upsert, a data-source delete, a
# compaction on SparkEngine and a read. Each run writes into a new temp folder (or
# DEMO_DIR, a new or empty folder) and names it first and last, failed or not: a run
# that only said where the table was left folders behind nobody knew to remove.
demo: venv java
	@d="$${DEMO_DIR:-$$(mktemp -d -t lakeline-demo-XXXXXX)}"; \
	echo "--- make demo writes into $$d (choose the folder with DEMO_DIR=<a new or empty folder>)"; \
	$(VENV)/bin/lakeline demo "$$d" && $(MAKE) --no-print-directory demo-runner DEMO_DIR="$$d" && \
	$(PY) -m lakeline.spark.demo "$$d"; rc=$$?; \
	if [ $$rc = 0 ]; then echo "--- make demo wrote into $$d (the table demo_table/ and the runner's runner.toml)"; \
	else echo "--- make demo failed (exit $$rc); its folder: $$d"; fi; \
	echo "    remove it with: rm -rf $$d"; \
	exit $$rc

# A runner over the demo table for a few seconds (docs/runner.md): SIGTERM after 6 s, then
# what it did and the table's status.
demo-runner: venv
	@d="$${DEMO_DIR:?DEMO_DIR: a folder where lakeline demo ran}"; \
	printf '[runner]\nthreads = 2\ngrace_seconds = 5\n\n[[tables]]\npath = "%s"\n' "$$d/demo_table" > "$$d/runner.toml"; \
	for s in compaction clustering cleaning archival rollback; do echo "$$s = \"every 1s\"" >> "$$d/runner.toml"; done; \
	echo "--- lakeline runner --config $$d/runner.toml (SIGTERM after 6 s)"; \
	timeout --preserve-status -s TERM 6 $(VENV)/bin/lakeline runner --config "$$d/runner.toml" && \
	$(VENV)/bin/lakeline runner status --config "$$d/runner.toml"

bench: venv
	$(PY) -m bench

clean:
	rm -rf .pytest_cache .hypothesis .ruff_cache .mypy_cache build dist bench/out spark-warehouse metastore_db derby.log
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) lakeline.egg-info
