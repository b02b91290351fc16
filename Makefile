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

.PHONY: all install system venv proto test test-unit test-integration test-spark test-fault \
	test-deploy test-netfault soak run bench bench-scale bench-failover spark-bench spark-env lint typecheck docs docs-serve \
	clean ansible-collections ansible-lint wheelhouse

all: test

install: system venv

# Debian's zookeeper package ships only jars: nothing is started (see RECIPES.md). Prometheus
# (the observability tests scrape a live fleet with it) is started by the tests, never as a daemon.
# xfsprogs/e2fsprogs: the storage-fault suite formats loop devices XFS and ext4 (tests/fault).
# openssh-server, xfsprogs and e2fsprogs: the deployment test bed's hosts (sshd per network
# namespace, XFS/ext4 data disks); the package's own sshd is not started (no init system here).
# nftables: the network-fault ring cuts one service of a host off by its TCP ports (nft rules in
# the host's namespace; nothing is loaded outside them).
system:
	@if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null \
	    || ! command -v prometheus >/dev/null || [ ! -x /usr/sbin/sshd ] \
	    || ! command -v mkfs.xfs >/dev/null || ! command -v mkfs.ext4 >/dev/null \
	    || ! command -v kcat >/dev/null || ! command -v nft >/dev/null; then \
	  echo "installing zookeeper, a JRE, prometheus, openssh-server, xfsprogs, e2fsprogs, kcat, nftables from Debian's packages"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq zookeeper default-jre-headless \
	    prometheus openssh-server openssh-client xfsprogs e2fsprogs kcat nftables >/dev/null; \
	fi

venv: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c requirements.lock -e '.[dev,spark]'
	@touch $(STAMP)

# ansible.posix and community.general for ansible/, taken out of the `ansible` wheel (its version
# pinned in requirements.lock) into a git-ignored directory: never committed, no Galaxy needed.
ANSIBLE_COLLECTIONS := .ansible-collections
ANSIBLE_COLLECTIONS_STAMP := $(ANSIBLE_COLLECTIONS)/.extracted
ansible-collections: $(ANSIBLE_COLLECTIONS_STAMP)

$(ANSIBLE_COLLECTIONS_STAMP): requirements.lock $(STAMP)
	@rm -rf $(ANSIBLE_COLLECTIONS) && mkdir -p $(ANSIBLE_COLLECTIONS)/wheel
	$(PY) -m pip download -q --no-deps -c requirements.lock ansible -d $(ANSIBLE_COLLECTIONS)/wheel
	$(PY) -c 'import sys, zipfile, glob; z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/wheel/ansible-*.whl")[0]); \
	  z.extractall(sys.argv[1], [n for n in z.namelist() if n.startswith(("ansible_collections/ansible/posix/", \
	  "ansible_collections/community/general/"))])' $(ANSIBLE_COLLECTIONS)
	@rm -rf $(ANSIBLE_COLLECTIONS)/wheel && touch $@

ansible-lint: venv ansible-collections
	ANSIBLE_CONFIG=ansible/ansible.cfg $(VENV)/bin/ansible-lint ansible/

# The build ansible/ ships to hosts without internet access: the project's wheel and its locked
# runtime dependencies (site.yml builds it when missing; upgrade.yml installs a new one).
wheelhouse: venv
	ansible/files/build-wheelhouse.sh $(PY) . dist/wheelhouse

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

# The documentation site (MkDocs + Material + mkdocstrings, mkdocs.yml) into build/site/, with
# --strict: a broken link, a missing page or any warning fails. The reference pages (configs,
# commands, metrics) and the Benchmarks figures are generated from the code and bench-results/
# at every build (docs/hooks.py); tests/unit/sdk/test_docs_build.py builds it in `make test`.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

test: install ansible-collections
	$(VENV)/bin/lint-imports
	ANSIBLE_CONFIG=ansible/ansible.cfg $(VENV)/bin/ansible-lint ansible/
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: install
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

