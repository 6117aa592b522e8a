"""The sections of a launch that ran a plan's rounds (the collectives
kernel's -P), each a set's own output, on the kernel's genuine output."""

from __future__ import annotations

import pytest

from oddnode.parsers.base import ParseError
from oddnode.parsers.oddnode_mpi_collectives import parse_collectives_output, plan_sections

from support.clusters.sets import GENUINE, set_output


def launch_output(rounds: list[list[list[str]]]) -> str:
    return "".join(f"== round {number} set {index}\n{set_output(members, 1.0)}"
                   for number, sets in enumerate(rounds, start=1) for index, members in enumerate(sets, start=1))


ROUNDS = [[["a", "b"], ["c", "d"]], [["d", "a", "c"]]]


def test_each_section_is_a_set_s_output_that_parses_as_a_run_of_its_own():
    sections = plan_sections(launch_output(ROUNDS), "launch", complete=True)
    assert sorted(sections) == [(1, 1), (1, 2), (2, 1)]
    assert sections[(1, 2)] == set_output(["c", "d"], 1.0)
    parsed = parse_collectives_output(sections[(2, 1)], "round 2 set 1")
    assert parsed.valid and parsed.configuration["ranks"] == ["d", "a", "c"]


def test_a_launch_cut_short_loses_its_last_round_which_may_be_cut_too():
    text = launch_output(ROUNDS)
    cut = text[:text.index("== round 2")] + "== round 2 set 1\n" + GENUINE[:200]
    assert sorted(plan_sections(cut, "launch", complete=False)) == [(1, 1), (1, 2)]
    assert sorted(plan_sections(text, "launch", complete=False)) == [(1, 1), (1, 2)]
    assert plan_sections("", "launch", complete=False) == {}


@pytest.mark.parametrize("text, message", [
    ("# oddnode mpi_collectives kernel v1\n== round 1 set 1\n", "output before the first round's section"),
    ("== round 1 set 1\nvalidation ok\n== round 1 set 1\nvalidation ok\n", "round 1 set 1 given twice"),
])
def test_what_is_no_launch_output_is_refused_where_it_is(text, message):
    with pytest.raises(ParseError, match=message):
        plan_sections(text, "launch", complete=True)
