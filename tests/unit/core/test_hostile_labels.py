"""Node names in data are data: a label that a ClusterShell group source
would hand to a shell runs nothing, through any reader.

Each test points ClusterShell at a ``groups.conf`` whose sources (the
default one and ``local``, as ClusterShell's pip installation ships them)
run a shell command on every group they resolve: one that writes a marker
file, and the group name pasted into a ``sed`` line as the installed
``local`` source does, so that the label ``@x';touch${IFS}MARKER;'``
writes a second marker.  A hostile label is planted in every file and
store oddnode reads node names from; the command must end with one error
line (exit 2) and leave no marker.
"""

from __future__ import annotations

import json
import os
import re
import time
import tracemalloc
from pathlib import Path

import duckdb
import pytest

from support.cli import FIXTURES, oddnode, write
from oddnode.core.nodes import MAX_NODES, NodeNameError, expand, expand_command_line, fold, node_count

LABELS = [
    "@x';touch${IFS}MARKER;',node05",
    "@local:x';touch${IFS}MARKER;',node05",
]
GROUPS_CONF = """\
[Main]
default: hostile

[hostile]
map: touch {resolved}; sed -n 's/^$GROUP:\\(.*\\)/\\1/p' {groups}
list: sed -n 's/^\\([0-9A-Za-z_-]*\\):.*/\\1/p' {groups}

[local]
map: touch {resolved}; sed -n 's/^$GROUP:\\(.*\\)/\\1/p' {groups}
list: sed -n 's/^\\([0-9A-Za-z_-]*\\):.*/\\1/p' {groups}
"""
PLOT = "".join(f"{100 + index} node0{index}\n" for index in range(1, 9))


@pytest.fixture
def site(tmp_path) -> Path:
    """A ClusterShell configuration whose group sources run commands, with
    one honest group, ``rack1``."""
    config = tmp_path / "clustershell"
    write(config / "groups", "rack1: node[01-04]\n")
    write(config / "groups.conf", GROUPS_CONF.format(resolved=config / "RESOLVED", groups=config / "groups"))
    return config


def run(*args, site: Path, cwd: Path):
    """oddnode as a user runs it, ClusterShell configured by ``site``."""
    env = {"CLUSTERSHELL_CFGDIR": str(site), "HOME": str(cwd)}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return oddnode(*args, cwd=cwd, check=False, env=env)


def markers(root: Path) -> list[str]:
    return sorted(str(path) for name in ("RESOLVED", "MARKER") for path in root.rglob(name))


def assert_refused(result, root: Path) -> None:
    """Exit 2, one error line and no traceback, and nothing run."""
    assert not markers(root), f"a command ran: {markers(root)}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# ---------------------------------------------------------------- files


