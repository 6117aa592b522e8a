"""Several disk directories: their metric names, the step's options, and the
side-by-side table (directory x pass, median over nodes) in text and HTML."""

import numpy as np
import pytest

from oddnode.measure import catalog
from oddnode.measure.node.disk import DiskOptions, directory_metric, disk_directories
from oddnode.readings.disk import DIRECTORY_TABLE_TITLE, directory_table, directory_table_lines
from oddnode.core.model import Direction, LabelKind, Series
from oddnode.measure.steps import make_options

NODES = np.array(["cn-a17", "cn-a18", "gpu003", "gpu010"], dtype=object)


def series(benchmark, metric, values, labels=NODES):
    return Series(benchmark, metric, "MB/s", Direction.HIGHER, LabelKind.NODE, np.asarray(labels, dtype=object),
                  np.asarray(values, dtype=float), np.ones(len(values), dtype=np.int64))


def stored():
    """/tmp fast and /scratch slow on every node; the one-directory series beside them."""
    return [
        series("disk.seq_write", directory_metric("/tmp"), [900, 1000, 1100, 950]),
        series("disk.seq_read", directory_metric("/tmp"), [2000, 2100, 1900, 2050]),
        series("disk.seq_write", directory_metric("/scratch"), [300, 310, 290], labels=NODES[:3]),
        series("disk.seq_read", directory_metric("/scratch"), [400, 420, 410], labels=NODES[:3]),
        series("disk.seq_write", "bandwidth", [1, 2, 3, 4]),
        series("memory.triad", "bandwidth", [1, 2, 3, 4]),
    ]


def test_each_directory_has_its_own_metric():
    assert directory_metric("/scratch") == "bandwidth./scratch"
    step = catalog.get_step("disk")
    options = make_options(step, {"dirs": "/tmp/,/scratch//a"})
    assert disk_directories(options) == ("/tmp", "/scratch/a")
    specs = [step.spec(options, directory) for directory in disk_directories(options)]
    assert [spec.name for spec in specs] == ["disk./tmp", "disk./scratch/a"]
    assert [s[:2] for s in specs[1].series] == [("disk.seq_write", "bandwidth./scratch/a"),
                                                ("disk.seq_read", "bandwidth./scratch/a")]
    # Its node troubles belong to the disk stage, whatever the directory's name.
    assert {catalog.series_stage(spec.name) for spec in specs} == {"disk"}
    assert catalog.series_stage("disk./data.v2/x") == "disk"
    # One directory keeps the series it always had.
    single = step.spec(make_options(step, {"directory": "/data"}))
    assert single.name == "disk" and {s[1] for s in single.series} == {"bandwidth"}
    assert disk_directories(DiskOptions()) == ()


def test_side_by_side_is_the_median_over_nodes_per_directory():
    rows = directory_table(stored())
    assert [row.directory for row in rows] == ["/scratch", "/tmp"]
    scratch, tmp = rows
    assert tmp.medians == {"seq_write": 975.0, "seq_read": 2025.0} and tmp.nodes == {"seq_write": 4, "seq_read": 4}
    assert scratch.medians == {"seq_write": 300.0, "seq_read": 410.0} and scratch.nodes["seq_write"] == 3


def test_side_by_side_keeps_the_order_asked_for_and_the_nodes_given():
    rows = directory_table(stored(), ["/tmp", "/scratch", "/missing"], nodes={"gpu003", "gpu010"})
    assert [row.directory for row in rows] == ["/tmp", "/scratch", "/missing"]
    assert rows[0].medians["seq_write"] == 1025.0 and rows[1].nodes["seq_read"] == 1
    assert rows[2].medians == {"seq_write": None, "seq_read": None} and rows[2].nodes == {"seq_write": 0,
                                                                                       "seq_read": 0}
    lines = directory_table_lines(rows)
    assert lines[0] == DIRECTORY_TABLE_TITLE
    assert lines[1].split() == ["directory", "seq_write", "seq_read"]
    assert lines[2].split() == ["/tmp", "1025", "(2)", "1975", "(2)"]
    assert lines[4].split() == ["/missing", "-", "(0)", "-", "(0)"]
    assert len({len(line) for line in lines[1:]}) == 1  # the columns line up


def test_one_directory_gives_no_table():
    assert directory_table([series("disk.seq_write", "bandwidth", [1, 2, 3, 4])]) == []
    assert directory_table_lines([]) == []


def test_html_stage_shows_the_directories_as_a_table():
    from oddnode.report.html import _directories

    table = _directories(stored())
    assert table["columns"] == ["seq_write", "seq_read"]
    assert [row["directory"] for row in table["rows"]] == ["/scratch", "/tmp"]
    assert table["rows"][1]["cells"] == ["975 (4)", "2020 (4)"]  # the report's three significant digits
    assert _directories([series("disk.seq_write", "bandwidth", [1, 2, 3, 4])]) is None


@pytest.mark.parametrize(("values", "message"), [
    ({"dirs": "/tmp,tmp"}, "must be an absolute path, got 'tmp'"),
    ({"dirs": "/tmp,/tmp"}, "named twice"),
    ({"dirs": "/tmp", "directory": "/data"}, "not both"),
])
def test_bad_directories_are_refused_with_what_is_wrong(values, message):
    step = catalog.get_step("disk")
    with pytest.raises(ValueError, match=message):
        step.check(make_options(step, values))
