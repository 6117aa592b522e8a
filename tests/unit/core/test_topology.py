"""Topology files: parsing, formatting (folded node sets) and errors that name the file and line."""

from __future__ import annotations

import pytest

from oddnode.core.topology import TopologyError, format_topology, parse_topology, read_topology

TEXT = """\
# rack 1
leaf1  node[01-04]   # first leaf
leaf2  node[05-07] node08

leaf2  login1
core.a-1:x node09
"""


def test_parse_groups_with_comments_blank_lines_and_repeated_groups():
    groups = parse_topology(TEXT, "topo.txt")
    assert groups == {**{f"node{i:02d}": "leaf1" for i in range(1, 5)},
                      **{f"node{i:02d}": "leaf2" for i in range(5, 9)}, "login1": "leaf2", "node09": "core.a-1:x"}


def test_format_folds_node_sets_and_reads_back():
    groups = {f"node{i:03d}": f"leaf{(i - 1) // 4 + 1}" for i in range(1, 13)} | {"login1": "leaf3"}
    text = format_topology(groups)
    assert text.splitlines()[0].startswith("#")
    assert text.splitlines()[1:] == ["leaf1  node[001-004]", "leaf2  node[005-008]", "leaf3  login1,node[009-012]"]
    assert parse_topology(text) == groups
    assert format_topology({}).count("\n") == 1


def test_read_a_file(tmp_path):
    path = tmp_path / "topology"
    path.write_text(TEXT)
    assert read_topology(path) == parse_topology(TEXT)
    assert read_topology(str(path))["login1"] == "leaf2"


@pytest.mark.parametrize(("text", "line", "words"), [
    ("leaf1 node[01-04]\nleaf2 node[04-06]\n", 2, "node04 is already in group leaf1 (line 1)"),
    ("leaf1 node[01-04\n", 1, "invalid node set"),
    ("# x\nleaf/1 node01\n", 2, "invalid group name 'leaf/1'"),
    ("-leaf node01\n", 1, "invalid group name"),
    ("\n\nleaf1\n", 3, "has no nodes"),
    ("leaf1 node;rm\n", 1, "invalid node name"),
])
def test_errors_name_the_file_and_line(text, line, words):
    with pytest.raises(TopologyError) as caught:
        parse_topology(text, "topo.txt")
    assert str(caught.value).startswith(f"topo.txt:{line}: ") and words in str(caught.value)
    assert caught.value.line == line and isinstance(caught.value, ValueError)


def test_unreadable_files_and_bad_group_names_to_format(tmp_path):
    with pytest.raises(TopologyError, match="cannot read the topology file"):
        read_topology(tmp_path / "missing")
    (tmp_path / "binary").write_bytes(b"\xff\xfe leaf1")
    with pytest.raises(TopologyError, match="not a text file"):
        read_topology(tmp_path / "binary")
    with pytest.raises(TopologyError, match="invalid group name"):
        format_topology({"node01": "leaf 1"})
