"""The command line, run as a user runs it: a subprocess."""

import json
import os
import re

import pytest

from support.cli import invoke, oddnode, write


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A synthetic cluster imported into a store, shared by the read-only tests."""
    root = tmp_path_factory.mktemp("cli")
    oddnode("synth", root / "cluster", cwd=root)  # 484 nodes, as the case study
    oddnode("import", "stab", root / "cluster", "--db", root / "s.duckdb", cwd=root)
    return root


@pytest.mark.slow
def test_version(tmp_path):
    assert re.match(r"oddnode \d+\.\d+", oddnode("--version", cwd=tmp_path).stdout)


@pytest.mark.slow
def test_stats_table(cluster):
    out = oddnode("stats", "c.ppc64", "xhpl.ppc64", "--db", "s.duckdb", cwd=cluster).stdout
    assert "c.ppc64" in out and "484 nodes" in out and "xhpl.ppc64" in out and "%var" in out


@pytest.mark.slow
def test_dist_findn_with_plot(cluster):
    out = oddnode("dist", "c.ppc64", "--bins", "12", "--plot", "c.svg", "--db", "s.duckdb", cwd=cluster).stdout
    assert "Hartigan's dip" in out and "chi-squared" in out
    assert (cluster / "c.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    out = oddnode("findn", "c.ppc64", "--db", "s.duckdb", cwd=cluster).stdout
    assert "normal probability" in out


@pytest.mark.slow
def test_correlate_findc_common(cluster):
    out = oddnode("correlate", "c.ppc64", "c_omp.ppc64", "--plot", "sc.png", "--db", "s.duckdb", cwd=cluster).stdout
    assert "Spearman" in out and "not" in out.lower()
    assert (cluster / "sc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = oddnode("findc", "--limit", "5", "--db", "s.duckdb", cwd=cluster).stdout
    assert "|r|" in out
    out = oddnode("common", "--db", "s.duckdb", cwd=cluster).stdout
    rows = [line for line in out.splitlines() if re.search(r"node\d+", line)]
    assert "node483" in rows[0]  # the node common to the failed runs leads the table


@pytest.mark.slow
def test_analyze_json_html_and_truth(cluster):
    result = oddnode("analyze", "cluster", "--json", "--html", "report.html", cwd=cluster, check=False)
    data = json.loads(result.stdout)
    assert data["ready"] is False and result.returncode == 1  # not ready
    assert {s["benchmark"] for s in data["statistics"]} >= {"c.ppc64", "xhpl.ppc64", "spp.cut.bw.4194304"}
    kinds = {f["kind"] for f in data["findings"]}
    assert {"outlier", "bimodal", "accuracy", "missing", "inconsistent-fact", "weak-pair-member", "weak-group"} <= kinds
    for finding in data["findings"]:
        assert set(finding) >= {"kind", "severity", "subject", "nodes", "evidence", "remedy"}
    html = (cluster / "report.html").read_text()
    assert "NOT READY" in html and "<svg" in html and 'id="findings"' in html
    assert not re.search(r"""(src|href)=["']https?:""", html)  # self-contained
    result = oddnode("analyze", "cluster", "--truth", "cluster/truth.json", "--fail-on", "never", cwd=cluster)
    assert "match the ground truth" in result.stdout


@pytest.mark.slow
def test_analyze_healthy_cluster_is_ready_and_fail_on(tmp_path):
    oddnode("synth", "healthy", "--nodes", 64, "--healthy", cwd=tmp_path)
    out = oddnode("analyze", "healthy", "--fail-on", "warning", cwd=tmp_path).stdout
    assert "READY" in out and "NOT READY" not in out


@pytest.mark.slow
def test_fail_on_warning_exits_1(cluster):
    result = oddnode("analyze", "--db", "s.duckdb", "--fail-on", "warning", cwd=cluster, check=False)
    assert result.returncode == 1 and "NOT READY" in result.stdout


@pytest.mark.slow
def test_export_round_trip(cluster):
    oddnode("export", "plot", "exported", "--db", "s.duckdb", cwd=cluster)
    oddnode("export", "parquet", "pq", "--db", "s.duckdb", cwd=cluster)
    assert (cluster / "exported" / "plot.c.ppc64").exists() and (cluster / "pq" / "results.parquet").exists()


