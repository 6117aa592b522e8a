"""``oddnode sets --order packed,striped --topology FILE``: sets by topology
group run, stored and reported with the groups each spans, on a scripted
cluster whose third switch sits behind a slow uplink; the check's sets
stage with and without a recorded topology."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from oddnode.core.nodes import expand
from oddnode.report.sets import ordering_table_view, placed_sets_view, set_views, sets_json
from oddnode.readings.sets import placed_sets
from oddnode.measure.set.runner import SetsOptions, SetsStep, run_sets
from oddnode.measure.steps import StepContext
from oddnode.store import open_store
from oddnode.reach.base import Target

from support.cli import invoke
from support.clusters.sets import SIZES, SetCluster

NODES = expand("gpu[003-014]")
TOPOLOGY_TEXT = "r12-sw3 gpu[003-006]\nr12-sw4 gpu[007-010]\nr13-sw1 gpu[011-014]\n"
GROUPS = {n: ("r12-sw3", "r12-sw4", "r13-sw1")[i // 4] for i, n in enumerate(NODES)}
ALL_THREE = ["r12-sw3", "r12-sw4", "r13-sw1"]


def slow_uplink_cluster() -> SetCluster:
    """r13-sw1's uplink a tenth of a link: sets that leave it run slowly."""
    return SetCluster(slow_groups={n: g for n, g in GROUPS.items() if g == "r13-sw1"})


def _options(**more) -> SetsOptions:
    return SetsOptions(sizes=SIZES, seconds_per_size=0.05, **more)


def _record_topology(store) -> None:
    with store.transaction():
        store.set_topology(store.new_run("topology", source="topology:test", nodes=NODES), GROUPS)


@pytest.mark.slow
def test_packed_sets_keep_to_one_switch_striped_ones_span_all_three_and_run_slower_behind_the_uplink(store):
    _record_topology(store)
    cluster = slow_uplink_cluster()
    target = Target(NODES, cluster)
    job = _options().job(target, 4)
    packed = run_sets(store, target, job, "packed", 2, size=4, groups=GROUPS)
    striped = run_sets(store, target, job, "striped", 2, size=4, groups=GROUPS)
    assert packed.count("ok") == striped.count("ok") == 6 and packed.notes == striped.notes == []
    # Fixed orders: the same sets every repetition, each launched from its first member.
    assert cluster.rounds[0] == cluster.rounds[1] == {
        "gpu003": NODES[0:4], "gpu007": NODES[4:8], "gpu011": NODES[8:12]}
    assert cluster.rounds[2] == cluster.rounds[3] and cluster.rounds[2]["gpu003"] == [
        "gpu003", "gpu007", "gpu011", "gpu004"]
    dataset = store.load_dataset()
    names = {r.benchmark for r in dataset.set_runs}
    assert {"sets.sendrecv.packed", "sets.sendrecv.striped"} <= names
    placed = {(p["ordering"], p["set"]): p for p in sets_json(dataset)["placed_sets"]
              if p["benchmark"] == "sendrecv" and p["metric"] == "bandwidth.1048576"}
    assert placed[("packed", "gpu[011-014]")]["groups"] == ["r13-sw1"]
    assert all(p["groups"] == ALL_THREE for (o, _), p in placed.items() if o == "striped")
    # Behind the slow uplink the striped sets' bandwidth falls, packed ones keep theirs.
    fast = min(p["median"] for (o, _), p in placed.items() if o == "packed")
    assert all(p["median"] < fast / 5 for (o, _), p in placed.items() if o == "striped")
    # Every set's members stored as before: the label, and the members in rank order.
    ranks = store.con.execute("SELECT DISTINCT label FROM results WHERE benchmark = 'sets.sendrecv.striped'")
    assert {label for (label,) in ranks.fetchall()} == {
        "gpu[003-004,007,011]", "gpu[005,008-009,012]", "gpu[006,010,013-014]"}
    (parameters,) = store.con.execute(
        "SELECT parameters FROM results WHERE benchmark = 'sets.sendrecv.striped' AND label = "
        "'gpu[003-004,007,011]' LIMIT 1").fetchone()
    stored = json.loads(parameters)
    assert stored["members"] == ["gpu003", "gpu007", "gpu011", "gpu004"] and stored["ordering"] == "striped"


