# Set-up and entry points.  Both `make demo` and `make test` install what
# they need on a fresh Debian machine (as root): system packages, then a
# virtual environment inside the repository.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .make
SYSTEM_PACKAGES := python3 python3-venv python3-pip
DEMO_DIR := demo

.PHONY: demo test install system-packages bench clean

demo: install
	rm -rf $(DEMO_DIR)/report.html $(DEMO_DIR)/oddnode.duckdb
	$(BIN)/oddnode synth $(DEMO_DIR)/cluster --nodes 484
	$(BIN)/oddnode analyze $(DEMO_DIR)/cluster --db $(DEMO_DIR)/oddnode.duckdb --html $(DEMO_DIR)/report.html \
		--truth $(DEMO_DIR)/cluster/truth.json
	@echo "Report: $(abspath $(DEMO_DIR)/report.html)"

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python bench/analyze_scale.py

install: $(STAMPS)/venv

system-packages: $(STAMPS)/system

$(STAMPS)/system:
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
