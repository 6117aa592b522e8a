"""``oddnode model``'s refusals and its report (tables fitted to the
terminal, the JSON document, the figure), and ``check``'s refusal of packed
or striped sets without a topology, before any stage runs."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from support.cli import invoke
from oddnode.report.placement import model_document, model_figure, model_view
from oddnode.store import open_store
from support.placement import profile_of
from support.placement import a_model_run


@pytest.mark.slow
def test_model_refuses_a_store_without_profiles_an_unknown_one_and_unknown_placements(tmp_path):
    db = tmp_path / "store.duckdb"
    result = invoke("model", "latest", "--db", db, "--nodes", "cn-a17,cn-a18")
    assert result.exit_code == 2 and "holds no profile" in result.text
    with open_store(db) as store:
        store.add_profile(profile_of({("MPI_Alltoall", 13): (10, 1.0, 81920)}, hosts=["a", "b", "c", "d"]))
    result = invoke("model", "7", "--db", db, "--nodes", "cn-a17,cn-a18")
    assert result.exit_code == 2 and "no profile 7" in result.text and "its profiles: 1" in result.text
    result = invoke("model", "1", "--placements", "packed,diagonal", "--db", db, "--nodes", "cn-a17,cn-a18")
    assert result.exit_code == 2 and "placements are among" in result.text
    result = invoke("model", str(tmp_path / "nothing.txt"), "--db", db, "--nodes", "cn-a17,cn-a18")
    assert result.exit_code == 2 and "neither a stored profile id" in result.text
    # The job's 4 hosts are not among 2 nodes.
    result = invoke("model", "1", "--db", db, "--nodes", "cn-a17,cn-a18", "--placements", "given,shuffled")
    assert result.exit_code == 2 and "only 2 given" in result.text


def test_check_refuses_packed_sets_without_a_topology_before_any_stage(tmp_path):
    result = invoke("check", "--stages", "sets", "--set", "sets.orderings=sorted,packed", "--nodes",
                    "cn-a[17-20]", "--db", tmp_path / "store.duckdb")
    assert result.exit_code == 2 and "sets: packed needs a topology" in result.text
    assert "diagnostics" not in result.text


@pytest.fixture
def run():
    return a_model_run()


def render(view, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(view)
    return console.export_text()


@pytest.mark.parametrize("width", [60, 80, 200])
def test_the_model_report_fits_the_terminal_and_names_the_best_placement(run, width):
    selection, model = run
    text = render(model_view(selection, model, 2, ["striped: the same nodes as given"], width), width)
    assert all(len(line) <= width for line in text.splitlines()), text
    assert "best placement: packed (480 ms per rank); striped takes 2.96x as long" in " ".join(text.split())
    assert "MPI_Alltoall" in text and "alltoall 32 KiB" in " ".join(text.split())
    if width >= 200:
        assert "r12-sw1+r12-sw2+r13-sw1" in text and "480-480" in text and "striped: the same nodes as given" in text


def test_the_model_document_and_figure(run, tmp_path):
    selection, model = run
    document = model_document(selection, model, ["a note"], 1)
    assert document["best"] == "packed" and document["factor"] == pytest.approx(1.42 / 0.48)
    assert [p["name"] for p in document["placements"]] == ["packed", "striped"]
    assert document["placements"][1]["aliases"] == ["given"]
    assert document["placements"][0]["measured_s"]["1"] == {"alltoall 32 KiB": 0.004, "sendrecv 1 KiB": 0.0002}
    assert document["selection"]["points"] == [{"kernel": "alltoall", "size": 32768},
                                               {"kernel": "sendrecv", "size": 1024}]
    from oddnode.report.plots import save_figure

    save_figure(model_figure(selection, model, model.candidates), tmp_path / "model.png")
    assert (tmp_path / "model.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
