"""Problems: a cause with the findings it explains, shown as one problem in
the terminal, the JSON and the HTML report; findings that nothing explains
stay problems of their own."""

from __future__ import annotations

import io
import json

import numpy as np

from rich.console import Console

import pytest

from oddnode.judge.analysis import analyze
from oddnode.findings.problems import group_problems, symptom_summary
from oddnode.core.model import Dataset, Severity
from oddnode.report.html import render_report
from oddnode.report.terminal import print_analysis
from support.series import make_series, node_names
from support.series import memory, processes


def hog_cluster() -> Dataset:
    """node005 runs a stress test the others do not; its memory bandwidth
    falls in two benchmarks; node011 has an old BIOS; nothing else."""
    nodes = node_names(16)
    facts = processes(nodes, {"stress-ng": ["node005"], "timeout": ["node005"]})
    facts["bios_date"] = {node: "01/15/2025" for node in nodes} | {"node011": "09/02/2004"}
    return Dataset(series=[memory(nodes, {"node005": 0.4}),
                           make_series("memory.copy", nodes, memory(nodes, {"node005": 0.5}, seed=5).values)],
                   facts=facts)


def test_a_competing_process_and_what_it_slows_are_one_problem():
    analysis = analyze(hog_cluster(), correlations=False)
    problems = analysis.problems
    assert [(p.nodes, len(p.cause), len(p.symptoms)) for p in problems] == [("node005", 2, 2), ("node011", 1, 0)]
    hog = problems[0]
    assert {f.subject for f in hog.cause} == {"process.stress-ng", "process.timeout"}
    assert {(f.kind, f.subject) for f in hog.symptoms} == {("outlier", "memory.triad"), ("outlier", "memory.copy")}
    assert hog.summary == "a competing process (stress-ng, timeout) slows memory (2 benchmarks): 2 findings it explains"
    assert hog.severity is Severity.WARNING
    # Every warning is in exactly one problem.
    serious = [f for f in analysis.findings if f.severity.rank >= Severity.WARNING.rank]
    assert sorted(id(f) for p in problems for f in p.findings) == sorted(id(f) for f in serious)


def test_without_a_competing_process_every_finding_is_its_own_problem():
    data = hog_cluster()
    data.facts = {key: values for key, values in data.facts.items() if not key.startswith("process.")}
    problems = analyze(data, correlations=False).problems
    assert all(not p.symptoms and len(p.cause) == 1 for p in problems)
    assert {p.nodes for p in problems} == {"node005", "node011"}


def test_symptoms_are_said_by_family_and_in_words():
    analysis = analyze(hog_cluster(), correlations=False)
    outliers = tuple(f for f in analysis.findings if f.kind == "outlier")
    assert symptom_summary(outliers) == "memory (2 benchmarks)"
    assert group_problems([]) == []


def test_the_problem_is_in_the_json_with_its_findings_inside():
    document = json.loads(json.dumps(analyze(hog_cluster(), correlations=False).to_json()))
    (hog,) = [p for p in document["problems"] if p["symptoms"]]
    assert hog["nodes"] == "node005" and hog["severity"] == "warning"
    assert [f["subject"] for f in hog["cause"]] == ["process.stress-ng", "process.timeout"]
    assert {f["kind"] for f in hog["symptoms"]} == {"outlier"}
    assert len(document["findings"]) >= 4  # the flat list stays as it was


def test_the_terminal_shows_the_problem_with_its_cause_and_symptoms_and_the_causes_remedy_once():
    out = io.StringIO()
    print_analysis(Console(file=out, width=200, color_system=None), analyze(hog_cluster(), correlations=False))
    text = out.getvalue()
    assert "Findings (5 of warning severity or above; 2 problems)" in text
    assert "warning problem a competing process (stress-ng, timeout) slows memory (2 benchmarks)" in text
    assert text.count("    cause    warning inconsistent-fact [process.") == 2
    assert text.count("    symptom  warning outlier [memory.") == 2
    assert text.count("→ A command that runs on only some") == 2  # the two causes' remedies, not the symptoms'
    assert "If the result stays poor" not in text


