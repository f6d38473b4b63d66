"""A correlated count from ordered lists against plain ones (columnar/fragment_sql.py, ordered
lists): Q1 and Q2's DB-op over windows full at a rate, evaluated for one window_end and for four
(a micro-batch by reference of four files), and what the lists cost to fill.

    .venv/bin/python bench/ordered_lists.py [q2 q1] [--rate 1000000] [--repeats 3]

Each variant gets its own store, filled as ``tandem bench`` fills one (``measure.preload``: 300 s
of the generator's events at the rate, the lists built by the pane SQL the variant writes); the
plain lists are the same plan with the rule switched off. Both must give the same rows. Medians
of ``--repeats`` evaluations; the variants interleaved per query. Writes
bench/results/ordered-lists.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarking.measure import preload, warmup_stream
from columnar import fragment_sql
from columnar.store import ColumnarStore, schema_name
from runtime.explain import explain

RESULTS = Path(__file__).resolve().parent / "results"
FILL = 300.0  # event seconds: the DEBS queries' longest window


def plan(query: str, rate: float, ordered: bool):
    rule = fragment_sql._ordered_count
    if not ordered:
        fragment_sql._ordered_count = lambda *_: None
    try:
        return explain(query, rate=rate, placement="duckdb")
    finally:
        fragment_sql._ordered_count = rule


def measure(query: str, rate: float, ordered: bool, repeats: int, directory: Path) -> dict:
    explanation = plan(query, rate, ordered)
    path = directory / f"{query}-{'ordered' if ordered else 'plain'}.duckdb"
    started = time.perf_counter()
    with ColumnarStore(path) as store:
        preload(store, explanation, warmup_stream(rate, FILL), FILL)
    filled = time.perf_counter() - started
    [fragment] = explanation.fragments
    with ColumnarStore(path) as store:
        schema = schema_name(query)
        [[last]] = store.con.execute(f"SELECT max(_pane) FROM {schema}.{fragment.panes[-1].table.table}").fetchall()
        figures, rows = {}, None
        for ends in (1, 4):
            store.con.execute(f"SET search_path = '{schema}'")
            store.con.execute("CREATE OR REPLACE TEMP TABLE window_ends AS SELECT "
                              "make_timestamp((? - k)::BIGINT * 1000000) AS window_end "
                              "FROM range(?) t(k)", [last, ends])
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                got = store.con.execute(fragment.sql).fetchall()
                times.append(time.perf_counter() - started)
            figures[f"{ends}_ends_ms"] = round(statistics.median(times) * 1000)
            rows = sorted(got) if ends == 4 else rows
    path.unlink()
    return {"fill_s": round(filled, 1), **figures, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=["q2", "q1"])
    parser.add_argument("--rate", type=float, default=1_000_000.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="ordered-lists-") as tmp:
        for query in args.queries:
            got = {}
            for ordered in (False, True):
                print(f"{query}: {'ordered' if ordered else 'plain'} lists at {args.rate:,.0f} tuples/s",
                      flush=True)
                got["ordered" if ordered else "plain"] = measure(query, args.rate, ordered,
                                                                 args.repeats, Path(tmp))
            same = got["plain"].pop("rows") == got["ordered"].pop("rows")
            results[query] = {**got, "same_rows": same}
    command = " ".join(["bench/ordered_lists.py", *args.queries, "--rate", f"{args.rate:.0f}",
                        "--repeats", str(args.repeats)])
    (RESULTS / "ordered-lists.json").write_text(json.dumps(
        {"command": command, "rate": args.rate, "queries": results}, indent=1) + "\n")
    lines = ["# Ordered lists against plain lists", "",
             f"`.venv/bin/python {command}` on {time.strftime('%Y-%m-%d')}: the DB-op of the "
             f"all-DuckDB plan over windows full at {args.rate:,.0f} tuples/s (300 s of events), "
             "milliseconds per evaluation (median), and the seconds to fill the store.", "",
             "| query | lists | 1 window_end | 4 window_ends | fill | same rows |",
             "|---|---|---:|---:|---:|---|"]
    for query, got in results.items():
        for kind in ("plain", "ordered"):
            f = got[kind]
            lines.append(f"| {query.upper()} | {kind} | {f['1_ends_ms']:,} | {f['4_ends_ms']:,} | "
                         f"{f['fill_s']} s | {'yes' if got['same_rows'] else '**no**'} |")
    (RESULTS / "ordered-lists.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
