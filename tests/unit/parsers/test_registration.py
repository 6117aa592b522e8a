"""Every registered thing -- parsers, steps, transports, finding rules --
comes from one list in its package, whatever module a process imports
first: a fresh interpreter that imports only a leaf module sees them all."""

import json
import subprocess
import sys

import pytest

from support.cli import FIXTURES, oddnode
from oddnode.findings import RULES
from oddnode.measure.catalog import CATALOG, STEPS
from oddnode.parsers import TOOL_PARSERS, parsers
from oddnode.parsers.base import PARSERS
from oddnode.reach import transports
from oddnode.store import open_store

# Our kernels' parsers that once existed only when some other module had
# happened to import the module that registered them.
OUR_KERNELS = ("oddnode-memory", "oddnode-noise", "oddnode-shm-pingpong", "oddnode-mpi-sync",
               "oddnode-mpi-collectives", "oddnode-mpi-demo-app")


def fresh(code: str) -> object:
    """What ``code`` prints as JSON in a new interpreter."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_the_parser_list_registers_every_parser_in_its_order():
    assert PARSERS.names() == [name for name, _ in TOOL_PARSERS]
    assert all(PARSERS.get(name) is parser for name, parser in TOOL_PARSERS)
    assert set(OUR_KERNELS) <= set(parsers())


@pytest.mark.slow
def test_import_help_lists_every_parser_in_a_fresh_process(tmp_path):
    listed = oddnode("import", "--help", cwd=tmp_path).stdout
    for name in (*parsers(), *OUR_KERNELS):
        assert f" {name} " in listed, f"oddnode import --help does not list {name}"


@pytest.mark.slow
def test_a_leaf_module_imported_first_sees_every_parser():
    for leaf in ("oddnode.parsers.oddnode_noise", "oddnode.parsers.stream", "oddnode.store.tool_import",
                 "oddnode.measure.node.numa"):
        assert fresh(f"import json, {leaf}; from oddnode.parsers import parsers; print(json.dumps(parsers()))") \
            == parsers(), leaf


@pytest.mark.slow
def test_a_leaf_module_imported_first_sees_every_transport_and_rule():
    assert fresh("import json, oddnode.reach.ssh; from oddnode.reach import transports; "
                 "print(json.dumps(transports()))") == transports()
    assert fresh("import json, oddnode.findings.noise; from oddnode.findings import RULES; "
                 "print(json.dumps(RULES.names()))") == RULES.names()


@pytest.mark.slow
def test_the_catalog_registers_every_step_in_its_order():
    assert STEPS.names()[:len(CATALOG)] == [step.name for step in CATALOG]
    assert fresh("import json, oddnode.measure.catalog as c; print(json.dumps(c.STEPS.names()))") \
        == [step.name for step in CATALOG]


@pytest.mark.slow
def test_import_oddnode_shm_pingpong_stores_a_real_output(tmp_path):
    output = FIXTURES / "numa" / "shm_pingpong.txt"  # a real run (tests/fixtures/README.md#numa)
    db = tmp_path / "shm.duckdb"
    oddnode("import", "oddnode-shm-pingpong", output, "--label", "cn-a17", "--db", db, cwd=tmp_path)
    with open_store(db, read_only=True) as store:
        series = {(s.benchmark, s.metric): s for s in store.load_series()}
    assert {("shm.pingpong", "latency.8"), ("shm.pingpong", "latency.4194304"),
            ("shm.pingpong", "bandwidth.8"), ("shm.pingpong", "bandwidth.4194304")} <= set(series)
    latency = series["shm.pingpong", "latency.8"]
    assert list(latency.labels) == ["cn-a17"] and list(latency.values) == [0.1]
