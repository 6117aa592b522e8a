"""A numeric fact (fact:KEY) correlated with a benchmark or shown by dist:
the temperature of the nodes against their memory bandwidth, as the STAB
case study asked ("correlation of temperature to memory performance")."""

from __future__ import annotations

import json

import numpy as np
import pytest

from oddnode.core.model import Dataset
from oddnode.findings.facts import fact_series
from support.cli import oddnode, write

NODES = [f"gpu{i:03d}" for i in range(1, 41)]


@pytest.fixture
def temperatures(tmp_path):
    """Forty nodes whose STREAM falls as they run hotter, and one fact that is text."""
    rng = np.random.default_rng(4)
    temperature = rng.uniform(45, 80, len(NODES))
    triad = 200 - 0.8 * (temperature - 45) + rng.normal(0, 1.0, len(NODES))
    results = tmp_path / "results"
    write(results / "plot.triad", "".join(f"{t:.2f} {n}\n" for n, t in zip(NODES, triad)))
    write(results / "inventory.csv", "".join(f"{n},CPU Temp (C),{t:.1f}\n{n},BIOS,v1.{i % 2}\n"
                                             for i, (n, t) in enumerate(zip(NODES, temperature))))
    db = tmp_path / "t.duckdb"
    oddnode("import", "stab", results, "--db", db, cwd=tmp_path)
    return db


@pytest.mark.slow
def test_a_hotter_node_is_a_slower_one(temperatures, tmp_path):
    result = oddnode("correlate", "fact:CPU Temp (C)", "triad", "--db", temperatures, "--json", cwd=tmp_path)
    document = json.loads(result.stdout)
    assert document["correlation"]["n"] == len(NODES)
    assert document["correlation"]["spearman"]["r"] < -0.8 and document["correlation"]["spearman"]["p"] < 1e-6
    assert document["x"]["name"] == "fact:CPU Temp (C)"
    dist = json.loads(oddnode("dist", "fact:CPU Temp (C)", "--db", temperatures, "--json", cwd=tmp_path).stdout)
    assert dist["series"]["n"] == len(NODES)


def test_a_fact_that_is_not_a_number_or_not_there_is_said():
    data = Dataset(facts={"BIOS": dict.fromkeys(NODES, "v1.2"), "fans": {"gpu001": "6", "gpu002": "n/a"}})
    with pytest.raises(KeyError, match="not a number on any node"):
        fact_series(data, "fact:BIOS")
    with pytest.raises(KeyError, match="no fact named 'rpm'"):
        fact_series(data, "fact:rpm")
    assert fact_series(data, "fact:fans").labels.tolist() == ["gpu001"]


@pytest.mark.slow
def test_an_unknown_fact_on_the_command_line_is_one_line(temperatures, tmp_path):
    result = oddnode("correlate", "fact:nosuch", "triad", "--db", temperatures, cwd=tmp_path, check=False)
    assert result.returncode == 2 and "no fact named 'nosuch'" in result.stderr and "Traceback" not in result.stderr