@pytest.mark.slow
def test_bad_input_is_one_clear_line_and_nothing_written(tmp_path):
    write(tmp_path / "bad" / "plot.x", "1.0 n1\nnot-a-number n2\n")
    oddnode("import", "stab", write(tmp_path / "plot.ok", "1 n1\n2 n2\n"), cwd=tmp_path)
    result = oddnode("import", "stab", tmp_path / "bad", cwd=tmp_path, check=False)
    assert result.returncode == 2
    assert "plot.x:2: value 'not-a-number' is not a number" in result.stderr
    assert "Traceback" not in result.stderr
    out = oddnode("stats", cwd=tmp_path).stdout
    assert "ok" in out and " x " not in out


@pytest.mark.slow
def test_missing_store_and_unknown_benchmark(tmp_path):
    result = oddnode("stats", "--db", "none.duckdb", cwd=tmp_path, check=False)
    assert result.returncode == 2 and "no results store" in result.stderr
    oddnode("import", "stab", write(tmp_path / "plot.ok", "1 n1\n2 n2\n"), cwd=tmp_path)
    result = oddnode("dist", "nosuch", cwd=tmp_path, check=False)
    assert result.returncode == 2 and "no benchmark named 'nosuch'" in result.stderr


@pytest.mark.slow
def test_synth_refuses_a_foreign_directory(tmp_path):
    write(tmp_path / "mine" / "notes.txt", "keep me\n")
    result = oddnode("synth", "mine", cwd=tmp_path, check=False)
    assert result.returncode == 2 and "not empty" in result.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me\n"


