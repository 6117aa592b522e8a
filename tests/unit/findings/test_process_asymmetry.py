"""The asymmetry-ratio table and the process-asymmetry finding on
synthetic accounting: a daemon spawning short commands on one node (or on
a group of nodes) is named with its fingerprint; the background of a
healthy cluster (cron, monitoring agents, logins, sporadic commands) never
warns, over many seeds and cluster sizes, whatever the nodes and groups
are called."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from rich.console import Console

from oddnode.onnode.pacct import BURST_SECONDS
from oddnode.readings.accounting import (ASYMMETRY_RATIO, asymmetry_table, groups_from_fact, least_p_adjusted,
                                        most_periods, poisson_excess, rate_ratio)
from oddnode.judge.analysis import analyze
from oddnode.findings import Sensitivity, find_all
from oddnode.findings.process_asymmetry import UNDECIDED_KIND, KIND, asymmetry_findings, process_asymmetry_findings
from oddnode.core.model import CommandCount, Dataset, NodeProcesses, Severity
from oddnode.report.processes import asymmetry_view, nothing_stands_out, shown_rows, undecided_line
from oddnode.core.nodes import expand
from support.series import memory

ALPHA = Sensitivity().alpha
ADMIN = np.array(["ls", "cat", "grep", "sed", "ps", "df", "vi"])
SCRIPT = np.array(["awk", "grep", "sed", "cut", "ip"])
DAEMON = ("basename", "sed", "sh")


class Events:
    """Processes of one node: command -> list of (start second, CPU seconds)."""

    def __init__(self):
        self.starts = defaultdict(list)

    def add(self, command, second, cpu=0.001):
        self.starts[command].append((int(second), cpu))

    def add_many(self, commands, seconds):
        for command, second in zip(commands.tolist(), seconds.tolist()):
            self.starts[command].append((int(second), 0.001))

    def counts(self, node, seconds, method="acct"):
        return NodeProcesses(node=node, seconds=float(seconds), method=method, commands={
            command: CommandCount(executions=len(runs), cpu_seconds=sum(c for _, c in runs),
                                  elapsed_seconds=0.002 * len(runs),
                                  bursts=len({s // BURST_SECONDS for s, _ in runs}))
            for command, runs in self.starts.items()})


def healthy_node(rng, seconds, cron_at):
    """A node's background: cron every minute (at the same second on every
    node: one clock), a monitoring agent every 10 s at its own phase, a few
    logins (each a burst of commands over a few seconds), now and then a
    health-check script, sporadic commands."""
    node = Events()
    for at in cron_at:
        for command, times in (("cron", 1), ("sh", 3), ("run-parts", 1), ("sed", 4), ("date", 1), ("logger", 2)):
            for _ in range(times):
                node.add(command, at)
    phase = rng.uniform(0, 10)
    for at in np.arange(phase, seconds, 10.0):
        for command in ("cat", "cat", "awk", "collectd-probe"):
            node.add(command, at)
    for _ in range(rng.poisson(0.4 * seconds / 60)):
        at = rng.uniform(0, seconds)
        for command in ("sshd", "sshd", "bash", "id", "tty", "locale", "groups"):
            node.add(command, at + rng.uniform(0, 1))
        count = rng.integers(0, 30)  # an admin's commands, in a burst of a few seconds
        node.add_many(rng.choice(ADMIN, count), np.minimum(seconds - 1, at + rng.exponential(3, count)))
    for _ in range(rng.poisson(0.3 * seconds / 60)):  # a health-check script: dozens of commands over 10 s
        at = rng.uniform(0, seconds)
        count = rng.integers(20, 60)
        node.add_many(rng.choice(SCRIPT, count), np.minimum(seconds - 1, at + rng.uniform(0, 10, count)))
    for command, rate in (("sleep", 0.05), ("find", 0.01), ("python3", 0.02)):
        for at in rng.uniform(0, seconds, rng.poisson(rate * seconds)):
            node.add(command, at)
    return node


def cluster(names, seconds=60, seed=0, daemon=(), rate=50.0, method="acct"):
    """Accounting of healthy nodes, with a daemon spawning DAEMON commands
    ``rate`` times a second each on the ``daemon`` nodes."""
    rng = np.random.default_rng(seed)
    cron_at = [s for s in range(int(rng.integers(0, 60)), seconds, 60)]
    out = {}
    for name in names:
        node = healthy_node(rng, seconds, cron_at)
        if name in daemon:
            for at in np.arange(0, seconds, 1.0 / rate):
                for command in DAEMON:
                    node.add(command, at, cpu=0.0005)
        out[name] = node.counts(name, seconds, method)
    return out


def findings(processes, groups=None, grouped_by=None):
    return asymmetry_findings(asymmetry_table(processes, groups, grouped_by), ALPHA)


def warnings(processes, groups=None, grouped_by=None):
    """The findings at warning severity or above (an interval too short to
    decide is an info finding, not an alarm)."""
    return [f for f in findings(processes, groups, grouped_by) if f.severity.rank >= Severity.WARNING.rank]


FOREIGN = {
    "cn": [f"cn-a{i}" for i in range(10, 18)],
    "gpu": [f"gpu{i:03d}" for i in range(3, 11)],
    "rack": [f"r{r:02d}n{n:02d}" for r in (1, 2) for n in range(1, 5)],
}


@pytest.mark.parametrize("scheme", sorted(FOREIGN))
def test_a_daemon_on_one_node_is_named_with_its_fingerprint(scheme):
    names = FOREIGN[scheme]
    bad = names[5]
    (finding,) = warnings(cluster(names, seed=3, daemon=[bad]))
    assert (finding.kind, finding.nodes, finding.subject) == (KIND, bad, "processes")
    fingerprint = {entry["command"]: entry for entry in finding.evidence["fingerprint"]}
    assert set(DAEMON) <= set(fingerprint)
    for command in DAEMON:
        assert fingerprint[command]["ratio"] is None or fingerprint[command]["ratio"] >= ASYMMETRY_RATIO
        assert fingerprint[command]["p_value"] <= ALPHA
    assert finding.message.startswith(f"{bad} runs commands far more often than the other nodes")
    assert "basename" in finding.remedy and bad in finding.remedy


def test_the_ratio_is_seaborgs_against_a_rest_that_runs_the_command_too():
    names = FOREIGN["cn"]
    processes = cluster(names, seed=5, daemon=["cn-a12"], rate=2.0)
    table = asymmetry_table(processes)
    (sed,) = [r for r in table.rows if r.unit == "cn-a12" and r.command == "sed"]
    rest = [processes[n].commands["sed"].executions for n in names if n != "cn-a12"]
    assert sed.rest_per_node == pytest.approx(np.mean(rest))
    assert sed.ratio == pytest.approx(sed.executions / np.mean(rest))
    (basename,) = [r for r in table.rows if r.unit == "cn-a12" and r.command == "basename"]
    assert math.isinf(basename.ratio) and table.rows[0].ratio == math.inf


@pytest.mark.slow
def test_healthy_clusters_never_warn_over_many_seeds():
    """The background alone, 300 clusters of 4 to 64 nodes over 10 s to 10 minutes: no warning at all."""
    rng = np.random.default_rng(2024)
    for seed in range(300):
        size = int(rng.choice([4, 8, 16, 32, 64]))
        seconds = int(rng.choice([10, 60, 600]))
        names = [f"cn-{i:04d}" for i in range(size)]
        assert warnings(cluster(names, seconds=seconds, seed=seed)) == [], (seed, size, seconds)


def test_a_login_burst_on_one_node_is_not_a_fingerprint():
    names = FOREIGN["gpu"]
    processes = cluster(names, seed=1)
    burst = Events()
    for _ in range(200):
        burst.add("sed", 30)  # a script's worth of sed in one second
    processes["gpu007"] = burst.counts("gpu007", 60)
    rows = [r for r in asymmetry_table(processes).rows if r.unit == "gpu007" and r.command == "sed"]
    assert rows[0].ratio > 10 and rows[0].p_adjusted > ALPHA
    assert warnings(processes) == []


def test_a_short_interval_on_few_nodes_cannot_tell_and_says_nothing():
    # 3 seconds on 4 nodes: even a daemon every second cannot beat chance after Bonferroni.
    names = ["n1", "n2", "n3", "n4"]
    assert warnings(cluster(names, seconds=3, seed=2, daemon=["n2"], rate=1.0)) == []


def test_an_interval_too_short_to_decide_says_so_and_what_would_decide():
    """The daemon on one of 12 nodes spawns 50 times a second; 15 s allow
    a least corrected p above alpha, so no verdict but an info finding that
    says so and names the interval that decides, which then warns."""
    names = [f"xn{i:02d}" for i in range(1, 13)]
    short = findings(cluster(names, seconds=15, seed=3, daemon=["xn05"]))
    assert [(f.kind, f.severity) for f in short] == [(UNDECIDED_KIND, Severity.INFO)]
    undecided = short[0]
    assert "xn05" in expand(undecided.nodes) and "xn05: basename (only here)" in undecided.message
    assert undecided.evidence["least_p"] > ALPHA
    needed = undecided.evidence["seconds_to_decide"]
    assert 15 < needed <= 60 and f"--seconds {needed}" in undecided.remedy
    table = asymmetry_table(cluster(names, seconds=needed, seed=3, daemon=["xn05"]))
    assert least_p_adjusted(table) <= ALPHA
    assert [(f.kind, f.nodes) for f in asymmetry_findings(table, ALPHA)] == [(KIND, "xn05")]


def test_short_healthy_intervals_never_warn_and_say_when_they_cannot_decide():
    """A health-check script's burst on one node looks, over 15 s, like a
    spawner's start: no warning, an info finding that the interval cannot
    tell them apart where one stands out, nothing where none does."""
    names = [f"xn{i:02d}" for i in range(1, 13)]
    said = 0
    for seed in range(20):
        processes = cluster(names, seconds=15, seed=seed)
        table = asymmetry_table(processes)
        assert least_p_adjusted(table) > ALPHA
        assert "cannot decide" in undecided_line(table, ALPHA) and "--seconds 30 or more" in undecided_line(table, ALPHA)
        found = findings(processes)
        assert all((f.kind, f.severity) == (UNDECIDED_KIND, Severity.INFO) for f in found), found
        said += len(found)
    assert 0 < said < 20  # a burst stands out on some of them only


def test_the_least_p_is_what_a_command_in_every_period_on_one_node_alone_would_give():
    names = ["a1", "a2", "a3", "a4"]
    table = asymmetry_table(cluster(names, seconds=60, seed=4))
    periods = most_periods(60)  # 13: an interval need not start on a period's edge
    assert periods == 13
    assert least_p_adjusted(table) == pytest.approx(min(1.0, 0.25 ** periods * table.tests))
    every_period = poisson_excess(periods, 60, 0, 180) * table.tests
    assert least_p_adjusted(table) == pytest.approx(min(1.0, every_period))


def test_old_against_new_nodes_by_an_inventory_fact():
    """Seaborg's case: the slow nodes are a group, each alone no worse than
    its group-mates, so only the groups tell."""
    names = [f"sp{i:03d}" for i in range(1, 13)]
    old = names[:6]
    processes = cluster(names, seed=8, daemon=old, rate=5.0)
    facts = {"bios_date": {n: ("09/02/2004" if n in old else "01/15/2025") for n in names}}
    mapping, missing = groups_from_fact(facts, "bios_date", names + ["sp999"])
    assert missing == ["sp999"]
    assert warnings(processes) == []  # per node: half the rest runs the daemon too
    (finding,) = warnings(processes, mapping, "bios_date")
    assert finding.nodes == "sp[001-006]" and finding.evidence["unit"] == "09/02/2004"
    assert finding.message.startswith("group 09/02/2004 (sp[001-006], grouped by bios_date) runs commands far more "
                                      "often than the other groups' nodes")


def test_groups_of_a_topology_and_nodes_in_none():
    names = FOREIGN["rack"]
    processes = cluster(names, seed=4, daemon=["r02n01", "r02n02"], rate=20.0)
    groups = {n: ("rack-b" if n.startswith("r02") else "rack-a") for n in names if n != "r01n04"}
    table = asymmetry_table(processes, groups, "racks.txt")
    assert table.units == {"rack-a": ("r01n01", "r01n02", "r01n03"), "rack-b": ("r02n01", "r02n02", "r02n03",
                                                                                 "r02n04")}
    assert table.left_out == {"r01n04": "in no group"}
    assert {f.evidence["unit"] for f in asymmetry_findings(table, ALPHA)} == {"rack-b"}


def test_an_unknown_fact_names_what_the_store_has():
    with pytest.raises(KeyError, match="no node has the inventory fact 'bios_datum'.*bios_date"):
        groups_from_fact({"bios_date": {"a": "1"}}, "bios_datum", ["a"])


def test_the_rule_reads_the_stored_accounting_and_one_node_is_no_comparison():
    names = FOREIGN["cn"]
    dataset = Dataset(processes=cluster(names, seed=9, daemon=["cn-a16"]))
    assert [f.nodes for f in find_all(dataset, rules=[KIND])] == ["cn-a16"]
    assert process_asymmetry_findings(Dataset(processes=cluster(["cn-a16"], daemon=["cn-a16"])),
                                      Sensitivity()) == []
    assert find_all(Dataset(), rules=[KIND]) == []


def test_a_node_without_an_interval_is_left_out():
    processes = cluster(["a1", "a2", "a3"], seed=1)
    processes["a3"] = NodeProcesses("a3", 0.0, "pacct", {})
    table = asymmetry_table(processes)
    assert table.left_out == {"a3": "no accounting interval"} and set(table.units) == {"a1", "a2"}


def test_the_test_and_the_ratio():
    assert rate_ratio(10, 60, 0, 420) == math.inf and math.isnan(rate_ratio(0, 60, 0, 60))
    assert rate_ratio(100, 60, 70, 420) == pytest.approx(100 / 10)
    assert poisson_excess(0, 60, 5, 60) == 1.0
    assert poisson_excess(10, 1, 0, 7) == pytest.approx((1 / 8) ** 10)  # all ten on one node of eight


# ---------------------------------------------------------------- the table


def render(renderable, width):
    console = Console(width=width, record=True)
    console.print(renderable)
    return console.export_text()


def test_the_table_shows_what_stands_out_highest_ratio_first_and_fits():
    names = [f"cn-a{i}" for i in range(10, 18)]
    table = asymmetry_table(cluster(names, seed=3, daemon=["cn-a15"], rate=2.0))
    text = render(asymmetry_view(table, 200), 200)
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in text.splitlines() if "cn-a" in line]
    assert {row[1] for row in rows[:3]} == set(DAEMON) and {row[0] for row in rows[:3]} == {"cn-a15"}
    assert rows[0][4] == "only here"  # the rest never ran them: infinite ratio first
    for width in (60, 80, 100):
        narrow = render(asymmetry_view(table, width), width)
        assert max(len(line) for line in narrow.splitlines()) <= width
    assert "CPU s, p left out to fit 60 columns" in " ".join(render(asymmetry_view(table, 60), 60).split())


def test_a_healthy_table_shows_nothing_chance_cannot_explain():
    for seed in range(20):
        table = asymmetry_table(cluster(FOREIGN["gpu"], seed=seed))
        assert all(row.p_adjusted > ALPHA for row in shown_rows(table))  # a script's burst may stand out, by chance
    alike = {n: Events() for n in FOREIGN["gpu"]}
    for events in alike.values():
        for second in range(0, 60, 10):
            events.add("collectd-probe", second)
    table = asymmetry_table({n: e.counts(n, 60) for n, e in alike.items()})
    assert asymmetry_view(table, 100).row_count == 0
    assert nothing_stands_out(table) == "No command runs markedly more often on one node than on the rest."
    assert asymmetry_view(asymmetry_table(cluster(["one"])), 100) is None


def test_groups_table_has_a_per_node_column():
    names = FOREIGN["rack"]
    groups = {n: n[:3] for n in names}
    table = asymmetry_table(cluster(names, seed=4, daemon=["r02n01", "r02n02"], rate=20.0), groups, "racks")
    text = render(asymmetry_view(table, None), 250)
    assert "per node" in text and "grouped by racks" in text and "r02" in text


# ---------------------------------------------------------------- the findings it explains


def test_a_slow_result_on_the_node_shows_the_fingerprint_as_its_cause():
    names = [f"node{i:03d}" for i in range(1, 17)]
    dataset = Dataset(series=[memory(names, {"node005": 0.4})],
                      processes=cluster(names, seed=12, daemon=["node005"]))
    analysis = analyze(dataset, correlations=False)
    (outlier,) = [f for f in analysis.findings if f.kind == "outlier"]
    assert set(DAEMON) <= set(outlier.evidence["frequent_processes"]["node005"])
    assert outlier.remedy.startswith("node005 runs ") and "far more often than the other nodes (process-asymmetry)" \
        in outlier.remedy and "If the result stays poor: " in outlier.remedy
    (problem,) = [p for p in analysis.problems if p.symptoms]
    assert [f.kind for f in problem.cause] == [KIND] and [f.kind for f in problem.symptoms] == ["outlier"]
    assert problem.summary.startswith("frequent short processes (") and problem.summary.endswith(
        " slow memory.triad: 1 finding it explains")


def test_a_noisy_node_finding_on_the_node_is_a_symptom_too():
    from oddnode.findings.problems import group_problems
    from oddnode.findings.related import explain_by_processes
    from oddnode.core.model import Finding, Severity

    names = FOREIGN["gpu"]
    (asymmetry,) = warnings(cluster(names, seed=3, daemon=["gpu007"]))
    noisy = Finding("noisy-node", Severity.WARNING, "noise", "gpu007", "gpu007 loses 4% of its time", {},
                    "Find the source of the detours.")
    other = Finding("noisy-node", Severity.WARNING, "noise", "gpu004", "gpu004 loses 3% of its time", {}, "r")
    related = explain_by_processes([asymmetry, noisy, other])
    assert "frequent_processes" in related[1].evidence and "frequent_processes" not in related[2].evidence
    problems = group_problems(related)
    (grouped,) = [p for p in problems if p.symptoms]
    assert grouped.nodes == "gpu007" and grouped.cause == (asymmetry,) and grouped.symptoms == (related[1],)
    assert len(problems) == 2


def test_names_that_look_like_markup_are_printed_as_they_are():
    events = {n: Events() for n in ("n1", "n2", "n3", "n4")}
    for second in range(60):
        for _ in range(3):
            events["n2"].add("[bold]x", second)
    groups = {"n1": "[old]", "n2": "[old]", "n3": "new/2025", "n4": "new/2025"}
    processes = {n: e.counts(n, 60) for n, e in events.items()}
    assert "[bold]x" in render(asymmetry_view(asymmetry_table(processes), 120), 120)
    assert "[old]" in render(asymmetry_view(asymmetry_table(processes, groups, "bios_version"), 120), 120)


def test_the_fingerprint_names_what_started_it_and_the_table_shows_it():
    names = FOREIGN["rack"]
    bad = names[2]
    processes = cluster(names, seed=3, daemon=[bad])
    # On the bad node the daemon's commands were started by a shell that
    # monitoring-agent ran; the parents of the others are not known.
    report = processes[bad]
    commands = {name: (count if name not in DAEMON else CommandCount(
        count.executions, count.cpu_seconds, count.elapsed_seconds, count.bursts, ("sh", "?")))
        for name, count in report.commands.items()}
    commands["sh"] = CommandCount(1, 0.01, 0.0, 1, ("vendor-agent",))
    processes[bad] = NodeProcesses(bad, report.seconds, report.method, commands)
    (finding,) = warnings(processes)
    assert finding.message.endswith("; started by sh")
    assert all(entry["parents"] == ["sh", "?"] for entry in finding.evidence["fingerprint"]
               if entry["command"] in DAEMON)
    table = asymmetry_view(asymmetry_table(processes), width=None)
    assert "started by" in render(table, 200) and "sh, ?" in render(table, 200)


def test_with_a_topology_the_analysis_names_a_group_whose_nodes_alone_do_not_stand_out():
    """An agent on every node of one rack, as seaborg's old nodes: per node
    half of the rest runs it too; the store's topology groups tell."""
    names = [f"sp{i:03d}" for i in range(1, 13)]
    topology = {n: ("rack1" if i < 6 else "rack2") for i, n in enumerate(names)}
    processes = cluster(names, seed=8, daemon=names[:6], rate=5.0)
    found = find_all(Dataset(processes=processes, topology=topology), rules=[KIND])
    assert [(f.kind, f.nodes) for f in found] == [(KIND, "sp[001-006]")]
    assert found[0].evidence["grouped_by"] == "topology" and found[0].evidence["unit"] == "rack1"
    assert find_all(Dataset(processes=processes), rules=[KIND]) == []  # without the topology, nobody


