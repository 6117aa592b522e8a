"""``oddnode affinity`` on a scripted cluster stores every node's sampler
report, and ``oddnode analyze`` judges the stored samples: a fault found
and its healthy twin clean, a store of samples alone with no false
finding, a node sampled again alone replacing its own report, the
section in the JSON (schema-validated) and the HTML, a damaged stored
report refused by name."""

from __future__ import annotations

import json

import pytest

from oddnode.app.cli import affinity as cli
from oddnode.reach.base import NodeResult, NodeStatus
from oddnode.report.schema import validate
from oddnode.store import open_store
from support.affinity import bound_ranks, process, report, thread
from support.cli import invoke
from support.clusters.accounting import use_scripted_cluster

pytestmark = pytest.mark.slow

NODES = ["ib-r3c07", "ib-r3c08", "ib-r3c09", "ib-r3c10", "ib-r4c01", "ib-r4c02"]
FAULTY = "ib-r4c01"


def healthy() -> str:
    return json.dumps(report(bound_ranks(list(range(16)))))


def crowded() -> str:
    """Four ranks bound to CPU 0, the others idle: an oversubscribed core."""
    return json.dumps(report(bound_ranks([0, 0, 0, 0])))


@pytest.fixture
def cluster(monkeypatch):
    return lambda answers: use_scripted_cluster(monkeypatch, cli, answers)


def analysis(db):
    result = invoke("analyze", "--db", db, "--json")
    assert result.exit_code in (0, 1), result.output
    document = json.loads(result.stdout)
    validate(document, "analysis")
    return result.exit_code, document


def kinds(document) -> set[tuple[str, str]]:
    return {(f["kind"], f["nodes"]) for f in document["findings"]}


def test_stored_samples_give_analyze_the_oversubscribed_core_and_nothing_else(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    cluster({node: crowded() if node == FAULTY else healthy() for node in NODES})
    sampled = invoke("affinity", "--command", "a.out", "--db", db, "-v")
    assert sampled.exit_code == 1, sampled.output
    assert str(db) in sampled.output
    with open_store(db, read_only=True) as store:
        assert sorted(store.load_affinity_samples()) == sorted(NODES)
    status, document = analysis(db)
    assert status == 1
    assert kinds(document) == {("oversubscribed-core", FAULTY)}
    assert sorted(document["affinity"]["nodes"]) == NODES
    assert document["affinity"]["nodes"][FAULTY]["processes"][0]["threads"][0]["runs"] == [[0, 100]]


def test_a_store_of_healthy_samples_alone_is_ready(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    cluster({node: healthy() for node in NODES})
    assert invoke("affinity", "--command", "a.out", "--db", db).exit_code == 0
    status, document = analysis(db)
    assert (status, document["verdict"], document["findings"]) == (0, "ready", [])


def test_a_node_sampled_again_alone_replaces_its_own_report(cluster, tmp_path, monkeypatch):
    db = tmp_path / "s.duckdb"
    cluster({node: crowded() if node == FAULTY else healthy() for node in NODES})
    assert invoke("affinity", "--command", "a.out", "--db", db).exit_code == 1
    cluster({FAULTY: healthy()})  # the job restarted with its ranks bound one to a CPU
    assert invoke("affinity", "--command", "a.out", "--db", db).exit_code == 0
    status, document = analysis(db)
    assert (status, document["findings"]) == (0, [])
    assert sorted(document["affinity"]["nodes"]) == NODES


def test_an_unreachable_node_is_unreachable_not_missing(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    answers = {node: healthy() for node in NODES}
    answers[FAULTY] = NodeResult(FAULTY, NodeStatus.UNREACHABLE, "", "ssh: connect to host: No route to host", 255, 5.0)
    cluster(answers)
    assert invoke("affinity", "--command", "a.out", "--db", db).exit_code == 1
    _, document = analysis(db)
    assert {kind for kind, _ in kinds(document)} == {"unreachable"}
    assert sorted(document["affinity"]["nodes"]) == sorted(set(NODES) - {FAULTY})


def test_the_html_report_shows_the_samples_with_their_text_escaped(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    odd = report([process(7, [thread(7, [[0, 100]])]) | {"comm": "<b>x</b>"}])
    cluster({node: json.dumps(odd) if node == FAULTY else healthy() for node in NODES})
    invoke("affinity", "--command", "a.out", "--db", db)
    html = tmp_path / "r.html"
    assert invoke("analyze", "--db", db, "--html", html).exit_code in (0, 1)
    text = html.read_text()
    assert '<section id="affinity">' in text and "<h3>Threads</h3>" in text
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text


def test_a_damaged_stored_report_is_refused_naming_its_node_and_run(cluster, tmp_path):
    db = tmp_path / "s.duckdb"
    cluster({node: healthy() for node in NODES})
    invoke("affinity", "--command", "a.out", "--db", db)
    with open_store(db) as store:
        store.con.execute("UPDATE affinity_samples SET report = '{\"affinity_version\": 1}' WHERE node = ?", [FAULTY])
    result = invoke("analyze", "--db", db)
    assert result.exit_code == 2, result.output
    assert f"affinity report of {FAULTY}, run 1" in result.text and "not a report oddnode wrote" in result.text
    assert "Traceback" not in result.output
