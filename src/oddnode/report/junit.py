"""JUnit XML of a check or an analysis, which CI systems (Jenkins, GitLab,
GitHub Actions) read: a testcase per check stage or per finding rule, and
a failing testcase per kind and node set of the findings of warning
severity or above (one failure each: CI tools show one a testcase),
written atomically."""

from __future__ import annotations

import json
import re
import socket
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from oddnode import __version__
from oddnode.core.atomic import write_atomically
from oddnode.core.model import Finding, Severity

if TYPE_CHECKING:  # types only: the report never imports the check's runners
    from oddnode.judge.analysis import Analysis
    from oddnode.app.check import CheckResult, StageResult

STDOUT = "-"  # the destination that writes to standard output
CHECK_SUITE = "oddnode check"
ANALYZE_SUITE = "oddnode analyze"

# Characters XML 1.0 forbids anywhere (C0 controls but tab, LF, CR; lone
# surrogates; U+FFFE and U+FFFF): ElementTree would write them and break the file.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    """A value as text XML 1.0 allows: the forbidden characters removed."""
    return _NOT_XML.sub("", str(value))


def _one_line(text: str) -> str:
    return " ".join(xml_text(text).split())


def refuse_both_on_stdout(junit: str | None, json_out: bool) -> None:
    """``--junit -`` and ``--json`` would both write stdout: refused."""
    if junit == STDOUT and json_out:
        raise ValueError("--junit - and --json both write to stdout: give --junit a file name")


# -- a finding as a failure ---------------------------------------------------------------


def finding_summary(finding: Finding) -> str:
    """One line naming the finding's nodes, its kind, subject and message."""
    nodes = finding.nodes or "(no node)"
    return _one_line(f"{nodes}: {finding.severity.value} {finding.kind} [{finding.subject}] {finding.message}")


def finding_text(finding: Finding) -> str:
    """The finding as the terminal shows it, its evidence beneath, one key a
    line, and the remedy after an arrow."""
    lines = [finding.nodes or "(no node)",
             f"  {finding.severity.value:<7} {finding.kind} [{finding.subject}] {finding.message}"]
    for key, value in finding.evidence.items():
        shown = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
        lines.append(f"  {key}: {shown}")
    if finding.remedy:
        lines.append(f"  → {finding.remedy}")
    return xml_text("\n".join(lines))


def _serious(finding: Finding) -> bool:
    return finding.severity.rank >= Severity.WARNING.rank


def _testcase(suite: ET.Element, classname: str, name: str, findings: Iterable[Finding],
              seconds: float | None = None) -> ET.Element:
    """A testcase for a stage or a rule, its notes (findings below warning)
    as output lines; then a failing testcase per kind and node set of its
    serious findings (_failing_cases).  Returns the first."""
    findings = list(findings)
    case = ET.SubElement(suite, "testcase", classname=xml_text(classname), name=xml_text(name))
    if seconds is not None:
        case.set("time", f"{seconds:.3f}")
    notes = [finding_summary(finding) for finding in findings if not _serious(finding)]
    if notes:
        ET.SubElement(case, "system-out").text = "\n".join(notes)
    _failing_cases(suite, classname, [finding for finding in findings if _serious(finding)])
    return case


def _outcome(case: ET.Element, tag: str, **attributes: str) -> ET.Element:
    """A testcase's failure, error or skipped, before its output: CI tools
    read the outcome first."""
    element = ET.Element(tag, **attributes)
    case.insert(0, element)
    return element