def test_a_daemon_on_one_node_is_named_once_not_again_as_its_group():
    # Chassis of 3: one node's daemon lifts its chassis above the others too.
    names = [f"sp{i:03d}" for i in range(1, 13)]
    topology = {n: f"chassis{i // 3}" for i, n in enumerate(names)}
    processes = cluster(names, seed=3, daemon=["sp004"])
    grouped = findings(processes, topology, "topology")
    assert [f.nodes for f in grouped] == ["sp[004-006]"]  # the group table alone names its chassis
    found = find_all(Dataset(processes=processes, topology=topology), rules=[KIND])
    assert [(f.kind, f.nodes) for f in found] == [(KIND, "sp004")]


def test_healthy_clusters_with_a_topology_never_warn():
    names = [f"sp{i:03d}" for i in range(1, 13)]
    topology = {n: f"rack{i % 3}" for i, n in enumerate(names)}
    for seed in range(20):
        found = find_all(Dataset(processes=cluster(names, seed=seed), topology=topology), rules=[KIND])
        assert [f for f in found if f.severity.rank >= Severity.WARNING.rank] == [], seed


@pytest.mark.slow
def test_analyze_carries_the_asymmetry_tables_in_its_json_and_its_report(tmp_path):
    """A store holding accounting and a topology alone: analyze --json has
    the node and the group tables (valid against the schema), the HTML
    report a Processes section with the named group marked; no other kind
    of result is called missing."""
    import json

    from oddnode.report.schema import validate
    from oddnode.store import open_store
    from support.cli import invoke

    names = [f"sp{i:03d}" for i in range(1, 13)]
    with open_store(tmp_path / "acct.duckdb") as store:
        with store.transaction():
            run_id = store.new_run("oddnode processes", nodes=names)
            store.add_process_counts(run_id, cluster(names, seed=8, daemon=names[:6], rate=5.0).values())
            store.set_topology(store.new_run("oddnode topology"),
                               {n: ("rack1" if i < 6 else "rack2") for i, n in enumerate(names)})
    result = invoke("analyze", "--db", tmp_path / "acct.duckdb", "--json", "--html", tmp_path / "r.html")
    document = json.loads(result.stdout)
    validate(document, "analysis")
    node_table, group_table = document["processes"]["tables"]
    assert node_table["grouped_by"] is None and group_table["grouped_by"] == "topology"
    assert set(group_table["units"]) == {"rack1", "rack2"}
    assert [(f["kind"], f["nodes"]) for f in document["findings"]] == [(KIND, "sp[001-006]")], result.output
    html = (tmp_path / "r.html").read_text()
    section = html.split('<section id="processes">')[1].split("</section>")[0]
    assert "grouped by topology, 2 groups" in section and '<tr class="sev-warning"><td class="">rack1</td>' in section
    assert "Bonferroni-corrected over the table&#39;s comparisons" in section  # text, escaped