def _stab_dir(tmp_path: Path, name: str, text: str) -> Path:
    directory = tmp_path / "stab"
    write(directory / "plot.triad", PLOT)
    write(directory / name, text)
    return directory


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("file, line", [
    ("plot.copy", "100 {label}\n"),
    ("failed", "xhpl.ppc64.{label}.3\n"),
    ("nodes", "node01\n{label}\n"),
])
@pytest.mark.slow
def test_stab_import(site, tmp_path, label, file, line):
    directory = _stab_dir(tmp_path, file, line.format(label=label))
    assert_refused(run("import", "stab", directory, "--db", tmp_path / "s.duckdb", site=site, cwd=tmp_path),
                   tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("label", LABELS)
def test_common_failed_file(site, tmp_path, label):
    failed = write(tmp_path / "failed", f"xhpl.ppc64.{label}.3\nxhpl.ppc64.node01.2\n")
    assert_refused(run("common", failed, "--db", tmp_path / "s.duckdb", site=site, cwd=tmp_path), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("label", LABELS)
def test_hostfile(site, tmp_path, label):
    hosts = write(tmp_path / "hosts", f"node01\n{label}\n")
    result = run("check", "--hostfile", hosts, "--transport", "ssh", "--db", tmp_path / "s.duckdb",
                 site=site, cwd=tmp_path)
    assert_refused(result, tmp_path)
    assert "hosts:2" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("options", [["--hostfile", "hosts"], ["-w", "bad[[x"], ["-w", "n[1-2]", "-x", "n[1-2]"]])
def test_node_options_are_parsed_before_the_plan_is_shown(site, tmp_path, options):
    write(tmp_path / "hosts", f"node01\n{LABELS[0]}\n")
    assert_refused(run("check", *options, "--show-plan", site=site, cwd=tmp_path), tmp_path)


@pytest.mark.slow
def test_label_from_directory_names(site, tmp_path):
    output = tmp_path / LABELS[0] / "stream.out"
    output.parent.mkdir()
    output.write_bytes((FIXTURES / "stream" / "stream_c.out").read_bytes())
    result = run("import", "stream", output, "--label-from", r"(?P<label>[^/]+)/stream\.out$",
                 "--db", tmp_path / "s.duckdb", site=site, cwd=tmp_path)
    assert_refused(result, tmp_path)


@pytest.mark.parametrize("label", LABELS)
@pytest.mark.parametrize("name, text", [
    ("topology", "leaf1 node[01-04]\nleaf2 {label}\n"),
    ("topology.conf", "SwitchName=leaf1 Nodes=node[01-04]\nSwitchName=leaf2 Nodes={label}\n"),
    ("topology.yaml", "- topology: t\n  tree:\n    switches:\n      - switch: leaf1\n        nodes: \"{label}\"\n"),
])
@pytest.mark.slow
def test_topology_files(site, tmp_path, label, name, text):
    topology = write(tmp_path / name, text.format(label=label))
    plot = write(tmp_path / "plot.triad", PLOT)
    assert_refused(run("analyze", plot, "--topology", topology, site=site, cwd=tmp_path), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("label", LABELS)
def test_expectations_sections(site, tmp_path, label):
    expect = write(tmp_path / "site.yaml", f"nodes:\n  \"{label}\":\n    smt: off\n")
    assert_refused(run("diagnose", "--expect", expect, "--db", tmp_path / "s.duckdb", site=site, cwd=tmp_path),
                   tmp_path)
    assert_refused(run("health", "--expect", expect, "--node", "node05", "--benchmarks", "never",
                       site=site, cwd=tmp_path), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("label", LABELS)
def test_baseline_expect_block(site, tmp_path, label):
    baseline = write(tmp_path / "baseline.yaml", f"expect: |\n  nodes:\n    \"{label}\":\n      smt: off\n")
    assert_refused(run("health", "--baseline", baseline, "--node", "node05", "--benchmarks", "never",
                       site=site, cwd=tmp_path), tmp_path)


# ---------------------------------------------------------------- a store written by hand


@pytest.fixture
def hostile_store(site, tmp_path) -> Path:
    """A store of one imported plot file whose labels, findings and check
    target were then rewritten by hand with SQL, past oddnode's checks."""
    db = tmp_path / "s.duckdb"
    result = run("import", "stab", write(tmp_path / "plot.triad", PLOT), "--db", db, site=site, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    analyzed = run("analyze", "--db", db, site=site, cwd=tmp_path)
    assert analyzed.returncode in (0, 1), analyzed.stderr
    label = LABELS[0]
    with duckdb.connect(str(db)) as con:
        for table in ("results", "best"):
            con.execute(f"UPDATE {table} SET label = ?, label_kind = 'set' WHERE label = 'node05'", [label])
        con.execute("UPDATE findings SET nodes = ?", [label])
        con.execute("INSERT INTO checks VALUES (1, ?, '{}', 'done')", [json.dumps({"nodes": label})])
    return db


@pytest.mark.parametrize("command", [
    ["analyze"], ["common"], ["stats"], ["export", "prometheus", "metrics.prom"], ["baseline", "-o", "b.yaml"],
])
@pytest.mark.slow
def test_labels_read_back_from_a_store(site, tmp_path, hostile_store, command):
    result = run(*command, "--db", hostile_store, site=site, cwd=tmp_path)
    assert not markers(tmp_path), f"a command ran: {markers(tmp_path)}"
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)


@pytest.mark.slow
def test_truth_file(site, tmp_path):
    dataset = tmp_path / "synth"
    assert run("synth", "--nodes", "32", dataset, site=site, cwd=tmp_path).returncode == 0
    truth = json.loads((dataset / "truth.json").read_text())
    for finding in truth["findings"]:
        finding["nodes"] = LABELS[0]
    (dataset / "truth.json").write_text(json.dumps(truth))
    result = run("analyze", dataset, "--truth", dataset / "truth.json", site=site, cwd=tmp_path)
    assert not markers(tmp_path), f"a command ran: {markers(tmp_path)}"
    assert "Traceback" not in result.stderr, result.stderr


@pytest.fixture
def hostile_resolver(site):
    """ClusterShell's standard group resolver, in this process, set to the
    hostile configuration (as ClusterShell reads it at import time)."""
    from ClusterShell.NodeSet import set_std_group_resolver, set_std_group_resolver_config

    set_std_group_resolver_config(str(site / "groups.conf"))
    yield site
    set_std_group_resolver(None)


def test_the_node_set_functions_never_resolve_a_group(hostile_resolver, tmp_path):
    """What every reader of a store goes through, whatever the store
    checks first: labels expanded, their nodes listed, node names folded."""
    from oddnode.core.model import LabelKind
    from oddnode.core.nodes import label_members

    for label in LABELS:
        with pytest.raises(NodeNameError, match="names a group"):
            label_members(label, LabelKind.SET)
        fold([label, "node01"])
    assert not markers(tmp_path), f"a command ran: {markers(tmp_path)}"
    assert expand_command_line("@rack1") == ["node01", "node02", "node03", "node04"]
    assert markers(tmp_path)  # the trap was set


# ---------------------------------------------------------------- the command line keeps the site's groups


@pytest.mark.slow
def test_groups_on_the_command_line_resolve_through_the_site(site, tmp_path):
    """-w @group resolves as clush resolves it; and so the trap works: a
    group resolved through this configuration leaves a marker (otherwise
    every test above would pass for nothing)."""
    hosts = write(tmp_path / "hosts", "node09\n")
    result = run("check", "-w", "@rack1", "--hostfile", hosts, "-x", "node02", "--transport", "nosuch",
                 "--db", tmp_path / "s.duckdb", site=site, cwd=tmp_path)
    assert (site / "RESOLVED").exists()
    assert result.returncode == 2 and "nosuch" in result.stderr, result.stderr


def test_empty_selection_is_an_error(tmp_path):
    from oddnode.app.check import select_nodes

    with pytest.raises(NodeNameError, match="no node left"):
        select_nodes("n[1-2]", "n[1-2]")
    with pytest.raises(NodeNameError, match="no node left"):
        select_nodes(None, None, write(tmp_path / "hosts", "# nothing yet\n"))
    assert select_nodes() == []


# ---------------------------------------------------------------- sizes


def test_a_huge_node_set_is_refused_before_it_is_expanded():
    tracemalloc.start()
    started = time.perf_counter()
    for text in ("node[1-20000000]", "r[1-2000]n[1-2000]", "a[1-900000],b[1-900000]", "n[1-999999]!n[1-999999]"):
        with pytest.raises(NodeNameError, match="more than the 1,000,000"):
            expand(text)
        with pytest.raises(NodeNameError, match="more than the 1,000,000"):
            expand_command_line(text)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 0.5 and peak < 1 << 20


@pytest.mark.slow
def test_a_large_node_set_under_the_cap_is_expanded():
    names = expand("node[1-200000]")
    assert len(names) == 200000 and names[0] == "node1" and names[-1] == "node200000"
    assert fold(names) == "node[1-200000]"
    with pytest.raises(NodeNameError, match="more than the 10"):
        expand("node[1-11]", limit=10)


@pytest.mark.parametrize("text, count", [
    ("node01", 1), ("n[1-100/2]", 50), ("n[01-10,20]", 11), ("r[1-4]n[1-8]", 32), ("a,b[1-3],c", 5),
    ("n[1-9]!n5", 10), ("n[1-3]&n[2-5]^n9", 8), ("n[ 1 - 3 ]", 3), ("n[-8--4]", 5), ("@rack1,n1", 2),
])
def test_node_count_bounds_the_names_without_expanding(text, count):
    assert node_count(text) == count


@pytest.mark.parametrize("text", ["bad[[x", "n[1-3", "n1-3]", "n[1-[2]]", "n[a-b]", "n[1-3,]", "n[1/2]"])
def test_node_sets_that_cannot_be_counted_are_refused(text):
    with pytest.raises(NodeNameError, match="invalid node set"):
        node_count(text)


def test_data_never_names_a_group():
    for label in [*LABELS, "@rack1", "n1,@rack1"]:
        with pytest.raises(NodeNameError, match="names a group"):
            expand(label)
    assert MAX_NODES == 1_000_000


# ---------------------------------------------------------------- topology files


@pytest.mark.parametrize("name, text, where", [
    ("topology.conf", "SwitchName=l1 Nodes=n[1-2]\nSwitchName=s1 Switches=l1,s2\nSwitchName=s2 Switches=s1\n",
     "topology.conf:2: switches in a cycle: s1 under s2 under s1"),
    ("topology.conf", "SwitchName=s1 Switches=s1\n", "topology.conf:1: switches in a cycle: s1 under s1"),
    ("topology.yaml", "- topology: t\n  tree:\n    switches:\n      - switch: s1\n        children: s2\n"
                      "      - switch: s2\n        children: s1\n",
     "topology t, entry 2: switches in a cycle: s2 under s1 under s2"),
    ("topology.yaml", "- topology: t\n  topology: u\n  flat: true\n", "topology.yaml:2: key 'topology' given twice"),
    ("topology.yaml", "- " + "[" * 100 + "]" * 100 + "\n", "nested deeper than 64"),
])
def test_topology_files_refuse_cycles_and_loose_yaml(tmp_path, name, text, where):
    from oddnode.core.topology import TopologyError, load_topology

    with pytest.raises(TopologyError, match=re.escape(where)):
        load_topology(write(tmp_path / name, text))


def test_a_topology_fifo_is_refused_and_a_path_is_never_a_group(tmp_path):
    from oddnode.core.topology import TopologyError, read_topology

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(TopologyError, match="not a regular file"):
        read_topology(tmp_path / "fifo")
    assert read_topology(write(tmp_path / "@leaf*", "leaf1 n[1-2]\n")) == {"n1": "leaf1", "n2": "leaf1"}


def test_a_node_name_ends_where_its_text_ends():
    from oddnode.core.nodes import is_node_name, validate_node_name

    assert is_node_name("node01") and not is_node_name("node01\n")
    with pytest.raises(NodeNameError, match=r"^invalid node name .{200}\.\.\. \(20002 characters\): use letters"):
        validate_node_name("x;" * 10000)


@pytest.mark.slow
def test_a_node_name_is_at_most_as_long_as_a_dns_name(tmp_path):
    from oddnode.core.nodes import MAX_NAME, is_node_name

    assert is_node_name("n" * MAX_NAME) and not is_node_name("n" * (MAX_NAME + 1))
    directory = _stab_dir(tmp_path, "plot.copy", f"100 {'n' * 100_000}\n")
    result = oddnode("import", "stab", directory, "--db", tmp_path / "s.duckdb", cwd=tmp_path, check=False)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert len(result.stderr) < 1200 and not (tmp_path / "s.duckdb").exists()
