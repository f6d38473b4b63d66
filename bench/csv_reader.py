"""DuckDB's CSV reader against the CSV file's lines, by reference (rowstream/by_reference.py):
the seconds DuckDB takes to read and judge one landed CSV file of the smart plugs, and to make
the pass over its rows that the pane partials' upkeep makes, each way in turn on the same files.

    .venv/bin/python bench/csv_reader.py [--rate 1000000] [--files 6]

"lines" is the file split into its numbered lines in SQL (``_Batch._csv``), the only way
before 2026-11-28 and still the way for a file with a row to quarantine; "reader" is DuckDB's
own CSV reader (``_Batch._csv_fields``). Writes bench/results/<date>/csv-reader.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

from rowstream import by_reference
from rowstream.by_reference import FileReferences
from runtime.settings import example_stream
from workload.smart_plugs import SmartPlugs

RESULTS = Path(__file__).resolve().parent / "results"
PLUGS = example_stream("plugs")
EVERY = ", ".join(f"max({c})" for c in PLUGS.names)  # the pass the panes' upkeep makes


def read_seconds(path: Path, by_lines: bool) -> float:
    """One landed file read, judged and passed over once, as a batch of its own."""
    fields = by_reference._Batch._csv_fields
    if by_lines:
        by_reference._Batch._csv_fields = lambda self, number, path: None
    try:
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        started = time.perf_counter()
        read = FileReferences(PLUGS, (path,), None, 5.0, 1.0).read(con)
        con.execute(f"SELECT {EVERY} FROM ({read.rows})").fetchall()
        took = time.perf_counter() - started
        assert ("__fields_" in read.rows) != by_lines, "the file was not read the way asked"
        read.close(con)
        con.close()
        return took
    finally:
        by_reference._Batch._csv_fields = fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1_000_000.0)
    parser.add_argument("--files", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = SmartPlugs(rate=args.rate).write_files(Path(tmp), args.files, 1.0,
                                                       file_format="csv")
        seconds = {"lines": [], "reader": []}
        for k, path in enumerate(files):  # each way in turn, the first alternating
            for way in (("lines", "reader") if k % 2 else ("reader", "lines")):
                seconds[way].append(read_seconds(path, way == "lines"))
    median = {way: statistics.median(s) for way, s in seconds.items()}
    lines = [f"# DuckDB's CSV reader against the file's lines ({dt.date.today()})", "",
             f"`.venv/bin/python bench/csv_reader.py --rate {args.rate:.0f} --files "
             f"{args.files}`: {args.files} landed CSV files of one second of smart-plug "
             f"readings at {args.rate:,.0f} tuples/s, each read and judged by DuckDB as a batch "
             "of its own and passed over once, both ways in turn (module docstring).", "",
             "| way | seconds per file (median) | tuples/s | every file (s) |", "|---|---:|---:|---|"]
    for way, s in seconds.items():
        lines.append(f"| {way} | {median[way]:.3f} | {args.rate / median[way]:,.0f} | "
                     f"{', '.join(f'{x:.3f}' for x in s)} |")
    lines += ["", f"The reader takes {median['lines'] / median['reader']:.1f}x less time per file."]
    out = RESULTS / str(dt.date.today()) / "csv-reader.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