# The fault ring alone: kills, pauses, session expiries and storage faults on loop-device XFS/ext4
# file systems (root; the disk tests skip with a reason elsewhere). `make test` runs it too.
test-fault: install
	$(PY) -m pytest -m fault tests/fault $(PYTEST_ARGS)

# The Spark ring alone: the riverbed data source, the jobs and a standalone cluster against a real
# fleet (one local SparkSession for the run). `make test` runs it too.
test-spark: install
	$(PY) -m pytest -m spark tests/spark $(PYTEST_ARGS)

# The Ansible roles against five real SSH hosts built from network namespaces on this machine
# (tests/deploy; `make test` runs it too). Skips itself, with the reason, without root, network
# namespaces or loop devices.
test-deploy: install ansible-collections
	$(PY) -m pytest -m deploy tests/deploy -rs $(PYTEST_ARGS)

# The network-fault ring alone (tests/deploy/test_netfault_ring.py; `make test` runs it too, on the
# deployment the Ansible tests made): a follower isolated, a leader cut off from its followers or
# from everything, a gateway cut off from a leader, a one-way cut, a slow follower link, one
# ZooKeeper member cut off, each under an acks=all idempotent verifying producer; figures in the
# terminal summary. Alone it deploys the test bed first (about 6 minutes). Skips without root,
# network namespaces, loop devices or nft.
test-netfault: install ansible-collections
	$(PY) -m pytest -m netfault tests/deploy/test_netfault_ring.py -rs $(PYTEST_ARGS)

# The soak (not part of `make test`): a fleet under a verifying acks=all idempotent producer and a
# group consumer for 10 minutes, one fault at a time every 10-20 s from a seeded random schedule
# (process kills and pauses, a gateway kill, a full disk), then the full check and a report
# (JSON and a throughput plot with the faults marked) under build/soak/. A local fleet by default;
# SOAK_ARGS="--testbed" for the deployment test bed with network cuts and slow links;
# SOAK_ARGS="--duration 1800 --seed 7" for a longer, replayable run (tests/soak/soak.py --help).
SOAK_ARGS ?=
soak: install ansible-collections
	$(PY) tests/soak/soak.py $(SOAK_ARGS)

# A local fleet in the foreground, state under $(RUN_DIR)/; Ctrl-C stops all of it.
run: install
	$(VENV)/bin/riverbed fleet up --data-dir $(RUN_DIR) --base-port $(BASE_PORT)

# Benchmarks go through riverbed-bench (loadgen/bench_cli.py: `riverbed-bench list` names the
# suites): each run's figures, report and the machine's description land in bench-results/ as
# JSON, and the docs' Benchmarks page is generated from the latest of them. BENCH_ARGS are more
# arguments for the suite's module, as before (BENCH_ARGS=--quick: the one-producer figure).
BENCH := $(VENV)/bin/riverbed-bench
bench: install
	$(BENCH) run bench --args "$(BENCH_ARGS)"
	$(BENCH) run security
	$(BENCH) run kafka

# How cost grows: partitions, producer processes, gateways, metadata size, memory
# (loadgen/scale.py; BENCH_ARGS=--quick for the small smoke-test points, --plot F.png).
bench-scale: install
	$(BENCH) run scale --args "$(BENCH_ARGS)"

# Leader failover (SIGKILL under acks=all load) with heartbeats vs ZooKeeper's session alone,
# SDK defaults, and leader changes counted under sustained load with no fault
# (loadgen.failover_bench --skip-throughput --modes heartbeat,zk --client-defaults --kills 5
# --sustain-s 120).
bench-failover: install
	$(BENCH) run failover --args "$(BENCH_ARGS)"

# Spark reading and writing 2,000,000 records beside one SDK consumer and producer.
spark-bench: install
	$(BENCH) run spark --args "$(BENCH_ARGS)"

# The SDK packed for executors (spark-submit --archives dist/riverbed-spark-env.zip#environment).
spark-env: install
	$(PY) -m jobs.pack_env --output dist/riverbed-spark-env.zip

clean:
	rm -rf $(RUN_DIR) .pytest_cache build/site
