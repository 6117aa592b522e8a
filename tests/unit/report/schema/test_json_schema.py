"""Every ``--json`` document validated against the schema generated from
the models in src/oddnode/report/documents: each command's real
output on scripted clusters and synthetic stores, the schema's refusals, and
a check that every command with ``--json`` has its document there."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import typer

from support.cli import FIXTURES, invoke, write
from oddnode.core.nodes import expand
from oddnode.report.schema import DOCUMENTS, DocumentInvalid, commands_of, load_schema, validate
from support.cli import REPOSITORY

pytest.importorskip("jsonschema")

GPUS = expand("gpu[003-014]")
CN = expand("cn-a[11-18]")
SIZE_OPTION = ["--sizes", "0,64,4096", "--seconds-per-size", 0.02, "--port", 6211]


def strict(text: str):
    """One JSON document, refusing NaN and Infinity (not JSON)."""
    def refuse(name):
        raise ValueError(f"{name} in the JSON")

    return json.loads(text, parse_constant=refuse)


def document_of(result, statuses=(0, 1)):
    assert result.exit_code in statuses, result.output
    return strict(result.stdout)


def stab_store(tmp_path, with_zero=False):
    """A store imported from STAB plot files: three benchmarks on gpu[003-038] and, ``with_zero``,
    retransmits on cn-a[11-20]."""
    from support.stab import CN as CN_STAB, GPU, LAMMPS, NOISE, RETRANSMITS, TRIAD, plot_file

    results = tmp_path / "results"
    plot_file(results / "plot.stream.triad", GPU, TRIAD)
    plot_file(results / "plot.lammps", GPU[1:], LAMMPS)
    plot_file(results / "plot.noise", GPU, NOISE)
    if with_zero:  # a series whose lowest value is 0: its %variability is infinite
        plot_file(results / "plot.iperf3.tcp:sender.retransmits", CN_STAB, RETRANSMITS)
    write(results / "units.csv", "benchmark,unit,direction\nstream.triad,MB/s,higher\nlammps,1/s,higher\n")
    db = tmp_path / "r.duckdb"
    assert invoke("import", "stab", results, "--db", db).exit_code == 0
    return db


# -- one producer per document: the command's own output --------------------------------------


def stats_documents(tmp_path, **_):
    stab = stab_store(tmp_path)
    yield "stats", document_of(invoke("stats", "--json", "--db", stab))
    yield "dist", document_of(invoke("dist", "stream.triad", "--bins", "6", "--json", "--db", stab))
    yield "findn", document_of(invoke("findn", "stream.triad", "--json", "--db", stab))
    yield "correlate", document_of(invoke("correlate", "stream.triad", "lammps", "--json", "--db", stab))
    yield "findc", document_of(invoke("findc", "--limit", "2", "--json", "--db", stab))
    assert invoke("analyze", "--db", stab, "--fail-on", "never").exit_code == 0  # an analysis to show
    yield "history", document_of(invoke("history", "gpu003", "--json", "--db", stab))


def common_documents(tmp_path, **_):
    failed = write(tmp_path / "failed", "xhpl.x86_64.cn-a17.1\nxhpl.x86_64.cn-a17.3\nmpi.x86_64.gpu003-gpu009.2\n")
    yield "common", document_of(invoke("common", failed, "--json"))


def analysis_documents(tmp_path, monkeypatch, **_):
    from oddnode.app.cli import check as check_cli
    from oddnode.app.synth import generate
    from oddnode.reach.base import Target
    from support.clusters.check import ScriptedCluster

    generate(tmp_path / "cluster", nodes=40)
    yield "analysis", document_of(invoke("analyze", tmp_path / "cluster", "--json", "--db", tmp_path / "a.duckdb"))
    nodes = ["cn-a17", *(f"gpu{i:03d}" for i in range(3, 10))]
    monkeypatch.setattr(check_cli, "selected_target",
                        lambda *args: Target(nodes, ScriptedCluster(speed={"cn-a17": 0.5})))
    yield "analysis", document_of(invoke("check", "-w", "cn-a17,gpu[003-009]", "--stages", "memory", "-r", "3",
                                         "--set", "memory.elements=2000000", "--set", "memory.ntimes=3",
                                         "--html", tmp_path / "r.html", "--json", "--db", tmp_path / "c.duckdb"))


def fit_documents(tmp_path, **_):
    from oddnode.store.tool_import import import_tool_outputs
    from oddnode.store import open_store

    db = tmp_path / "fit.duckdb"
    with open_store(db) as store:
        import_tool_outputs(store, "imb", [FIXTURES / "imb" / "IMB-MPI1_PingPong.out"], label="cn-a17-cn-b02")
        import_tool_outputs(store, "osu", [FIXTURES / "osu" / "osu_latency.out"], label="cn-a17-cn-b02")
    yield "fit", document_of(invoke("fit", "imb.pingpong:bandwidth", "--db", db, "--from", 1024, "--to", 65536,
                                    "--json", "--each"))
    yield "fit", document_of(invoke("fit", "osu.latency", "--db", db, "--from", 1024, "--json"))


def compare_documents(tmp_path, **_):
    from oddnode.store import open_store
    from support.runs import NODES, write_run

    db = tmp_path / "compare.duckdb"
    with open_store(db) as store:
        write_run(store, NODES, seed=1, source="/data/before")
        write_run(store, NODES, seed=2, factor=lambda node: 0.85 if node == "cn-a03" else 1.0)
    yield "compare", document_of(invoke("compare", "1", "2", "--json", "--db", db))
    yield "compare-list", document_of(invoke("compare", "--list", "--json", "--db", db))


def interconnect_documents(tmp_path, scripted, **_):
    from support.clusters.bisection import BisectionCluster
    from support.clusters.matrix import MatrixCluster
    from support.clusters.pairs import PairCluster
    from support.clusters.switchbench import PORT, SwitchCluster

    scripted(PairCluster(weak="gpu005"), GPUS)
    yield "pairs", document_of(invoke("pairs", "--patterns", "sort,cut", "-r", 2, *SIZE_OPTION, "--json",
                                      "--db", tmp_path / "p.duckdb"))
    scripted(BisectionCluster(down={"cn-a16"}), CN[:7])
    yield "bisection", document_of(invoke("bisection", "-r", 1, "--message-size", 65536, "--seconds", 0.3, "--json",
                                          "--db", tmp_path / "b.duckdb"))
    scripted(BisectionCluster(link=1000.0, capacity=2000.0), CN)
    yield "bisection", document_of(invoke("bisection", "-r", 1, "--message-size", 65536, "--seconds", 0.3, "--json",
                                          "--db", tmp_path / "b2.duckdb"))
    scripted(MatrixCluster(bad=[("cn-a12", "cn-a15")]), CN)
    topology = write(tmp_path / "topology", "leaf1 cn-a[11-14]\nleaf2 cn-a[15-18]\n")
    yield "matrix", document_of(invoke("matrix", *SIZE_OPTION, "--topology", topology, "--json",
                                       "--db", tmp_path / "m.duckdb"))
    scripted(SwitchCluster(), GPUS[:8])
    yield "switchbench-chain", document_of(invoke("switchbench", "chain", "-r", 1, "--message-size", 65536,
                                                  "--seconds", 0.3, "--port", PORT, "--json",
                                                  "--db", tmp_path / "c.duckdb"))
    scripted(SwitchCluster(weak="gpu007"), GPUS)
    yield "switchbench-stream", document_of(invoke("switchbench", "stream", "--patterns", "sort,cut", "-r", 1,
                                                   "--message-size", 65536, "--seconds", 0.3, "--port", PORT,
                                                   "--json", "--db", tmp_path / "s.duckdb"))
    scripted(SwitchCluster(down={"gpu004"}), GPUS[:4])
    yield "switchbench-alltoall", document_of(invoke("switchbench", "alltoall", "-r", 1, "--message-size", 100000,
                                                     "--port", PORT, "--json", "--db", tmp_path / "a.duckdb"))


def set_documents(tmp_path, scripted, **_):
    from support.clusters.sets import SIZES, SetCluster, TWELVE

    scripted(SetCluster(weak={"node03"}), TWELVE)
    common = ["-r", "2", "--sizes", ",".join(map(str, SIZES)), "--seconds-per-size", "0.05"]
    yield "sets", document_of(invoke("sets", "-k", "4", *common, "--json", "--db", tmp_path / "sets.duckdb"))
    yield "scale", document_of(invoke("scale", "--counts", "2,4", *common, "--json", "--db", tmp_path / "x.duckdb"))


def sync_documents(tmp_path, scripted, **_):
    from support.clusters.sync import ITERATIONS, NODES, ScriptedSyncCluster as SyncCluster

    scripted(SyncCluster(slow={"cn-a03"}, without_mpi={"cn-a01"}), NODES)
    yield "sync", document_of(invoke("sync", "--db", tmp_path / "s.duckdb", "--iterations", ITERATIONS,
                                     "--sizes", "4,8", "--json", "--extrapolate", 100))


def sweep_documents(tmp_path, scripted, **_):
    from support.clusters.sweep import FIXED, NODES, TunableCluster

    scripted(TunableCluster(), NODES)
    db = tmp_path / "sweep.duckdb"
    yield "sweep", document_of(invoke("sweep", "memory", "--env", "MEMORY_POLICY=local,interleave", "--set", FIXED[0],
                                      "--set", FIXED[1], "-r", "3", "--seed", "1", "--json", "--db", db))
    yield "sweep", document_of(invoke("sweep", "--stored", "latest", "--json", "--db", db))
    yield "sweep-list", document_of(invoke("sweep", "--list", "--json", "--db", db))


def node_documents(tmp_path, monkeypatch, **_):
    from oddnode.app.cli import nodes as nodes_cli
    from oddnode.reach.base import Target
    from support.clusters.probe import NODES, ProbeCluster

    cluster = ProbeCluster(facts={"cn-a19": {"bios_version": "2.5.0"}}, down=["cn-b01"], broken=["cn-a21"],
                           notes={"cn-a17": ["dmidecode: not permitted"]})
    monkeypatch.setattr(nodes_cli, "selected_target", lambda *args: Target(list(NODES), cluster))
    db = tmp_path / "inv.duckdb"
    yield "inventory", document_of(invoke("inventory", "--db", db, "--json"))
    expect = write(tmp_path / "expect.yaml", "bios_version: 2.7.3\nkernel: {match: '6.1.*'}\n"
                   "memory_total_kb: {min: 500000000}\ngpu_count: 4\n")
    yield "diagnose", document_of(invoke("diagnose", "--expect", expect, "--db", db, "--json"))


def config_documents(tmp_path, monkeypatch, **_):
    site = write(tmp_path / "config.yaml", "store: /shared/oddnode/results.duckdb\nuser: ops\nconnect_timeout: 4\n")
    monkeypatch.setenv("ODDNODE_CONFIG", str(site))
    yield "config", document_of(invoke("config", "show", "--json"))


def health_documents(tmp_path, monkeypatch, **_):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm here: its state is null
    expect = write(tmp_path / "site.yaml", "cpu_threads: {min: 100000}\n")
    yield "health", document_of(invoke("health", "--node", "cn-a17", "--expect", expect, "--json"))


def process_documents(tmp_path, monkeypatch, **_):
    from oddnode.app.cli import processes as processes_cli
    from oddnode.reach.base import Target
    from support.clusters.accounting import AccountingCluster as ScriptedCluster
    from support.clusters.accounting import NODES, background

    answers = {node: background() for node in NODES}
    answers["cn-b02"] = background({"basename": (3000, 12), "sed": (3000, 12), "sh": (3004, 12)})
    monkeypatch.setattr(processes_cli, "selected_target", lambda *args: Target(list(answers), ScriptedCluster(answers)))
    yield "processes", document_of(invoke("processes", "--json", "--db", tmp_path / "p.duckdb"))


def profile_documents(tmp_path, **_):
    db = tmp_path / "profiles.duckdb"
    mpip = FIXTURES / "mpip" / "halo_alltoall_np4.mpiP"
    yield "profile", document_of(invoke("import", "mpip", mpip, "--db", db, "--json"))
    yield "profile", document_of(invoke("import", "itc", FIXTURES / "itc" / "alltoall_np2.dump", "--ticks-per-second",
                                        1e6, "--hosts", "cn-a17,gpu003", "--db", db, "--json"))
    yield "profile", document_of(invoke("profile", "--db", db, "--show", "latest", "--json"))
    yield "profile-list", document_of(invoke("profile", "--db", db, "--list", "--json"))


def builder_documents(tmp_path, **_):
    """Documents of the commands that measure on nodes with their own
    probes, from the functions those commands print."""
    from oddnode.measure.node.numa import Cell, NumaLayout, NumaRun
    from oddnode.measure.runner import OUTCOMES, RunSummary
    from oddnode.readings.numa_series import TRIAD
    from oddnode.report.affinity import affinity_json
    from oddnode.report.numa import numa_json
    from oddnode.report.placement import model_document
    from support.numa_data import load, store_cluster
    from support.affinity import bound_ranks, report, reports
    from support.placement import a_model_run

    data = reports({node: report(bound_ranks([0, 0, 5])) for node in expand("cn-a[01-04]")})
    yield "affinity", strict(json.dumps(affinity_json(data, {"cn-b01": "unreachable"}, [])))
    dataset = load(store_cluster(tmp_path / "numa.duckdb", expand("cn-a[01-06]")))
    layout = NumaLayout(numa=True, cpus={0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}, memory_kb={0: 1 << 20, 1: 1 << 20})
    summary = RunSummary(1, 3, {"cn-a01": dict.fromkeys(OUTCOMES, 0) | {"ok": 2, "timeout": 1}})
    run = NumaRun(run_id=1, layouts={"cn-a01": layout}, unanswered={"cn-b01": "unreachable"},
                  cells=[(Cell(TRIAD, 0, 1, ("cn-a01",)), summary)], repetitions=3,
                  mpi_skipped={"cn-a01": "no mpicc on the node's PATH"})
    yield "numa", strict(json.dumps({"run": run.to_json(), "numa": numa_json(dataset), "findings": []},
                                    default=_numpy))
    selection, model = a_model_run()
    yield "model", strict(json.dumps({**model_document(selection, model, ["a note"], 1), "findings": []},
                                     default=_numpy))
    yield "health", strict(json.dumps(health_document(), default=_numpy))


def health_document() -> dict:
    """A health document whose checks saw something: the facts checked, the
    memory measured (fast, slow, wrong) and the address (loopback, elsewhere)."""
    from oddnode.app.health import checks
    from oddnode.app.health.baseline import MemoryBaseline
    from oddnode.findings.expectations import parse_expectations

    baseline = MemoryBaseline(1000.0, 10.0, 8, "MB/s", 800.0, {"elements": 1000})

    def measured(value):
        return lambda _: {"values": {"memory.triad": value}, "valid": True, "elements": 1000}

    outcomes = [checks.check_facts("cn-a17", {"cpu_cores": "32"}, [("site.yaml", parse_expectations("cpu_cores: 64"))]),
                checks.check_memory(baseline, measured(950.0)), checks.check_memory(baseline, measured(420.0)),
                checks.check_memory(baseline, lambda _: {"values": {}, "valid": False, "problems": ["a[3]"]}),
                checks.check_memory(None, measured(1.0)), checks.check_address("cn-a17", "127.0.0.1"),
                checks.check_address("cn-a17", "192.0.2.17")]
    return {"node": "cn-a17", "healthy": False, "seconds": 1.0, "slurm_state": None, "slurm_reason": None,
            "checks": [outcome.to_json() for outcome in outcomes],
            "problems": [p.to_json() for outcome in outcomes for p in outcome.problems], "actions": []}


def _numpy(value):
    from oddnode.app.cli.common import json_default

    return json_default(value)


PRODUCERS = [config_documents, health_documents, stats_documents, common_documents, analysis_documents, fit_documents, compare_documents,
             interconnect_documents, set_documents, sync_documents, sweep_documents, node_documents,
             process_documents, profile_documents, builder_documents]


@pytest.mark.slow
@pytest.mark.parametrize("producer", PRODUCERS, ids=lambda p: p.__name__)
def test_every_document_a_command_prints_is_valid(producer, tmp_path, monkeypatch, scripted):
    produced = list(producer(tmp_path=tmp_path, monkeypatch=monkeypatch, scripted=scripted))
    assert produced
    dump = os.environ.get("ODDNODE_SCHEMA_DUMP")
    for index, (name, document) in enumerate(produced):
        if dump:
            Path(dump, f"{name}.{producer.__name__}.{index}.json").write_text(json.dumps(document, indent=1))
        validate(document, name)


@pytest.mark.slow
def test_stats_of_a_series_with_a_zero_is_json(tmp_path):
    validate(document_of(invoke("stats", "--json", "--db", stab_store(tmp_path, with_zero=True))), "stats")



@pytest.mark.slow
def test_dist_with_automatic_bins_is_valid(tmp_path):
    document = document_of(invoke("dist", "stream.triad", "--bins", "auto", "--json", "--db", stab_store(tmp_path)))
    assert document["histogram"]["bins"] == "auto"
    validate(document, "dist")


@pytest.mark.slow
def test_common_on_a_store_is_valid(tmp_path):
    write(tmp_path / "results" / "failed", "xhpl.x86_64.cn-a17.1\nmpi.x86_64.gpu003-gpu009.2\n")
    db = stab_store(tmp_path)
    document = document_of(invoke("common", "--json", "--db", db))
    assert document["source"] == str(db) and document["failed_runs"] == 2
    validate(document, "common")

# -- the schema refuses what breaks it ---------------------------------------------------------


def a_finding(**changes) -> dict:
    finding = {"kind": "slow-node", "severity": "warning", "subject": "stream.triad", "nodes": "gpu[003-004]",
               "message": "gpu[003-004] are 12% below the median", "evidence": {"z": [-5.1, -4.8]},
               "remedy": "Check the DIMMs of gpu[003-004]."}
    return {key: value for key, value in {**finding, **changes}.items() if value is not ...}


def an_analysis(findings=None, problems=None) -> dict:
    findings = [a_finding()] if findings is None else findings
    problem = {"nodes": "gpu[003-004]", "severity": "warning", "summary": "gpu[003-004]: slow memory",
               "cause": findings, "symptoms": []}
    return {"schema_version": 9, "oddnode": "0.1.0", "ready": False,
            "sensitivity": {"alpha": 0.001, "min_effect": 0.05},
            "statistics": [{"benchmark": "stream", "metric": "triad", "unit": "MB/s", "direction": "higher",
                            "label_kind": "node", "n": 0, "low": None, "high": None, "variability_pct": None,
                            "mean": None, "median": None, "std": None}],
            "findings": findings, "problems": [problem] if problems is None else problems, "correlations": []}


def test_a_good_finding_and_analysis_pass():
    validate(a_finding(), "finding")
    validate(an_analysis(), "analysis")


@pytest.mark.parametrize("finding, where", [
    (a_finding(kind=...), "'kind' is a required property"),
    (a_finding(severity="critical"), "'critical' is not one of ['info', 'warning', 'error']"),
    (a_finding(evidence=[1, 2]), "is not of type 'object'"),
    (a_finding(nodes=["gpu003"]), "is not of type 'string'"),
    (a_finding(hint="an unknown key"), "Additional properties are not allowed ('hint' was unexpected)"),
])
def test_a_broken_finding_is_refused_where_it_breaks(finding, where):
    with pytest.raises(DocumentInvalid, match="findings/0") as refused:
        validate(an_analysis(findings=[finding]), "analysis")
    assert where in str(refused.value)


def test_a_problem_whose_cause_is_not_a_list_is_refused():
    problem = {"nodes": "cn-a17", "severity": "error", "summary": "cn-a17: down", "cause": a_finding(), "symptoms": []}
    with pytest.raises(DocumentInvalid, match=r"at problems/0/cause: .* is not of type 'array'"):
        validate(an_analysis(problems=[problem]), "analysis")


@pytest.mark.parametrize("change, where", [
    (lambda d: d.pop("ready"), "at (top): 'ready' is a required property"),
    (lambda d: d["statistics"][0].update(direction="up"), "at statistics/0/direction: 'up' is not one of"),
    (lambda d: d["statistics"][0].update(mean="NaN"), "at statistics/0/mean: 'NaN' is not of type 'number', 'null'"),
])
def test_a_broken_analysis_is_refused(change, where):
    document = an_analysis()
    change(document)
    with pytest.raises(DocumentInvalid) as refused:
        validate(document, "analysis")
    assert where in str(refused.value)


def test_a_set_run_outcome_outside_the_enum_is_refused():
    run = {"run_id": 3, "family": "sets", "ordering": "sorted", "notes": [],
           "runs": [{"repetition": 1, "set": "gpu[003-006]", "outcome": "timeout", "why": None}]}
    document = {"runs": {"sorted": run}, "findings": [],
                "sets": {key: [] for key in ("ordering_table", "failed_members", "member_correlations",
                                             "scaling_curves", "scaling", "placed_sets")}}
    validate(copy.deepcopy(document) | {"runs": {"sorted": run | {"runs": []}}}, "sets")
    with pytest.raises(DocumentInvalid, match="runs/sorted/runs/0/outcome: 'timeout' is not one of"):
        validate(document, "sets")



@pytest.mark.parametrize("bins", [0, "sturges", 6.5, None])
def test_histogram_bins_other_than_a_count_auto_or_whole_are_refused(bins):
    document = {"series": {"name": "stream.triad", "benchmark": "stream", "metric": "triad", "unit": "MB/s",
                           "direction": "higher", "label_kind": "node", "n": 3},
                "histogram": {"bins": bins, "rows": []}, "tests": []}
    validate(document | {"histogram": {"bins": "whole", "rows": []}}, "dist")
    with pytest.raises(DocumentInvalid, match="at histogram/bins"):
        validate(document, "dist")


def test_a_document_of_the_wrong_type_fails_the_check_every_test_makes():
    from support.schema import documents_printed_by_caller, schema_errors
    from oddnode.app.cli import analysis, common

    assert analysis.print_json.__name__ == common.print_json.__name__ == "print_checked_json"
    assert documents_printed_by_caller() is None  # outside a command: any document
    common_document = {"version": 1, "source": 7, "failed_runs": 0, "nodes": [], "runs": []}
    assert "common: at source: 7 is not valid under any of the given schemas" in schema_errors(common_document,
                                                                                              ("common",))
    assert schema_errors(common_document | {"source": []}, ("common",)) == []
    assert schema_errors([], DOCUMENTS) == []  # an empty stats, compare --list, ...

# -- the schema itself --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_schema_generated_from_the_models_is_a_valid_draft_2020_12_schema():
    from importlib import resources

    from jsonschema import Draft202012Validator

    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:oddnode:schema:json-documents" and schema["x-schema-version"] == 1
    assert not [path.name for path in resources.files("oddnode.report.schema").iterdir()
                if path.name.endswith(".json")]  # generated, never a second copy to drift
    assert {ref["$ref"] for ref in schema["anyOf"]} == {f"#/$defs/{name}" for name in DOCUMENTS}


def test_the_definitions_keep_the_names_scripts_refer_to():
    documents = ["analysis", "stats", "dist", "findn", "correlate", "findc", "common", "history", "fit", "compare",
                 "compare-list", "pairs", "bisection", "matrix", "switchbench-chain", "switchbench-stream",
                 "switchbench-alltoall", "sets", "scale", "sync", "sweep", "sweep-list", "inventory", "diagnose",
                 "processes", "affinity", "numa", "model", "profile", "profile-list", "config", "health"]
    parts = ["severity", "direction", "label_kind", "number_or_null", "finding", "findings", "problem",
             "description", "statistics_row", "outcome_counts", "run_reference", "network_run", "stored_run",
             "set_tables", "outcome", "series_reference", "set_run", "interconnect_document", "health_problem",
             "slurm_action"]
    assert list(load_schema()["$defs"]) == documents + parts
    assert list(DOCUMENTS) == documents


def _refs(node) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for value in node.values() for r in _refs(value)]
    return [r for value in node for r in _refs(value)] if isinstance(node, list) else []


def test_shared_parts_are_referred_to_not_repeated():
    definitions = load_schema()["$defs"]
    severity_enums = [d for d in _walk(definitions) if d.get("enum") == ["info", "warning", "error"]]
    assert len(severity_enums) == 1  # the severity definition, nowhere else
    finding_keys = {"kind", "severity", "subject", "nodes", "message", "evidence", "remedy"}
    assert [d for d in _walk(definitions) if set(d.get("required", ())) == finding_keys] == [definitions["finding"]]
    refs = _refs(definitions)
    for part in ("finding", "problem", "statistics_row", "run_reference", "severity", "direction"):
        assert f"#/$defs/{part}" in refs, part
    assert all(ref.removeprefix("#/$defs/") in definitions for ref in refs)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _json_commands() -> dict[str, object]:
    """Every command of the CLI that takes --json, by its full name: is it hidden?"""
    from oddnode.main import app

    found = {}

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, child in command.commands.items():
                walk(child, [*path, name])
        elif any("--json" in getattr(param, "opts", ()) for param in command.params):
            found[" ".join(path)] = command.hidden

    walk(typer.main.get_command(app), [])
    return found


def test_every_command_with_json_has_a_document_and_every_document_a_command():
    commands = _json_commands()
    from oddnode.app.cli.analysis import STAB_ALIASES

    # STAB's names (anal, dplot, ...), hidden, run stats, dist, ...: their documents.
    hidden = {name for name, is_hidden in commands.items() if is_hidden}
    assert hidden <= set(STAB_ALIASES)
    canonical = set(commands) - hidden
    documented = {command for name in DOCUMENTS for command in commands_of(name)}
    assert canonical - documented == set(), "commands with --json but no document in the schema"
    assert documented - canonical == set(), "documents naming commands without --json"
    assert len(commands) > 25


def test_every_document_is_produced_by_a_test_here():
    import inspect
    import re

    produced = {name for producer in PRODUCERS
                for name in re.findall(r'yield "([\w-]+)"', inspect.getsource(producer))}
    assert produced == set(DOCUMENTS)


# -- oddnode schema -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_prints_the_schema_one_document_and_the_list():
    whole = invoke("schema")
    assert whole.exit_code == 0 and strict(whole.stdout) == load_schema()
    pairs = strict(invoke("schema", "pairs").stdout)
    assert pairs["$ref"] == "#/$defs/pairs" and "finding" in pairs["$defs"]
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(pairs)
    listed = invoke("schema", "--list")
    assert listed.exit_code == 0
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:] if not line.startswith("shared parts:")]
    assert names == list(DOCUMENTS)
    assert "profile, import mpip, import itc" in listed.stdout and "shared parts: severity" in listed.stdout


def test_the_document_list_fits_80_columns():
    import io

    from rich.console import Console

    from oddnode.app.cli.schema import documents_table

    out = Console(width=80, file=io.StringIO(), record=True)
    out.print(documents_table())
    text = out.export_text()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert all(name in text for name in DOCUMENTS)


def test_the_command_refuses_an_unknown_document():
    result = invoke("schema", "cn-a17")
    assert result.exit_code == 2 and result.stdout == ""
    assert "no JSON document named 'cn-a17'" in result.text and "inventory" in result.text
    assert invoke("schema", "--list", "pairs").exit_code == 2


def test_the_formats_doc_names_every_document_and_the_schema_version():
    text = (REPOSITORY / "docs" / "formats.md").read_text(encoding="utf-8")
    section = text.split("## JSON schema\n", 1)[1].split("\n## ", 1)[0]
    assert f"`x-schema-version` ({load_schema()['x-schema-version']})" in section
    assert [name for name in DOCUMENTS if f"`{name}`" not in section] == []


def open_parts(node, where: str = "") -> list[str]:
    """Where the schema takes any value: an empty schema, or an object with
    no keys of its own and no rule for its values."""
    found = []
    if isinstance(node, dict):
        bare_object = node.get("type") == "object" and not {"properties", "additionalProperties", "allOf",
                                                             "$ref"} & set(node)
        if node == {} or bare_object:
            found.append(where)
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, part in value.items():
                    found += open_parts(part, f"{where}/{name}")
            elif isinstance(value, (dict, list)):
                found += open_parts(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += open_parts(value, f"{where}[{index}]")
    return found


def test_every_part_of_every_document_is_typed_but_a_findings_evidence():
    # A finding's evidence is each rule's own (docs/findings.md); everything
    # else a script reads has its keys and types in the schema.
    assert open_parts(load_schema()) == ["/finding/evidence"]
    assert open_parts({"$defs": {"x": {"type": "object"}, "y": {"properties": {"z": {}}}}}) == ["/x", "/y/z"]


def test_the_model_documents_kernels_are_the_kernels_calls_stand_for():
    from typing import get_args

    from oddnode.readings.placement import CALL_KERNELS
    from oddnode.report.documents.nodes import SetKernel

    assert set(get_args(SetKernel)) == set(CALL_KERNELS.values())


def test_a_run_of_an_interconnect_document_is_typed_key_by_key():
    """Each command's runs have their own definition, closed: a key no
    runner writes is refused, as is a run without the keys it must have."""
    from oddnode.report.schema import errors

    run = {"run_id": 7, "repetitions": 2, "pattern": "sort", "plans": [
        {"repetition": 1, "pairs": ["cn-a11-cn-a12"], "idle": [], "seed": None, "source": None}]}
    document = {"command": "pairs", "findings": [], "runs": {"sort": run}, "patterns": []}
    assert errors(document, "pairs") == []
    assert errors({**document, "runs": {"sort": {**run, "unknown": 1}}}, "pairs") == [
        "pairs: at runs/sort: Unevaluated properties are not allowed ('unknown' was unexpected)"]
    assert any("'plans' is a required property" in line for line in
               errors({**document, "runs": {"sort": {k: v for k, v in run.items() if k != "plans"}}}, "pairs"))