def test_nodes_outside_the_topology_are_one_group_and_the_run_says_so(store):
    target = Target(NODES, SetCluster())
    groups = {n: g for n, g in GROUPS.items() if n not in ("gpu013", "gpu014")}
    with store.transaction():
        store.set_topology(store.new_run("topology", source="topology:test", nodes=NODES), groups)
    summary = run_sets(store, target, _options().job(target, 4), "striped", 1, size=4, groups=groups)
    assert any("2 nodes not in the topology, gpu[013-014], form one group (ungrouped)" in n for n in summary.notes)
    spans = {p.label: p.groups for p in placed_sets(store.load_dataset()) if p.benchmark == "sendrecv"}
    # striped over four groups, (ungrouped) the last: 003 007 011 013 | 004 008 012 014 | …
    assert spans["gpu[003,007,011,013]"] == ("r12-sw3", "r12-sw4", "r13-sw1", "(ungrouped)")


def test_a_remainder_of_a_fixed_order_is_said_once_not_per_repetition(store):
    target = Target(NODES[:10], SetCluster())
    summary = run_sets(store, target, _options().job(target, 4), "packed", 3, size=4, groups=GROUPS)
    assert summary.notes == ["packed, every repetition: gpu[011-012] sat out (2 nodes beyond 2 sets of 4)"]


def test_packed_without_a_topology_is_refused_before_any_run(store):
    cluster = SetCluster()
    target = Target(NODES, cluster)
    with pytest.raises(ValueError, match="ordering packed needs a topology"):
        run_sets(store, target, _options().job(target, 4), "packed", 1, size=4)
    assert cluster.rounds == [] and cluster.prepared == []


# --- the report ------------------------------------------------------------------------------


@pytest.fixture
def topology_dataset(tmp_path):
    with open_store(tmp_path / "report.duckdb") as store:
        cluster = slow_uplink_cluster()
        target = Target(NODES, cluster)
        _record_topology(store)
        job = _options().job(target, 4)
        for ordering in ("sorted", "shuffled", "packed", "striped"):
            run_sets(store, target, job, ordering, 3, size=4, groups=GROUPS)
        yield store.load_dataset()


