"""Problems: a cause with the findings it explains, shown as one problem in
the terminal, the JSON and the HTML report; findings that nothing explains
stay problems of their own."""

from __future__ import annotations

import io
import json

from rich.console import Console

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
    assert "Findings (5; 2 problems)" in text
    assert "warning problem a competing process (stress-ng, timeout) slows memory (2 benchmarks)" in text
    assert text.count("    cause    warning inconsistent-fact [process.") == 2
    assert text.count("    symptom  warning outlier [memory.") == 2
    assert text.count("→ A command that runs on only some") == 2  # the two causes' remedies, not the symptoms'
    assert "If the result stays poor" not in text


def test_the_html_report_leads_with_one_reason_per_problem():
    html = render_report(analyze(hog_cluster(), correlations=False))
    reasons = html.split('<ul id="reasons">')[1].split("</ul>")[0]
    assert reasons.count("<li>") == 2
    assert "node005: a competing process (stress-ng, timeout) slows memory (2 benchmarks)" in reasons
    assert 'id="problems"' in html and html.count('class="problem"') == 1
    section = html.split('<h2 id="problems"')[1].split('<h2 id="findings"')[0]
    assert section.count("<td>cause</td>") == 2 and section.count("<td>symptom</td>") == 2