@pytest.mark.slow
def test_the_html_report_leads_with_one_reason_per_problem():
    html = render_report(analyze(hog_cluster(), correlations=False))
    reasons = html.split('<ul id="reasons">')[1].split("</ul>")[0]
    assert reasons.count("<li>") == 2
    assert "node005: a competing process (stress-ng, timeout) slows memory (2 benchmarks)" in reasons
    assert 'id="problems"' in html and html.count('class="problem"') == 1
    section = html.split('<h2 id="problems"')[1].split('<h2 id="findings"')[0]
    assert section.count("<td>cause</td>") == 2 and section.count("<td>symptom</td>") == 2


# -- a fact that sets nodes apart, and the findings on those same nodes ------------------------

SITE = [f"cn-{i:04d}" for i in range(1, 485)]
OLD_DIMMS = SITE[:84]


def dimm_cluster(slow: list[str], seed: int = 11) -> Dataset:
    """484 nodes of a site; OLD_DIMMS report another DIMM layout; the nodes
    ``slow`` run STREAM 15% slower (a second mode)."""
    rng = np.random.default_rng(seed)
    triad = rng.normal(180.0, 1.0, len(SITE)) * [0.85 if node in slow else 1.0 for node in SITE]
    hpl = rng.normal(3000.0, 15.0, len(SITE))
    layout = {node: "16x32GB DDR4-2933" for node in SITE} | {node: "16x32GB DDR4-2400" for node in OLD_DIMMS}
    return Dataset(series=[make_series("stream.triad", SITE, triad, unit="GB/s"),
                           make_series("xhpl", SITE, hpl, unit="GFLOP/s")],
                   facts={"DIMM Layout": layout, "cores": {node: "64" for node in SITE}})


def test_a_dimm_layout_on_exactly_the_slow_mode_s_nodes_is_its_cause():
    problems = analyze(dimm_cluster(OLD_DIMMS), correlations=False).problems
    (problem,) = problems
    assert [f.subject for f in problem.cause] == ["DIMM Layout"] and problem.nodes == "cn-[0001-0084]"
    assert [(f.kind, f.subject) for f in problem.symptoms] == [("bimodal", "stream.triad")]
    assert problem.summary == "a different DIMM Layout shows in stream.triad: 1 finding it explains"
    assert "DIMM Layout" in problem.cause[0].remedy


def test_a_mode_that_nearly_holds_the_fact_s_nodes_is_linked_and_one_that_holds_half_is_not():
    near = analyze(dimm_cluster(OLD_DIMMS[:80]), correlations=False).problems
    assert [(len(p.cause), len(p.symptoms)) for p in near] == [(1, 1)]
    half = analyze(dimm_cluster(OLD_DIMMS[:42]), correlations=False).problems
    assert sorted((p.cause[0].kind, len(p.symptoms)) for p in half) == [("bimodal", 0), ("inconsistent-fact", 0)]


def test_a_node_short_of_memory_and_its_missing_hpl_run_are_one_problem():
    nodes = SITE[:64]
    rng = np.random.default_rng(5)
    small = "cn-0024"
    memory_kb = {node: "263856012" for node in nodes} | {small: "197846016"}
    data = Dataset(series=[make_series("xhpl", [n for n in nodes if n != small], rng.normal(3000.0, 15.0, 63)),
                           make_series("stream.triad", nodes, rng.normal(180.0, 1.0, 64))],
                   facts={"MemTotal": memory_kb}, declared_nodes=nodes)
    (problem,) = analyze(data, correlations=False).problems
    assert problem.nodes == small and [f.subject for f in problem.cause] == ["MemTotal"]
    assert [(f.kind, f.subject) for f in problem.symptoms] == [("missing", "xhpl")]


def test_a_fact_on_other_nodes_explains_nothing():
    problems = analyze(dimm_cluster(SITE[100:184]), correlations=False).problems
    assert all(not p.symptoms for p in problems) and len(problems) == 2