def _render(view, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(view)
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_groups_table_fits_and_names_the_groups_each_set_spans(topology_dataset, width):
    text = _render(placed_sets_view(topology_dataset, width), width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "Packed and striped sets: where each lands" in text and "groups" in text
    assert "r12-sw3+r12-sw4+r13-sw1" in text  # the groups whole, however narrow
    if width >= 80:  # every cell whole, every column shown
        assert "packed: 3 sets, 1 group each" in text and "striped: 3 sets, 3 groups each" in text
        assert re.search(r"│     gpu\[003-004,007,011\] +│ r12-sw3\+r12-sw4\+r13-sw1 │    3 │", text)
        assert re.search(r"│     gpu\[011-014\] +│ r13-sw1 +│    3 │", text) and "left out" not in text
    else:
        assert "runs left out to fit 60 columns" in " ".join(text.split())


@pytest.mark.slow
def test_packed_and_striped_stand_side_by_side_with_their_variability(topology_dataset):
    text = _render(ordering_table_view(topology_dataset, None, True, ("packed", "striped")), 400)
    assert "packed against striped" in text and "striped %var" in text and "packed median" in text
    assert "striped %var over packed %var" in " ".join(text.split())
    # Both tables: sorted against shuffled is unchanged beside it.
    titles = [getattr(v, "title", "") for v in set_views(topology_dataset, 120)]
    assert titles[:3] == ["Node sets: every run of every set, sorted against shuffled",
                          "Node sets: every run of every set, packed against striped",
                          "Packed and striped sets: where each lands"]
    row = next(r for r in sets_json(topology_dataset)["ordering_table"]
               if r["benchmark"] == "sendrecv" and r["metric"] == "bandwidth.1048576")
    assert {"sorted", "shuffled", "packed", "striped", "striped_variability_ratio"} <= set(row)


def test_without_packed_or_striped_runs_no_groups_table_and_the_old_json(tmp_path):
    with open_store(tmp_path / "plain.duckdb") as store:
        target = Target(NODES, SetCluster())
        run_sets(store, target, _options().job(target, 4), "sorted", 2, size=4)
        dataset = store.load_dataset()
    assert placed_sets_view(dataset, 80) is None
    assert ordering_table_view(dataset, 80, pair=("packed", "striped")) is None
    document = sets_json(dataset)
    assert document["placed_sets"] == []
    assert all("packed" not in r and "striped_variability_ratio" not in r for r in document["ordering_table"])


# --- the command line ------------------------------------------------------------------------


def _common(tmp_path) -> list:
    return ["-k", "4", "-r", "3", "--sizes", ",".join(map(str, SIZES)), "--seconds-per-size", "0.05",
            "--db", tmp_path / "cli.duckdb"]


@pytest.mark.slow
def test_the_command_runs_packed_and_striped_with_a_topology_and_offers_it_as_json(scripted, tmp_path):
    topology = tmp_path / "leaves.txt"
    topology.write_text(TOPOLOGY_TEXT)
    scripted(slow_uplink_cluster(), NODES)
    result = invoke("sets", "--order", "packed,striped", "--topology", topology, *_common(tmp_path))
    assert result.exit_code == 0, result.output
    assert "sets packed: 9 set runs" in result.text and "sets striped: 9 set runs" in result.text
    assert "packed against striped" in result.text and "where each lands" in result.text
    as_json = invoke("sets", "--order", "packed,striped", "--topology", topology, "--json", *_common(tmp_path))
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    assert set(document["runs"]) == {"packed", "striped"}
    spans = {p["set"]: p["groups"] for p in document["sets"]["placed_sets"]
             if p["benchmark"] == "sendrecv" and p["ordering"] == "packed"}
    assert spans == {"gpu[003-006]": ["r12-sw3"], "gpu[007-010]": ["r12-sw4"], "gpu[011-014]": ["r13-sw1"]}


@pytest.mark.parametrize("order", ["packed", "sorted,striped"])
def test_packed_or_striped_without_a_topology_is_a_usage_error(scripted, tmp_path, order):
    cluster = scripted(SetCluster(), NODES)
    result = invoke("sets", "--order", order, *_common(tmp_path))
    assert result.exit_code == 2
    assert "needs --topology FILE" in result.text and cluster.rounds == []


def test_a_topology_of_other_nodes_is_refused_by_the_command(scripted, tmp_path):
    topology = tmp_path / "other.txt"
    topology.write_text("leaf1 cn-a[01-04]\n")
    cluster = scripted(SetCluster(), NODES)
    result = invoke("sets", "--order", "striped", "--topology", topology, *_common(tmp_path))
    assert result.exit_code != 0 and "places none of the 12 nodes" in result.text and cluster.rounds == []


def test_scale_refuses_packed(scripted, tmp_path):
    scripted(SetCluster(), NODES)
    result = invoke("scale", "--order", "packed", "--db", tmp_path / "s.duckdb")
    assert result.exit_code != 0 and "only for oddnode sets" in result.text


# --- the check's sets stage ----------------------------------------------------------------------


def test_the_check_accepts_packed_and_striped_orderings_and_scale_does_not():
    from oddnode.measure.plan import make_plan, parse_settings

    plan = make_plan(stages=("sets",), parameters=parse_settings(["sets.orderings=sorted,packed,striped"]))
    assert plan.options("sets").orderings == ("sorted", "packed", "striped")
    with pytest.raises(ValueError, match="only for oddnode sets"):
        make_plan(stages=("sets",), add=("scale",), parameters=parse_settings(["scale.orderings=striped"]))


@pytest.mark.slow
def test_the_check_runs_packed_on_the_recorded_topology_and_refuses_without_one(store):
    cluster = slow_uplink_cluster()
    target = Target(NODES, cluster)
    context = StepContext(store, target, repetitions=2, timeout=60.0)
    options = _options(orderings=("packed", "striped"), size=4)
    with pytest.raises(ValueError, match="ordering packed needs a topology"):
        SetsStep().run(context, options)
    assert cluster.rounds == []
    _record_topology(store)
    outcome = SetsStep().run(context, options)
    assert any(note.startswith("sets.packed: 2 repetitions, 6 set runs: 6 valid") for note in outcome.notes)
    assert {r.benchmark for r in store.load_dataset().set_runs} >= {"sets.sendrecv.packed", "sets.sendrecv.striped"}


# --- the findings ------------------------------------------------------------------------------


def _findings(store, weak=(), orderings=("packed", "striped")):
    from oddnode.judge.analysis import analyze

    _record_topology(store)
    cluster = slow_uplink_cluster()
    cluster.weak = set(weak)
    target = Target(NODES, cluster)
    job = _options().job(target, 4)
    for ordering in orderings:
        run_sets(store, target, job, ordering, 6, size=4, seed=3, groups=GROUPS)
    return [f for f in analyze(store.load_dataset(), correlations=False).findings
            if f.kind in ("weak-set-member", "set-contention")]


@pytest.mark.slow
def test_striped_sets_all_slow_behind_an_uplink_name_no_weak_member(store):
    # Every striped set crosses the slow uplink alike: no member stands out.
    assert _findings(store) == []


@pytest.mark.slow
def test_a_weak_node_is_named_with_packed_and_striped_runs_judged_beside_the_others(store):
    # Fixed orders alone keep a node with the same set-mates; with the
    # reshuffled runs beside them the weak node stands out.
    found = _findings(store, weak={"gpu010"}, orderings=("sorted", "shuffled", "packed", "striped"))
    assert {f.nodes for f in found if f.kind == "weak-set-member"} == {"gpu010"}
