# Riverbed: `make run` starts a local fleet; `make test` runs every test.
# Both install what is missing first: Debian's zookeeper and a JRE (apt-get), and a
# virtualenv in .venv/ with the pinned Python packages (requirements.lock).

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
RUN_DIR ?= run
BASE_PORT ?= 9092
PYTEST_ARGS ?=

.PHONY: all install system venv proto test test-unit test-integration test-spark run bench \
	spark-bench spark-env lint typecheck docs clean

all: test

install: system venv

# Debian's zookeeper package ships only jars: nothing is started (see RECIPES.md). Prometheus
# (the observability tests scrape a live fleet with it) is started by the tests, never as a daemon.
system:
	@if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null \
	    || ! command -v prometheus >/dev/null; then \
	  echo "installing zookeeper, a JRE and prometheus from Debian's packages"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq zookeeper default-jre-headless \
	    prometheus >/dev/null; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e '.[dev,spark]'
	@touch $(STAMP)

# Regenerate the protobuf code from proto/ (tests/unit/test_proto_fresh.py fails when stale).
proto: venv
	$(PY) proto/generate.py --out sdk/riverbed/_proto

lint: venv
	$(VENV)/bin/lint-imports

# A user's program against the SDK's types (py.typed) under mypy --strict (also run by
# tests/unit/sdk/test_typing.py), then the SDK itself (not yet clean: reports, does not fail).
typecheck: venv
	MYPYPATH=sdk $(VENV)/bin/mypy --strict --python-version 3.11 --follow-imports=silent \
	  tests/typing/user_program.py
	-MYPYPATH=sdk $(VENV)/bin/mypy --python-version 3.11 --ignore-missing-imports -p riverbed

# The SDK reference from its docstrings (pdoc) into build/docs/, and docs/configuration.md from
# the clients' signatures. tests/unit/sdk/test_docs_build.py checks both in `make test`.
docs: venv
	$(PY) docs/build_docs.py --out build/docs

test: install
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: install
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

# The Spark ring alone: the riverbed data source, the jobs and a standalone cluster against a real
# fleet (one local SparkSession for the run). `make test` runs it too.
test-spark: install
	$(PY) -m pytest -m spark tests/spark $(PYTEST_ARGS)

# A local fleet in the foreground, state under $(RUN_DIR)/; Ctrl-C stops all of it.
run: install
	$(VENV)/bin/riverbed fleet up --data-dir $(RUN_DIR) --base-port $(BASE_PORT)

bench: install
	$(PY) -m loadgen.bench $(BENCH_ARGS)

# Spark reading and writing 2,000,000 records beside one SDK consumer and producer.
spark-bench: install
	$(PY) -m loadgen.spark_bench $(BENCH_ARGS)

# The SDK packed for executors (spark-submit --archives dist/riverbed-spark-env.zip#environment).
spark-env: install
	$(PY) -m jobs.pack_env --output dist/riverbed-spark-env.zip

clean:
	rm -rf $(RUN_DIR) .pytest_cache build/docs
