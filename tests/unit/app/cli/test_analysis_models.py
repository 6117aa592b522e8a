"""``oddnode analyze`` reads the placement models a store holds (``oddnode
model``'s predictions): the placement-sensitive finding, a ``models``
section in the JSON (schema-validated) and a Placement model section in
the HTML, with each placement's nodes, groups and predictions."""

from __future__ import annotations

import json

import pytest

from oddnode.measure.profile.placement_runs import _store_predictions
from oddnode.report.schema import validate
from oddnode.store import open_store
from support.cli import invoke
from support.placement import a_model_run

GROUPS = {"r12-n001": "r12-sw1", "r12-n002": "r12-sw1", "r12-n003": "r12-sw1", "r12-n004": "r12-sw1",
          "r12-n017": "r12-sw2", "r13-n001": "r13-sw1"}
PACKED = [0.10, 0.11, 0.10, 0.12, 0.10]
STRIPED = [0.31, 0.35, 0.30, 0.33, 0.36]


def model_store(path, packed=PACKED, striped=STRIPED):
    _, model = a_model_run()
    model.predictions = {"packed": dict(enumerate(packed, start=1)), "striped": dict(enumerate(striped, start=1))}
    with open_store(path) as store:
        with store.transaction():
            store.set_topology(store.new_run("oddnode topology"), GROUPS)
            run_id = store.new_run("oddnode model 7")
        _store_predictions(store, run_id, model, profile_id=7)
    return path


@pytest.mark.slow
def test_the_analysis_carries_each_placements_predictions_and_the_finding(tmp_path):
    db = model_store(tmp_path / "m.duckdb")
    result = invoke("analyze", "--db", db, "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    validate(document, "analysis")
    assert [f["kind"] for f in document["findings"]] == ["placement-sensitive"]
    (model,) = document["models"]
    assert (model["profile_id"], model["metric"], model["best"]) == (7, "profile.7", "packed")
    assert model["factor"] == 0.33 / 0.10
    by_name = {p["name"]: p for p in model["placements"]}
    # The placement where the profile ran chose the striped nodes: stored
    # under both names, read back as one, as the model run named it.
    assert list(by_name) == ["packed", "striped"] and by_name["striped"]["aliases"] == ["given"]
    assert by_name["packed"]["groups"] == ["r12-sw1"] and len(by_name["striped"]["groups"]) == 3
    assert by_name["striped"]["predictions_s"] == {str(r): v for r, v in enumerate(STRIPED, start=1)}


@pytest.mark.slow
def test_the_html_report_shows_the_placements_and_the_best(tmp_path):
    db = model_store(tmp_path / "m.duckdb", packed=[0.40] * 3, striped=[0.20] * 3)
    html = tmp_path / "r.html"
    assert invoke("analyze", "--db", db, "--html", html).exit_code == 0  # three repetitions cannot decide
    text = html.read_text()
    assert '<section id="models">' in text and "Profile 7: predicted communication per placement" in text
    assert "best placement: striped; packed takes 2x as long" in text
    assert "r12-sw1+r12-sw2+r13-sw1" in text


def test_a_store_without_a_model_has_no_such_section(tmp_path):
    db = tmp_path / "m.duckdb"
    with open_store(db) as store, store.transaction():
        store.add_facts(store.new_run("inventory"), [("r12-n001", "cpus", "64"), ("r12-n002", "cpus", "64")])
    result = invoke("analyze", "--db", db, "--json", "--html", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    assert "models" not in json.loads(result.stdout)
    assert '<section id="models">' not in (tmp_path / "r.html").read_text()
