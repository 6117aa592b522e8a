"""The whole analysis on results oddnode did not make: a site's own names,
spellings, units and node naming, with and without planted faults."""

import pytest

from support.foreign import FAULTS, SCHEMES, write_foreign_cluster
from oddnode.judge.analysis import analyze
from oddnode.store.stab import import_stab
from oddnode.core.model import Severity
from oddnode.store import open_store


def judged(tmp_path, scheme, n, seed, faults=()):
    """The planted truth and the warnings and errors the analysis gave."""
    cluster = write_foreign_cluster(tmp_path / "results", scheme, n, seed, faults)
    with open_store(tmp_path / "site.duckdb") as store:
        import_stab(store, [cluster.directory])
        findings = analyze(store.load_dataset(), correlations=False).findings
    given = {(f.kind, "" if f.kind == "missing" else f.subject, f.nodes)
             for f in findings if f.severity.rank >= Severity.WARNING.rank}
    return cluster, given, findings


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("n", [8, 100, 484])
def test_a_healthy_foreign_cluster_gives_no_warning(tmp_path, scheme, n):
    _, given, findings = judged(tmp_path, scheme, n, seed=n)
    assert given == set(), [f.message for f in findings if f.severity.rank >= Severity.WARNING.rank]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("n", [8, 100, 484])
def test_every_planted_fault_and_nothing_else_is_named(tmp_path, scheme, n):
    cluster, given, findings = judged(tmp_path, scheme, n, seed=n + 1, faults=FAULTS)
    assert given == cluster.truth, [f.message for f in findings if f.severity.rank >= Severity.WARNING.rank]


def test_a_node_that_never_booted_is_the_first_finding(tmp_path):
    cluster, _, findings = judged(tmp_path, "unpadded", 100, seed=5, faults=("never-booted",))
    first = findings[0]
    assert first.kind == "missing" and first.severity is Severity.ERROR
    assert ("missing", "", first.nodes) in cluster.truth


@pytest.mark.slow
def test_healthy_clusters_over_many_seeds_stay_silent(tmp_path):
    for seed in range(30):
        _, given, _ = judged(tmp_path / str(seed), SCHEMES[seed % len(SCHEMES)], 8 + seed, seed)
        assert given == set(), f"seed {seed}: {given}"