def test_testbed_without_root_says_so_in_one_line(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from oddnode.main import app

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    for args in (["testbed", "up", "--state-dir", str(tmp_path)], ["check", "--testbed"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 3, args  # could not run: the machine, not the command line
        assert "the testbed needs root" in result.output and "Traceback" not in result.output


# -- interconnect commands on scripted clusters -------------------------------


@pytest.mark.slow
def test_matrix_command_names_the_bad_link_and_stores_the_topology(scripted, tmp_path):
    from support.clusters.matrix import MatrixCluster
    from support.clusters.pairs import NODES

    from oddnode.store import open_store

    scripted(MatrixCluster(bad=[("node02", "node05")]), NODES)
    topology = tmp_path / "topology"
    topology.write_text("leaf1 node[01-04]\nleaf2 node[05-08]\n")
    db = tmp_path / "m.duckdb"
    result = invoke("matrix", "--sizes", "0,1,64,4096,65536", "--port", 6211, "--topology", topology, "--db", db)
    assert result.exit_code == 1, result.output  # a finding
    assert "56 ordered pairs in 14 rounds" in result.text and "2 slow" in result.text
    assert "slow-link" in result.text and "node[02,05]" in result.text
    with open_store(db) as store:
        assert store.load_topology()["node05"] == "leaf2"
    html = tmp_path / "r.html"
    assert invoke("analyze", "--db", db, "--html", html).exit_code == 1  # the slow link
    text = html.read_text()
    assert 'id="matrix"' in text and text.count("<svg") >= 2 and 'id="bisection"' not in text


@pytest.mark.slow
def test_bisection_command_prints_demonstrated_and_full(scripted, tmp_path):
    from support.clusters.bisection import BisectionCluster as SwitchCluster
    from support.clusters.pairs import NODES

    scripted(SwitchCluster(link=1000.0, capacity=2000.0), NODES)
    result = invoke("bisection", "-r", 1, "--message-size", 65536, "--seconds", 0.3, "--db", tmp_path / "b.duckdb")
    assert result.exit_code == 0, result.output
    assert "demonstrated 2000 MB/s" in result.text and "full bisection 4000 MB/s" in result.text
    assert "50.0% of it" in result.text


@pytest.mark.slow
def test_pairs_command_prints_the_pattern_table(scripted, tmp_path):
    from support.clusters.pairs import OPTIONS, PairCluster, TWELVE

    scripted(PairCluster(weak="node03"), TWELVE)
    result = invoke("pairs", "--patterns", "sort,cut,fold", "-r", 1, "--sizes", ",".join(map(str, OPTIONS.sizes)),
                    "--port", 6211, "--db", tmp_path / "p.duckdb")
    assert result.exit_code == 1, result.output  # a finding
    assert "Pair patterns" in result.text and "weak-pair-member" in result.text


def test_a_bad_topology_file_is_one_line_naming_it_and_nothing_runs(scripted, tmp_path):
    from support.clusters.matrix import MatrixCluster
    from support.clusters.pairs import NODES

    cluster = scripted(MatrixCluster(), NODES)
    topology = tmp_path / "topology"
    topology.write_text("leaf1 node[01-04]\nleaf2 node[04-08]\n")
    for command in ("pairs", "matrix", "bisection"):
        result = invoke(command, "--topology", topology, "--db", tmp_path / "t.duckdb")
        assert result.exit_code == 2 and f"{topology}:2: node04 is already in group leaf1" in result.text
    assert cluster.rounds == [] and not (tmp_path / "t.duckdb").exists()
    from oddnode.store import open_store

    open_store(tmp_path / "t.duckdb").close()
    result = invoke("analyze", "--topology", topology, "--db", tmp_path / "t.duckdb")
    assert result.exit_code == 2 and f"{topology}:2:" in result.text


@pytest.mark.slow
def test_analyze_judges_a_store_it_may_not_write_and_says_the_findings_were_not_recorded(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from oddnode import store as store_module
    from oddnode.main import app

    write(tmp_path / "plot.triad", "".join(f"{1000.0 + i} node{i:02d}\n" for i in range(1, 13)) + "10.0 node13\n")
    db = tmp_path / "site.duckdb"
    oddnode("import", "stab", tmp_path / "plot.triad", "--db", db, cwd=tmp_path)
    opened = store_module.open_store

    def read_only_store(path, *, read_only=False, **options):
        if not read_only:  # as for a file of another user's, mode 0644
            raise store_module.StoreError(f"cannot open results store {path}: IO Error: Permission denied")
        return opened(path, read_only=True, **options)

    monkeypatch.setattr(store_module, "open_store", read_only_store)
    result = CliRunner().invoke(app, ["analyze", "--db", str(db)])
    assert result.exit_code == 1, result.output  # judged all the same
    assert "NOT READY" in result.output and "node13" in result.output
    assert "findings not recorded in the store" in result.output and "Permission denied" in result.output
    with opened(db, read_only=True) as store:
        assert [run[4] for run in store.runs()] == [str(tmp_path / "plot.triad")]  # nothing written
    monkeypatch.setattr(store_module, "open_store", opened)
    assert CliRunner().invoke(app, ["analyze", "--db", str(db)]).exit_code == 1
    with opened(db, read_only=True) as store:
        assert [run[4] for run in store.runs()][-1] == store_module.FINDINGS_SOURCE


def test_help_shows_the_check_first_and_the_other_commands_in_panels(tmp_path):
    out = oddnode("--help", cwd=tmp_path).stdout
    panels = [line.strip("╭─ ").split(" ─")[0] for line in out.splitlines() if line.startswith("╭─")]
    assert panels == ["Options", "Commands", "Results and statistics", "Interconnect", "Node sets", "Nodes",
                      "MPI applications", "Slurm", "Virtual cluster"]
    first = out.split("╭─ Commands")[1].split("╰")[0]
    assert "check" in first and "analyze" in first and "pairs" not in first
    assert "--install-completion" in out


# -- exit statuses ---------------------------------------------------------------


def test_a_store_another_process_holds_is_could_not_run_and_a_missing_profile_is_usage(monkeypatch, tmp_path):
    from oddnode import store as store_module

    db = tmp_path / "s.duckdb"
    store_module.open_store(db).close()
    assert invoke("profile", "--db", db, "--show", 7).exit_code == 2  # the command line names what is not there

    def locked(path, **options):
        raise store_module.StoreUnavailable(f"cannot open results store {path}: another process has it open")

    monkeypatch.setattr(store_module, "open_store", locked)
    result = invoke("analyze", "--db", db)
    assert result.exit_code == 3 and "another process has it open" in result.text


def test_an_unexpected_error_exits_3_with_its_traceback(monkeypatch, capsys, tmp_path):
    import sys

    from oddnode import main as cli
    from oddnode.app.cli import analysis

    def defect(*args, **kwargs):
        raise RuntimeError("a defect in the analysis")

    monkeypatch.setattr(analysis, "judge", defect)
    monkeypatch.setattr(sys, "argv", ["oddnode", "analyze", str(tmp_path)])
    with pytest.raises(SystemExit) as stopped:
        cli.main()
    assert stopped.value.code == 3  # not 1, which says the cluster has findings
    err = capsys.readouterr().err
    assert "RuntimeError: a defect in the analysis" in err and "unexpected error" in err
