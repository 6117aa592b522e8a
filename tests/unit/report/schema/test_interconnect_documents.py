"""The closed sets of strings the interconnect documents name are the ones
the runs write: a pattern or verdict added to a run but not to its
document's model would make the schema refuse the run's document."""

from __future__ import annotations

from typing import get_args

from oddnode.readings.interconnect_series import BAD_LINK, CONTENTION, NOT_RETESTED
from oddnode.readings.patterns import FILE_PATTERN, PATTERNS
from oddnode.report.documents.interconnect import LinkVerdict, PatternName


def test_the_stream_patterns_are_the_patterns_a_run_can_be_planned_by():
    assert set(get_args(PatternName)) == {*PATTERNS, FILE_PATTERN}


def test_the_matrix_verdicts_are_the_verdicts_a_matrix_run_gives():
    assert set(get_args(LinkVerdict)) == {BAD_LINK, CONTENTION, NOT_RETESTED}
