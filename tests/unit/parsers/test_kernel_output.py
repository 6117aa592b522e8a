"""The reading every kernel's output shares: banner, header, warnings, own lines."""

from __future__ import annotations

import pytest

from oddnode.parsers.kernel_output import number, read_kernel_output, whole
from oddnode.parsers.base import ParseError

OUTPUT = """\
Last login: Mon Nov 23 10:00:00 2026
# result of nothing: a line before the banner is not ours
# oddnode memory kernel v1
# elements: 8000000
# scalar: 3.0
# proc_bind: spread
# warning: copy best time 1.0e-06 s is only 50 timer ticks
result copy 1.0 2.0 3.0 4.0

validation ok
"""


def test_banner_header_warnings_and_own_lines_are_told_apart():
    output = read_kernel_output(OUTPUT, "node1", "memory", int_keys={"elements"}, float_keys={"scalar"})
    assert output.configuration == {"kernel_version": 1, "elements": 8_000_000, "scalar": 3.0, "proc_bind": "spread"}
    assert output.header_lines == {"elements": 4, "scalar": 5, "proc_bind": 6}
    assert output.warnings == ["copy best time 1.0e-06 s is only 50 timer ticks"]
    assert output.lines == [(8, "result copy 1.0 2.0 3.0 4.0"), (10, "validation ok")]
    assert output.line_count == 10


@pytest.mark.parametrize(("text", "message"), [
    ("hello\n", "^node1: not oddnode memory kernel output: no '# oddnode memory kernel v1' line"),
    ("# oddnode memory kernel v2\n", "^node1:1: unsupported kernel version"),
    ("# oddnode memory kernel v1\n# elements 8\n", "^node1:2: malformed header line"),
    ("# oddnode memory kernel v1\n# Elements: 8\n", "^node1:2: malformed header line"),
    ("# oddnode memory kernel v1\n# elements: 8e6\n", "^node1:2: expected a whole number, found '8e6'"),
    ("# oddnode memory kernel v1\n# elements: -8\n", "^node1:2: expected a whole number >= 0, found '-8'"),
    ("# oddnode memory kernel v1\n# scalar: inf\n", "^node1:2: expected a finite number, found 'inf'"),
    ("# oddnode memory kernel v1\n# scalar: nan\n", "^node1:2: expected a finite number"),
])
def test_bad_output_names_the_line(text, message):
    with pytest.raises(ParseError, match=message):
        read_kernel_output(text, "node1", "memory", int_keys={"elements"}, float_keys={"scalar"})


def test_numbers():
    assert number("1e3", "s", 1) == 1000.0
    assert whole("-1", "s", 1, minimum=-1) == -1
    with pytest.raises(ParseError, match="expected a number, found 'x'"):
        number("x", "s", 1)
    with pytest.raises(ParseError, match="expected a whole number, found '12.0'"):
        whole("12.0", "s", 1)
