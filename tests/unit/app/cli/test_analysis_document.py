"""analyze --json carries a section for each kind of result the store holds
beyond the node series (pair patterns, set tables, sync readings, NUMA
matrices), and none for a kind it does not hold."""

from __future__ import annotations

import json

import pytest

from oddnode.store import open_store
from support.cli import invoke, write
from support.numa_data import store_cluster
from support.set_data import Fabric, write_sets
from support.sync_data import SyncCluster

pytestmark = pytest.mark.slow

NODES = [f"cn-{i:03d}" for i in range(1, 17)]
SECTIONS = {"pairs", "sets", "sync", "numa"}


def sections(db) -> dict:
    result = invoke("analyze", "--db", db, "--json", "--fail-on", "never")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    return {key: document[key] for key in SECTIONS if key in document}


def pairs_into(db, tmp_path) -> None:
    plot = write(tmp_path / "plot.pp_sort:bandwidth.1048576",
                 "".join(f"{1000 + i} {a}-{b}\n" for i, (a, b) in enumerate(zip(NODES[0::2], NODES[1::2]))))
    assert invoke("import", "stab", plot, "--db", db).exit_code == 0


@pytest.mark.parametrize("kind", sorted(SECTIONS))
def test_a_store_of_one_kind_has_its_section_only(tmp_path, kind):
    db = tmp_path / f"{kind}.duckdb"
    if kind == "numa":
        store_cluster(db, NODES[:4])
    elif kind == "pairs":
        pairs_into(db, tmp_path)
    else:
        with open_store(db) as store:
            if kind == "sets":
                write_sets(store, Fabric(NODES), 4, 3)
            else:
                SyncCluster(NODES[:8]).store(store)
    found = sections(db)
    # Sync runs over growing sets are scale runs too: their tables are the scale family's.
    assert set(found) == ({kind, "sets"} if kind == "sync" else {kind}), set(found)


def test_a_store_of_every_kind_has_every_section(tmp_path):
    db = tmp_path / "all.duckdb"
    store_cluster(db, NODES[:4])
    pairs_into(db, tmp_path)
    with open_store(db) as store:
        write_sets(store, Fabric(NODES), 4, 3)
        SyncCluster(NODES[:8]).store(store)
    found = sections(db)
    assert set(found) == SECTIONS
    (pattern,) = found["pairs"]
    assert pattern["benchmark"] == "pp_sort"
    assert found["numa"]["measures"] and found["sync"]["nodes"]


def test_each_stored_mpi_profile_is_carried_as_profile_show_prints_it(tmp_path):
    from support.cli import FIXTURES
    from support.schema import schema_errors

    db = tmp_path / "profiles.duckdb"
    assert invoke("import", "mpip", FIXTURES / "mpip" / "halo_alltoall_np4.mpiP", "--db", db).exit_code == 0
    shown = json.loads(invoke("profile", "--show", "1", "--json", "--db", db).stdout)
    document = json.loads(invoke("analyze", "--db", db, "--json", "--fail-on", "never").stdout)
    assert document["profiles"] == [shown] and schema_errors(document, ("analysis",)) == []
    report = tmp_path / "report.html"
    invoke("analyze", "--db", db, "--html", report, "--fail-on", "never")
    html = report.read_text(encoding="utf-8")
    section = html[html.index('<section id="profiles">'):]
    section = section[:section.index("</section>")]
    assert "Profile 1 (mpip): 4 ranks on 2 hosts, wall 20 s, 30.0% of it in MPI" in section
    assert "Time by MPI call (all ranks)" in section and "MPI_Alltoall" in section and section.count("<svg") == 1
    pairs_into(tmp_path / "pairs.duckdb", tmp_path)
    without = json.loads(invoke("analyze", "--db", tmp_path / "pairs.duckdb", "--json", "--fail-on", "never").stdout)
    assert "profiles" not in without
