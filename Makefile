# ssbench: two commands do everything on a fresh machine (Python 3.11+, make, Java 17+).
#   make bench   run matrices/bench.yaml on the embedded PostgreSQL target, then the Spark analysis
#   make test    the test suite (what CI runs): the parallel part, then the tests that run alone
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
MATRIX ?= matrices/bench.yaml
TARGET ?= embedded
PYTEST_ARGS ?=
# make test's parallel part: pytest-xdist worker processes, each with its own embedded server;
# one and a half per CPU's worth of time this process may have, at least 3 (3 on 2 cores)
TEST_WORKERS ?= $(shell $(PYTHON) tests/support/machine.py --workers 2>/dev/null || echo 3)
PYTEST := $(BIN)/python -m pytest

.PHONY: bench test test-fast test-slow web gate server-stop clean check-python check-java help bytecode

help:
	@echo "make bench   run $(MATRIX) on the embedded target and build the report"
	@echo "make test    run the test suite (what CI runs)"
	@echo "make test-fast  the unit tests only: no server, swarm, Spark or simulation (under 2 minutes)"
	@echo "make test-slow  make test as on a machine half as fast (a CPU quota: tools/slow-machine)"
	@echo "make web     Locust web UI on the embedded target (127.0.0.1)"
	@echo "make gate    regression gate: interleaved baseline (HEAD) vs working tree on matrices/gate.yaml"
	@echo "make clean   stop the embedded server, remove .venv and build debris (results/ is kept)"

check-python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "ssbench needs Python 3.11 or newer ($(PYTHON) is $$($(PYTHON) --version 2>&1)). Set PYTHON=python3.x." >&2; exit 1; }

check-java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "Java 17+ is required by Spark (the analysis step) and was not found on PATH." >&2; \
	  echo "Install it, e.g. 'apt-get install openjdk-17-jre-headless' (Debian/Ubuntu), 'brew install openjdk@17' (macOS)," >&2; \
	  echo "or set JAVA_HOME to an existing JDK 17+." >&2; exit 1; }

# The venv, with ssbench and its test extras. uv installs them (pip installs uv first): on a
# fresh machine it downloads and builds in parallel, about half pip's time (benchmarks/install_time.py).
# The same packages either way, compiled to bytecode as pip would; if uv cannot be had, pip does it.
# PyPI has pyspark only as a source archive, and each install leaves a new 1.5 to 2.4 GB build of
# it in uv's cache: `uv cache prune` then removes what no install uses any more (under a second;
# without it, repeated installs fill a disk: docs/findings/install-time.md).
$(STAMP): pyproject.toml | check-python
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "$(BIN)/uv pip install --compile-bytecode -e '.[test]'"; \
	if ! { $(BIN)/python -m pip install --quiet uv && \
	       $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[test]' && \
	       { $(BIN)/uv cache prune --quiet || true; }; }; then \
	  echo "uv could not install ssbench: pip does instead" >&2; \
	  $(BIN)/python -m pip install --quiet --upgrade pip && $(BIN)/python -m pip install --quiet -e '.[test]'; \
	fi
	@touch $(STAMP)

bench: $(STAMP) check-java bytecode
	$(BIN)/ssbench bench --matrix $(MATRIX) --target $(TARGET)

# Two pytest runs, both always: first the tests that may share the machine, on $(TEST_WORKERS)
# xdist workers (a test module at a time per worker, the longest first; tests/analysis on one
# worker), then those marked `alone`, one at a time with nothing else running. Fails if either does.
test: $(STAMP) check-java bytecode
	@rc=0; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --ssbench-part parallel $(PYTEST_ARGS) || rc=$$?; \
	$(PYTEST) -p no:xdist --ssbench-part alone $(PYTEST_ARGS) || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	exit $$rc

# The unit tests (no server, no swarm, no Spark, no error-rate simulation) on $(TEST_WORKERS) xdist
# workers, then those of them marked `alone` (their figure is a share of CPU or a time), one at a
# time. Fails if either does.
test-fast: $(STAMP) bytecode
	@rc=0; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadscope --ssbench-part fast $(PYTEST_ARGS) || rc=$$?; \
	$(PYTEST) -p no:xdist --ssbench-part fast-alone $(PYTEST_ARGS) || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	exit $$rc

# make test as if on a machine half as fast: everything it starts shares a CPU quota of
# SLOW_CPUS (default: half the CPUs this machine has) through tools/slow-machine (cgroup v2
# cpu.max, v1 cpu.cfs_quota_us or systemd-run; needs root or a delegated cgroup).
SLOW_CPUS ?=
test-slow: $(STAMP)
	tools/slow-machine $(if $(SLOW_CPUS),--cpus $(SLOW_CPUS)) -- $(MAKE) test

# ssbench's own modules compiled ahead (pip compiled the dependencies when it installed them):
# every Locust, broker and ssbench process imports them, and where PYTHONDONTWRITEBYTECODE is
# set none of them would write the bytecode it compiled. Only what changed is compiled again.
# compileall prints only what it could not compile or write (a full disk, say), and fails then.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 harness

web: $(STAMP)
	$(BIN)/ssbench web --target $(TARGET)

gate: $(STAMP)
	$(BIN)/ssbench gate --interleave HEAD matrices/gate.yaml

server-stop:
	-@test -x $(BIN)/ssbench && $(BIN)/ssbench server stop

clean: server-stop
	rm -rf $(VENV) build *.egg-info .pytest_cache spark-warehouse metastore_db derby.log test-artifacts
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
