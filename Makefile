# Set-up and entry points.  Both `make demo` and `make test` install what
# they need on a fresh Debian machine (as root): system packages, then a
# virtual environment inside the repository.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .make
SYSTEM_PACKAGES := python3 python3-venv python3-pip openssh-server openssh-client iproute2 util-linux procps gcc libgomp1 chromium \
	libopenblas0-pthread hpcc fio netpipe-tcp iperf3 openmpi-bin libopenmpi-dev hwloc slurm-wlm munge
DEMO_DIR := demo

.PHONY: demo test test-fast test-kernels install system-packages bench clean

# The suite's processes keep what they compile (git ignores it): pytest the
# test modules whose asserts it rewrites, Python every module it imports.  An
# environment that forbids it (PYTHONDONTWRITEBYTECODE) would have each of
# them compile everything again: 7 more seconds for every test worker.
test test-fast test-kernels bench: export PYTHONDONTWRITEBYTECODE :=

demo: install
	@# The staged check on an 8-node virtual cluster (two leaf switches, links
	@# shaped to 100 Mbit/s) with two planted fact faults, a competing process
	@# in one node and one node's link ten times slower (benchmark sizes small
	@# enough for 8 nodes sharing this machine; the sets stage times Sendrecv
	@# and Allreduce only, as sets holding the slow link and the busy node take
	@# a minute each), then the statistical analysis
	@# of a synthetic 484-node cluster.  The testbed is torn down whatever happens.
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	@set -e; trap '$(BIN)/oddnode testbed down' EXIT; \
	$(BIN)/oddnode testbed up --nodes 8 --leaves 2 --link-rate 100mbit; \
	$(BIN)/oddnode testbed fault bios-date node03 09/02/2004; \
	$(BIN)/oddnode testbed fault memory node06 --percent 75; \
	$(BIN)/oddnode testbed fault hog node05 --seconds 1800; \
	$(BIN)/oddnode testbed fault link node02 --slower 10; \
	$(BIN)/oddnode check --testbed --continue -r 3 --memory-elements 8000000 --memory-ntimes 3 \
		--threads 1 --memory-min-seconds 0.5 --noise-seconds 5 \
		--dgemm-n 1000 --hpl-n 1000 --disk-size 67108864 \
		--sizes 0,1024,65536,262144 --seconds-per-size 0.5 --bisection-seconds 1 \
		--set sets.benchmarks=sendrecv,allreduce \
		--db $(DEMO_DIR)/check.duckdb --html $(DEMO_DIR)/check-report.html || [ $$? -eq 1 ]
	$(BIN)/oddnode synth $(DEMO_DIR)/cluster --nodes 484
	$(BIN)/oddnode analyze $(DEMO_DIR)/cluster --db $(DEMO_DIR)/oddnode.duckdb --html $(DEMO_DIR)/report.html \
		--truth $(DEMO_DIR)/cluster/truth.json --fail-on never
	@echo "Reports: $(abspath $(DEMO_DIR)/check-report.html) (the check of the testbed)"
	@echo "         $(abspath $(DEMO_DIR)/report.html) (analysis of the synthetic cluster)"

# The testbed tier runs one test at a time, and beside it, at nice 19, the
# unit tier and then the kernel tier's tests that time nothing: the
# testbed's nodes are held to half the machine by their CPU quotas and wait
# on their shaped links most of the time, so the tests beside them take the
# CPU time the testbed leaves (on 2 cores the testbed tier takes 34-45
# minutes; the unit tier 7-12 and the kernel tier 2.5 beside it, as long as
# alone).  Its time is the tests' own (99 tests; bringing up and down all 14
# testbeds takes a minute in all), each sized to the statistics its fault
# needs.  (Two workers, each with a testbed of its own, `-n 2 --dist
# loadgroup`, take about 60% of the time, but on 2 CPUs the two testbeds'
# busy moments coincide and a timing-based test then misses its fault now
# and then: not in the suite that gates a change.)  The kernel tests marked
# timing (they compare a measured time or rate) run alone afterwards.  The
# serial runs list their slowest tests.  Every part runs even when one
# before it fails, and a part that runs no test (pytest's exit status 5)
# fails the target.
test: install
	@mkdir -p $(STAMPS) && rm -f $(STAMPS)/unit.status $(STAMPS)/kernels.status
	( nice -n 19 $(BIN)/python -m pytest -q -n 2 tests/unit > $(STAMPS)/unit.log 2>&1; \
	  echo $$? > $(STAMPS)/unit.status; \
	  nice -n 19 $(BIN)/python -m pytest -q -n 2 -m "not timing" tests/kernels > $(STAMPS)/kernels.log 2>&1; \
	  echo $$? > $(STAMPS)/kernels.status ) & beside_pid=$$!; \
	$(BIN)/python -m pytest -q --durations=20 tests/testbed; testbed=$$?; \
	wait $$beside_pid; \
	unit=$$(cat $(STAMPS)/unit.status 2>/dev/null || echo 1); \
	kernels=$$(cat $(STAMPS)/kernels.status 2>/dev/null || echo 1); \
	echo "== tests/unit (beside the testbed tier)"; cat $(STAMPS)/unit.log; \
	echo "== tests/kernels, not timing (beside the testbed tier)"; cat $(STAMPS)/kernels.log; \
	$(BIN)/python -m pytest -q --durations=20 -m timing tests/kernels; timing=$$?; \
	echo "exit statuses: unit $$unit, testbed $$testbed, kernels $$kernels, timing $$timing"; \
	[ $$unit -eq 0 ] && [ $$kernels -eq 0 ] && [ $$timing -eq 0 ] && [ $$testbed -eq 0 ]

# The unit tier's quick loop, under two minutes on 2 cores: every unit test
# but those marked slow (0.3 s or more each on 2 shared cores: the command line
# in a subprocess, thousands of nodes, many seeds; `make test` runs them).
test-fast: install
	$(BIN)/python -m pytest -q -n auto -m "not slow" tests/unit

# The unit and kernel tiers: everything that needs no testbed.
test-kernels: install
	$(BIN)/python -m pytest -q tests/unit tests/kernels

# The man page and the command index (what help and completion list without
# loading any command), written from the command line itself: run after
# adding or changing a command.
.PHONY: man
man: install
	$(BIN)/python -m oddnode.main
	$(BIN)/python -m oddnode.manpage docs/oddnode.1

bench: install
	$(BIN)/python bench/cli_start.py
	$(BIN)/python bench/health_program.py
	$(BIN)/python bench/analyze_scale.py
	$(BIN)/python bench/inventory_fanout.py
	$(BIN)/python bench/memory_kernel.py
	$(BIN)/python bench/pingpong.py
	$(BIN)/python bench/mpi_kernels.py
	$(BIN)/python bench/noise_kernel.py
	$(BIN)/python bench/numa_kernel.py
	$(BIN)/python bench/profile_overhead.py

install: $(STAMPS)/venv

system-packages: $(STAMPS)/system

$(STAMPS)/system: Makefile
	@mkdir -p $(STAMPS)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	else \
		echo "not root or not Debian: assuming $(SYSTEM_PACKAGES) are installed"; \
	fi
	@touch $@

$(STAMPS)/venv: $(STAMPS)/system pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

clean:
	rm -rf $(VENV) $(STAMPS) $(DEMO_DIR) build *.egg-info
