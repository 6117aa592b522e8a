"""Export the store: benchmarks back to STAB plot files, everything to CSV,
Parquet or JSON with the same tables and columns in each format."""

from __future__ import annotations

import json
import os
from pathlib import Path

from oddnode import __version__
from oddnode.core.atomic import inside, output_directory, replacing, write_atomically
from oddnode.store.stab import PLOT_PREFIX, UNITS_FILE
from oddnode.store import SCHEMA_VERSION, Store

TABLE_FORMATS = {"csv": "(FORMAT csv, HEADER true)", "parquet": "(FORMAT parquet)", "json": "(FORMAT json, ARRAY true)"}

# The exported tables; the same columns in every format.
EXPORTED_TABLES = {
    "runs": "SELECT * FROM runs ORDER BY id",
    "run_nodes": "SELECT * FROM run_nodes ORDER BY run_id, position",
    "results": "SELECT * FROM results ORDER BY run_id, benchmark, metric, label, repetition",
    "best": "SELECT * FROM best ORDER BY benchmark, metric, label",
    "facts": "SELECT * FROM facts ORDER BY run_id, node, key",
    "topology": 'SELECT * FROM topology ORDER BY run_id, node',
    "findings": "SELECT * FROM findings ORDER BY run_id, severity, kind, subject",
    "node_status": "SELECT * FROM node_status ORDER BY run_id, stage, node",
    "raw_outputs": "SELECT * FROM raw_outputs ORDER BY run_id, stage, label, repetition",
    "checks": "SELECT * FROM checks ORDER BY check_id",
    "check_steps": "SELECT * FROM check_steps ORDER BY check_id, run_id",
    "process_nodes": "SELECT * FROM process_nodes ORDER BY run_id, node",
    "process_counts": "SELECT * FROM process_counts ORDER BY run_id, node, command",
    "sweeps": "SELECT * FROM sweeps ORDER BY sweep_id",
    "sweep_runs": "SELECT * FROM sweep_runs ORDER BY sweep_id, run_id",
    "profiles": "SELECT * FROM profiles ORDER BY profile_id",
    "profile_ranks": "SELECT * FROM profile_ranks ORDER BY profile_id, rank",
    "profile_calls": "SELECT * FROM profile_calls ORDER BY profile_id, rank, call, bucket NULLS LAST",
    "affinity_samples": "SELECT * FROM affinity_samples ORDER BY run_id, node",
}


class ExportError(ValueError):
    """An export that cannot be done as asked."""


def export_plot_files(store: Store, out_dir: os.PathLike[str] | str, benchmarks: list[str] | None = None) -> list[Path]:
    """Write ``plot.<benchmark>`` files (best value per label, lowest first,
    as STAB's tools list them) and a units.csv that keeps unit and direction.
    A file's name is the benchmark's made safe (io.atomic.safe_file_name):
    a stored name never writes outside ``out_dir``."""
    series = store.load_series()
    if benchmarks:
        wanted = set(benchmarks)
        series = [s for s in series if s.name in wanted or s.benchmark in wanted]
        found = {s.name for s in series} | {s.benchmark for s in series}
        if missing := sorted(wanted - found):
            raise ExportError(f"no results for {', '.join(missing)} in {store.path}")
    if not series:
        raise ExportError(f"no results to export in {store.path}")
    out = output_directory(out_dir)
    written, names = [], []
    for s in series:
        path = inside(out, f"{PLOT_PREFIX}{s.name}")
        name = path.name[len(PLOT_PREFIX):]  # the name the import will read back
        order = sorted(range(len(s)), key=lambda i: (s.values[i], s.labels[i]))
        lines = [f"# {name}: best of {s.label_kind.value}, unit {s.unit or 'none'}, "
                 f"{s.direction.value} is better, {len(s)} results (oddnode {__version__})\n"]
        lines += [f"{float(s.values[i])!r} {s.labels[i]}\n" for i in order]
        written.append(_write(path, "".join(lines)))
        names.append(name)
    units = ["benchmark,unit,direction\n",
             *(f"{name},{s.unit},{s.direction.value}\n" for name, s in zip(names, series))]
    written.append(_write(out / UNITS_FILE, "".join(units)))
    return written


def _write(path: Path, text: str) -> Path:
    write_atomically(path, text.encode("utf-8"))
    return path


def _json_numbers(store: Store, query: str) -> str:
    """``query`` with every floating-point column's NaN and infinities as
    null: DuckDB writes them as NaN and Infinity, which JSON has not (an
    invalid result keeps the value a tool printed, infinite or not)."""
    columns = store.con.execute(f"DESCRIBE {query}").fetchall()
    chosen = [f'CASE WHEN isfinite("{name}") THEN "{name}" END AS "{name}"' if kind in ("DOUBLE", "FLOAT")
              else f'"{name}"' for name, kind, *_ in columns]
    return f"SELECT {', '.join(chosen)} FROM ({query})"


def export_tables(store: Store, out_dir: os.PathLike[str] | str, fmt: str) -> list[Path]:
    """Write every table as <table>.<fmt> plus schema.json naming the version."""
    if fmt not in TABLE_FORMATS:
        raise ExportError(f"unknown export format {fmt!r} (known: plot, {', '.join(TABLE_FORMATS)})")
    out = output_directory(out_dir)
    written = []
    for table, query in EXPORTED_TABLES.items():
        path = out / f"{table}.{fmt}"
        if fmt == "json":
            query = _json_numbers(store, query)
        with replacing(path) as temporary:
            quoted = str(temporary).replace("'", "''")
            store.con.execute(f"COPY ({query}) TO '{quoted}' {TABLE_FORMATS[fmt]}")
        written.append(path)
    written.append(_write(out / "schema.json", json.dumps({"schema_version": SCHEMA_VERSION, "oddnode": __version__,
                                                           "tables": list(EXPORTED_TABLES)}, indent=2) + "\n"))
    return written