def _failing_cases(suite: ET.Element, classname: str, findings: list[Finding]) -> None:
    """A testcase per kind and node set of ``findings``, named ``KIND NODES``,
    with one failure: CI tools (Jenkins, GitLab, Azure) show one failure a
    testcase.  Its message is the first finding's summary, with how many
    more there are; its text every one of them in full."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.kind, finding.nodes), []).append(finding)
    for (kind, nodes), found in groups.items():
        case = ET.SubElement(suite, "testcase", classname=xml_text(classname),
                             name=xml_text(f"{kind} {nodes}" if nodes else kind))
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        failure = ET.SubElement(case, "failure", message=finding_summary(found[0]) + more, type=xml_text(kind))
        failure.text = "\n\n".join(finding_text(finding) for finding in found)


def _suite(name: str, timestamp: datetime | None, hostname: str | None, properties: dict[str, object]) -> ET.Element:
    moment = (timestamp or datetime.now(timezone.utc)).astimezone(timezone.utc)
    suite = ET.Element("testsuite", name=name,
                       # JUnit's schema takes a date and time without a zone: UTC.
                       timestamp=moment.replace(tzinfo=None).isoformat(timespec="seconds"),
                       hostname=xml_text(hostname or socket.gethostname()))
    listed = ET.SubElement(suite, "properties")
    for key, value in properties.items():
        ET.SubElement(listed, "property", name=key, value=xml_text(value))
    return suite


def _count(suite: ET.Element, seconds: float | None) -> ET.Element:
    """Set the suite's counts from its children (tests, failures, errors,
    skipped: elements, as the structural check reads them)."""
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    for kind, attribute in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        suite.set(attribute, str(sum(len(case.findall(kind)) for case in cases)))
    if seconds is not None:
        suite.set("time", f"{seconds:.3f}")
    return suite


# -- the check ----------------------------------------------------------------------------


def _no_answer(stage: StageResult) -> str | None:
    """Why a stage could not run: every repetition of every run it made
    failed, timed out, found its node unreachable or no tool (None: it ran)."""
    summaries = [s for s in stage.runs.values() if s is not None and s.per_node]
    if not summaries:
        return None
    outcomes: dict[str, int] = {}
    for summary in summaries:
        for counts in summary.per_node.values():
            for outcome, n in counts.items():
                if n:
                    outcomes[outcome] = outcomes.get(outcome, 0) + n
    if outcomes.get("ok") or outcomes.get("invalid"):
        return None
    told = ", ".join(f"{n} {outcome}" for outcome, n in outcomes.items()) or "nothing run"
    return f"{stage.name}: no repetition ran on any node ({told})"


def _steps_not_run(stage: StageResult) -> bool:
    """Every step of a stage was left out: by --skip, or for want of nodes."""
    if stage.name == "diagnostics" or stage.runs or stage.findings:
        return False
    return not stage.series or (bool(stage.notes) and all(": not run, " in note for note in stage.notes))


def _key(finding: Finding) -> tuple[str, str, str, str]:
    return finding.kind, finding.subject, finding.nodes, finding.message


def check_suite(result: CheckResult, *, timestamp: datetime | None = None, hostname: str | None = None) -> ET.Element:
    """The check as one testsuite: a testcase per stage the plan named."""
    suite = _suite(CHECK_SUITE, timestamp, hostname,
                   {"check_id": result.check_id, "oddnode": __version__, "ready": str(result.analysis.ready).lower()})
    suite.set("id", str(result.check_id))
    judged = {stage.name for stage in result.stages}
    for stage in result.stages:
        case = _testcase(suite, f"oddnode.app.check.{stage.name}", stage.name, stage.findings, stage.seconds)
        if stage.name == "diagnostics" and result.inventory is not None and not result.inventory.reports:
            _outcome(case, "error", message="no node answered the inventory probe",
                     type="unreachable").text = xml_text("\n".join(
                              f"{node}: {reason}" for node, reason in sorted(result.inventory.reasons.items())))
        elif (why := _no_answer(stage)) is not None:
            _outcome(case, "error", message=_one_line(why), type="not-run").text = xml_text(
                "\n".join([why, *stage.notes]))
        elif _steps_not_run(stage):
            reason = "; ".join(stage.notes) if stage.notes else "every step of the stage was left out (--skip)"
            _outcome(case, "skipped", message=_one_line(reason))
        elif stage.notes:
            out = case.find("system-out")
            if out is None:
                out = ET.SubElement(case, "system-out")
            out.text = xml_text("\n".join([*([out.text] if out.text else []), *stage.notes]))
    # The whole judgement may find more than each stage alone (across stages).
    staged = {_key(f) for stage in result.stages for f in stage.findings}
    across = [f for f in result.analysis.findings if _key(f) not in staged]
    if across:
        _testcase(suite, "oddnode.app.check.across-stages", "across-stages", across)
    for name in result.not_run:
        if name in judged:
            continue
        case = ET.SubElement(suite, "testcase", classname=f"oddnode.app.check.{name}", name=name)
        why = (f"not reached: {result.stopped_after} had findings of warning severity or above "
               "(--continue runs the next stages anyway)" if result.stopped_after else "not reached")
        ET.SubElement(case, "skipped", message=why)
    times = [stage.seconds for stage in result.stages if stage.seconds is not None]
    return _count(suite, sum(times) if times else None)


# -- the analysis -------------------------------------------------------------------------


def analysis_suite(analysis: Analysis, rules: Sequence[str] | None = None, *,
                   timestamp: datetime | None = None, hostname: str | None = None) -> ET.Element:
    """The analysis as one testsuite: per finding rule that ran (all
    registered ones by default) a passing testcase when it found nothing,
    else a failing one per kind and node set it found; a finding of a kind
    no rule names is judged as a rule of its kind.  With nothing to judge,
    the no-data finding fails and every rule is skipped."""
    from oddnode.findings.registry import RULE_KINDS, RULES

    names = list(rules) if rules is not None else RULES.names()
    rule_of: dict[str, str] = {}
    for name in names:
        for kind in RULE_KINDS.get(name, (name,)):
            rule_of.setdefault(kind, name)
    by_case: dict[str, list[Finding]] = {name: [] for name in names}
    for finding in analysis.findings:
        by_case.setdefault(rule_of.get(finding.kind, finding.kind), []).append(finding)
    suite = _suite(ANALYZE_SUITE, timestamp, hostname,
                   {"oddnode": __version__, "ready": str(analysis.ready).lower(), "verdict": analysis.verdict,
                    "alpha": analysis.sensitivity.alpha, "min_effect": analysis.sensitivity.min_effect})
    for name, findings in by_case.items():
        classname = f"oddnode.analyze.{name}"
        notes = [finding_summary(finding) for finding in findings if not _serious(finding)]
        serious = [finding for finding in findings if _serious(finding)]
        if serious:  # the rule's failing testcases, its notes with the first
            first = len(suite.findall("testcase"))
            _failing_cases(suite, classname, serious)
            if notes:
                ET.SubElement(suite.findall("testcase")[first], "system-out").text = "\n".join(notes)
            continue
        case = _testcase(suite, classname, name, findings)
        if not analysis.judged and not findings:  # a rule with nothing to read did not pass
            _outcome(case, "skipped", message="nothing to judge: the store holds no result")
    return _count(suite, None)


# -- writing ------------------------------------------------------------------------------


def to_xml(suite: ET.Element) -> bytes:
    """The document: a ``testsuites`` root holding the suite, UTF-8."""
    root = ET.Element("testsuites", name=suite.get("name", ""))
    for attribute in ("tests", "failures", "errors", "skipped", "time"):
        if suite.get(attribute) is not None:
            root.set(attribute, suite.get(attribute))
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(suite: ET.Element, destination: str | Path) -> None:
    """Write the document to a file as io.atomic writes every output (a
    regular file in one rename; a device or FIFO written through; anything
    else refused), or to stdout for ``-``."""
    document = to_xml(suite)
    if str(destination) == STDOUT:
        sys.stdout.buffer.write(document) if hasattr(sys.stdout, "buffer") else sys.stdout.write(document.decode())
        sys.stdout.flush()
        return
    write_atomically(destination, document)


def structure_problems(document: bytes | str) -> list[str]:
    """What makes a JUnit document one CI tools would misread: a testsuite
    whose tests, failures, errors or skipped are not integers equal to the
    count of its testcases, failure, error and skipped elements; a testcase
    without classname and name; a failure or error without message and type."""
    root = ET.fromstring(document)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if root.tag not in ("testsuite", "testsuites"):
        return [f"root element is <{root.tag}>, not <testsuites> or <testsuite>"]
    problems = []
    for suite in suites:
        cases = suite.findall("testcase")
        expected = {"tests": len(cases), **{attribute: sum(len(case.findall(kind)) for case in cases) for kind, attribute
                                            in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped"))}}
        for attribute, count in expected.items():
            value = suite.get(attribute)
            if value is None or not re.fullmatch(r"\d+", value):
                problems.append(f"{suite.get('name')}: {attribute}={value!r} is not an integer")
            elif int(value) != count:
                problems.append(f"{suite.get('name')}: {attribute}={value} but {count} elements")
        for attribute in ("name", "timestamp", "hostname"):
            if not suite.get(attribute):
                problems.append(f"testsuite lacks {attribute}")
        for case in cases:
            if not case.get("classname") or not case.get("name"):
                problems.append(f"testcase {case.get('name')!r} lacks classname or name")
            for element in [*case.findall("failure"), *case.findall("error")]:
                if element.get("message") is None or element.get("type") is None:
                    problems.append(f"testcase {case.get('name')}: <{element.tag}> lacks message or type")
            if case.get("time") is not None and not re.fullmatch(r"\d+(\.\d+)?", case.get("time")):
                problems.append(f"testcase {case.get('name')}: time={case.get('time')!r} is not seconds")
    return problems
