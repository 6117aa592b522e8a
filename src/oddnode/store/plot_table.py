"""STAB plot files parsed in bulk by DuckDB into a table on the store's connection.

DuckDB reads every file in one scan (``read_text``, with each file's name)
and splits it into numbered lines and whitespace-separated fields, so a
million results never pass through Python one by one.  ``read_csv`` is not
used: it cannot split on runs of spaces and tabs, and it loses the line
numbers that errors and ``raw_ref`` name.

A file in which DuckDB finds anything questionable (see ``_QUESTIONABLE``
and ``_checked_files``) is handed back to the caller, which reads it again
with the line-by-line reader: its verdict stands, an error naming file and
line or rows that DuckDB's stricter reading refused.  Clean files, the
common case, never reach Python.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import duckdb
import numpy as np

# The temporary tables of one import, on the store's connection.
ROWS_TABLE = "_plot_rows"  # file, line, value, label: every data line of every file
FILES_TABLE = "_plot_files"  # file, path

# Content the SQL split would read differently from Python's str.split() and
# str.splitlines(): control characters other than tab, LF and CR (vertical
# tab, form feed and \x1c-\x1f are whitespace or line breaks to Python), a CR
# that does not end a line, and non-ASCII text (Unicode spaces and digits).
# Tested without a regular expression over the whole text, which costs
# twice as much: non-ASCII as fewer characters than bytes, each control
# character by a substring search, and only a text with a CR by a pattern.
_CONTROL_CODES = (*range(0x00, 0x09), 0x0b, 0x0c, *range(0x0e, 0x20), 0x7f)
_QUESTIONABLE = " OR ".join([
    "length(t.content) <> strlen(t.content)",
    *(f"contains(t.content, chr({code}))" for code in _CONTROL_CODES),
    r"(contains(t.content, chr(13)) AND regexp_matches(t.content, '\r[^\n]|\r$'))",
])


def parse_plot_files(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], repetitions: bool) -> list[int]:
    """Fill ROWS_TABLE with the data lines of ``paths`` (file = index in
    ``paths``); return the indices of the files DuckDB did not take, for the
    line-by-line reader.  A line is a data line unless blank or a ``#``
    comment; its value is the first field, its label the second."""
    con.register("_plot_paths", {
        "file": np.arange(len(paths), dtype=np.int32),
        "path": np.array([os.fspath(p) for p in paths], dtype=object),
    })
    con.execute(f"CREATE OR REPLACE TEMP TABLE {FILES_TABLE} AS SELECT * FROM _plot_paths")
    con.unregister("_plot_paths")
    try:
        # Each file's text normalised so that one space separates fields and
        # none starts or ends a line: CRLF to LF, tabs to spaces, runs of
        # spaces to one, spaces beside line ends dropped (each step only in
        # files that need it).  Lines are then split without a per-line trim.
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE {ROWS_TABLE} AS
            WITH texts AS (
                SELECT f.file, t.content
                FROM read_text($paths) t JOIN {FILES_TABLE} f ON t.filename = f.path
                WHERE NOT ({_QUESTIONABLE})),
            endings AS (
                SELECT file, CASE WHEN contains(content, chr(13))
                                  THEN replace(content, chr(13) || chr(10), chr(10)) ELSE content END AS content
                FROM texts),
            tabs AS (
                SELECT file, CASE WHEN contains(content, chr(9))
                                  THEN replace(content, chr(9), ' ') ELSE content END AS content
                FROM endings),
            spaces AS (
                SELECT file, CASE WHEN contains(content, '  ') OR contains(content, chr(10) || ' ')
                                       OR contains(content, ' ' || chr(10)) OR starts_with(content, ' ')
                                  THEN trim(regexp_replace(regexp_replace(content, ' {{2,}}', ' ', 'g'),
                                                           ' ?\n ?', chr(10), 'g'), ' ')
                                  ELSE content END AS content
                FROM tabs),
            lines AS (SELECT file, string_split(content, chr(10)) AS lines FROM spaces),
            numbered AS (SELECT file, generate_subscripts(lines, 1) AS line, unnest(lines) AS text FROM lines),
            -- Split once: split_part is a macro that would split twice.
            fields AS (SELECT file, line, string_split(text, ' ') AS fields
                       FROM numbered WHERE text <> '' AND NOT starts_with(text, '#'))
            SELECT file, line::INTEGER AS line, TRY_CAST(fields[1] AS DOUBLE) AS value,
                   coalesce(fields[2], '') AS label
            FROM fields
        """, {"paths": [os.fspath(p) for p in paths]})
    except duckdb.Error:
        # Not text (invalid UTF-8) or unreadable: the line reader says which file and why.
        con.execute(f"CREATE OR REPLACE TEMP TABLE {ROWS_TABLE} "
                    "(file INTEGER, line INTEGER, value DOUBLE, label VARCHAR)")
        return list(range(len(paths)))
    refused = _refused_files(con, repetitions)
    if refused:
        con.execute(f"DELETE FROM {ROWS_TABLE} WHERE file IN (SELECT unnest($refused))", {"refused": refused})
    taken = {file for (file,) in con.execute(f"SELECT DISTINCT file FROM {ROWS_TABLE}").fetchall()}
    return [file for file in range(len(paths)) if file not in taken]


def _refused_files(con: duckdb.DuckDBPyConnection, repetitions: bool) -> list[int]:
    """The files with a data line lacking a finite value or a label, or,
    unless ``repetitions``, with a label twice."""
    rows = con.execute(f"""
        SELECT file FROM {ROWS_TABLE} GROUP BY file
        HAVING bool_or(value IS NULL OR NOT isfinite(value) OR label = '')
    """).fetchall()
    refused = {file for (file,) in rows}
    if not repetitions and _may_repeat_labels(con):
        rows = con.execute(
            f"SELECT file FROM {ROWS_TABLE} GROUP BY file HAVING count(DISTINCT label) < count(*)").fetchall()
        refused.update(file for (file,) in rows)
    return sorted(refused)


def _may_repeat_labels(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether two rows of a file may share a label: two equal 64-bit hashes
    of (file, label).  Sorting a million hashes in numpy costs a third of
    counting distinct labels per file; only a repeat, or a collision (odds
    of about 3 in 10^8 for a million rows), pays for the exact count."""
    hashes = np.sort(con.execute(f"SELECT hash(file, label) AS h FROM {ROWS_TABLE}").fetchnumpy()["h"])
    return bool(np.any(hashes[1:] == hashes[:-1]))


def add_rows(con: duckdb.DuckDBPyConnection, file: int, rows: Sequence[tuple[float, str, int]]) -> None:
    """Add one file's rows (value, label, line) read by the line reader."""
    values, labels, lines = zip(*rows)
    con.register("_read_rows", {
        "file": np.full(len(rows), file, dtype=np.int32), "line": np.array(lines, dtype=np.int32),
        "value": np.array(values, dtype=np.float64), "label": np.array(labels, dtype=object),
    })
    con.execute(f"INSERT INTO {ROWS_TABLE} SELECT file, line, value, label FROM _read_rows")
    con.unregister("_read_rows")


def drop_tables(con: duckdb.DuckDBPyConnection) -> None:
    for table in (ROWS_TABLE, FILES_TABLE):
        con.execute(f"DROP TABLE IF EXISTS {table}")
