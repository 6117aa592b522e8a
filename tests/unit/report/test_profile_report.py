"""The MPI profile report: numbers of a scripted profile in every table,
fitting at 60 and 200 columns, folding many ranks, the JSON and the plot."""

from __future__ import annotations

import io
import re

from rich.console import Console

from oddnode.readings.profile import Profile
from oddnode.report.profile import (
    FOLD_RANKS,
    duration,
    histogram_rows,
    list_view,
    mpi_total,
    percent,
    print_profile,
    profile_json,
    summary_line,
    write_plot,
)
from support.profiles import scripted


def render(profile: Profile, width: int, wide: bool = False, profile_id: int | None = 7) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    print_profile(console, profile, profile_id, wide)
    return console.export_text()


def row_of(text: str, name: str) -> list[str]:
    """The cells of the table row that starts with ``name``."""
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.replace("┃", "│").strip("│").split("│")]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} in\n{text}")


def test_numbers_formatted():
    assert [duration(v) for v in (12.0, 0.00318, 5e-6, 0.0, None)] == ["12 s", "3.18 ms", "5 µs", "0 s", "-"]
    assert [percent(v) for v in (0.5, 0.0001, 0.0, None)] == ["50.0", "<0.1", "0.0", "-"]


def test_the_summary_line_says_communication_imbalance_and_cpu():
    assert summary_line(scripted(), 7) == ("Profile 7 (oddnode): 2 ranks on 2 hosts, wall 10 s, 55.0% of it in MPI, "
                                           "imbalance 1.11 (max/mean compute), CPU 90% (mean)")
    single = Profile(tool="itc", source="x")
    single.rank(0).wall = 1.0
    assert summary_line(single) == "Profile (itc): 1 rank, wall 1 s, 0.0% of it in MPI, imbalance 1.00 (max/mean compute)"


def test_time_by_call_histogram_and_ranks_at_200_columns():
    text = render(scripted(), 200)
    assert row_of(text, "MPI_Alltoall")[:6] == ["MPI_Alltoall", "2200", "7 s", "63.6", "3.18 ms", "50 ms"]
    assert row_of(text, "MPI_Barrier")[:6] == ["MPI_Barrier", "20", "4 s", "36.4", "200 ms", "500 ms"]
    histogram = text[text.index("Share of MPI time"):]
    assert row_of(histogram, "call") == ["call", "[32,64)", "[128K,256K)", "?"]
    assert row_of(histogram, "MPI_Alltoall") == ["MPI_Alltoall", "27.3", "36.4", ""]
    assert row_of(histogram, "MPI_Barrier") == ["MPI_Barrier", "", "", "36.4"]
    assert row_of(histogram, "all calls") == ["all calls", "27.3", "36.4", "36.4"]
    assert row_of(text, "1") == ["1", "gpu[003-010]-x", "10 s", "6 s", "4 s", "85"]
    assert "note: rank 2 wrote no file" in text and "records not read: COMMENT 2" in text
    assert "folded" not in text and "Left out" not in text
    assert max(len(line) for line in text.splitlines()) <= 200


def many_sizes() -> Profile:
    """One rank calling Alltoall and Allgather at every size from 1 B to 2 KiB."""
    profile = Profile(tool="oddnode", source="x")
    rank = profile.rank(0)
    rank.wall = 100.0
    for bucket in range(12):
        rank.record("MPI_Alltoall", bucket, 10, 1.0, 0.2, 10 << bucket)
        rank.record("MPI_Allgather", bucket, 10, 0.5, 0.1, 10 << bucket)
    rank.record("MPI_Barrier", -1, 5, 0.25, 0.1)
    return profile


def test_sizes_fold_to_fit_60_columns_and_stay_apart_at_200():
    narrow = render(many_sizes(), 60)
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert re.search(r"Sizes folded \d+ buckets a column to fit\. --wide shows them all\.", " ".join(narrow.split()))
    histogram = narrow[narrow.index("Share of MPI time"):]
    # Folded, the all-calls row still adds up to 100% of the time.
    cells = row_of(histogram, "all calls")[1:]
    assert abs(sum(float(c) for c in cells if c) - 100) < 0.5
    wide = render(many_sizes(), 200)
    assert "Sizes folded" not in wide
    assert max(len(line) for line in wide.splitlines()) <= 200
    assert row_of(wide[wide.index("Share of MPI time"):], "call")[1:3] == ["0", "1"]


def test_the_scripted_profile_fits_60_columns():
    text = render(scripted(), 60)
    assert max(len(line) for line in text.splitlines()) <= 60
    assert "MPI_Alltoall" in text and "27.3" in text


def test_wide_prints_everything_unfolded():
    text = render(many_sizes(), 60, wide=True)
    assert "Sizes folded" not in text and "[2K,4K)" in text


def test_many_calls_fold_into_other_calls():
    profile = Profile(tool="oddnode", source="x")
    rank = profile.rank(0)
    rank.wall = 100.0
    for index in range(12):
        rank.record(f"MPI_Call{index:02d}", 3, 1, float(12 - index), 1.0)
    rows = histogram_rows(profile)
    assert [row["call"] for row in rows] == [*(f"MPI_Call{i:02d}" for i in range(8)), "other calls (4)", "all calls"]
    # Calls 8..11 hold 4+3+2+1 = 10 s of 78 s.
    assert rows[-2]["[8,16)"] == "12.8" and rows[-1]["[8,16)"] == "100.0"


def test_many_ranks_fold_to_the_ends_of_the_imbalance():
    profile = Profile(tool="oddnode", source="x")
    for index in range(40):
        rank = profile.rank(index)
        rank.host, rank.wall = f"cn-a{index // 4:02d}", 10.0
        rank.record("MPI_Allreduce", 3, 10, index / 10, 0.1)  # rank 0 computes most, rank 39 least
    text = render(profile, 120)
    ranks = text[text.index("Ranks (most compute first)"):]
    listed = [line.strip("│").split("│")[0].strip() for line in ranks.splitlines() if line.startswith("│")]
    assert listed == ["0", "1", "2", "3", "4", "…", "35", "36", "37", "38", "39"]
    assert "30 more" in ranks and f"The {FOLD_RANKS} ranks with most and least compute time of 40" in ranks
    assert "…" not in render(profile, 120, wide=True)


def test_json_has_the_model_and_the_id():
    document = profile_json(scripted(), 7)
    assert {"id", "tool", "source", "command", "ranks", "time_by_call", "histogram", "imbalance",
            "communication_share", "notes", "skipped", "mpi_total", "mean_cpu"} <= set(document)
    assert document["id"] == 7 and document["time_by_call"] == {"MPI_Alltoall": 7.0, "MPI_Barrier": 4.0}
    assert abs(document["communication_share"] - 0.55) < 1e-12 and abs(document["mean_cpu"] - 0.9) < 1e-12
    assert mpi_total(scripted()) == 11.0


def test_an_empty_profile_reports_without_tables():
    text = render(Profile(tool="mpip", source="x"), 80)
    assert "0 ranks" in text and "holds no ranks" in text and "Time by MPI call" not in text


def test_the_plot_is_a_png(tmp_path):
    path = tmp_path / "p.png"
    write_plot(scripted(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_list_fits_and_says_when_empty():
    console = Console(width=60, file=io.StringIO(), record=True)
    console.print(list_view([], 60))
    assert "No profiles stored" in console.export_text()
