"""Merging W/β pane partials per window against two stacks (columnar/stacks.py), by W/β: where
``optimizer.cost.STACKED_FROM`` comes from.

    .venv/bin/python bench/stacks.py [--groups 2125] [--panes 60,300,900,3600] [--windows 20]

A pane table as Q5's at 1M tuples/s holds it (one SUM partial per plug and pane, the DEBS
plugs' three keys), two blocks deep. Per window_end, one slide apart, as a run evaluates them:
the direct merge is the range of W/β panes grouped (fragment_sql's SQL without stacks); the
stacks are the back stack's step, the two lookups merged per group, and the purge of the back.
The front's build, once per W/β windows, is timed apart and amortised. Medians of ``--windows``
window_ends, DuckDB on every core. Writes bench/results/stacks.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import duckdb

from columnar.stacks import Stacks

RESULTS = Path(__file__).resolve().parent / "results"
KEYS = ("house_id", "household_id", "plug_id")
DEBS_PANE = 1377986400  # the first second of DEBS 2014: a multiple of every W/β here


def seconds(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def measure(groups: int, width: int, windows: int) -> dict:
    con = duckdb.connect()
    con.execute(f"""CREATE TABLE panes_a AS SELECT (g % 40)::INT AS house_id,
        (g % 400)::INT AS household_id, g::INT AS plug_id, ({DEBS_PANE} + p)::BIGINT AS _pane,
        random() AS _x FROM range({groups}) AS t(g), range({2 * width + windows + 1}) AS s(p)
        ORDER BY _pane""")
    stacks = Stacks("panes_a", KEYS, (("_x", "SUM"),), width, 1_000_000)
    for statement in stacks.create("main"):
        con.execute(statement)
    first = DEBS_PANE + 2 * width  # the first window of a block: the front is needed first
    build = seconds(lambda: con.execute(stacks.build_front(),
                                        {"block": first // width - 1, "low": first - width + 1}))
    keys = ", ".join(KEYS)
    [(back, purged), _] = stacks.purge()  # the back stack's rows that no later window reads
    direct, stacked = [], []
    for k in range(first, first + windows):
        direct.append(seconds(lambda k=k: con.execute(
            f"SELECT {keys}, SUM(_x) FROM panes_a WHERE _pane > {k - width} AND _pane <= {k} "
            "GROUP BY ALL").fetchall()))
        ends = f"(SELECT TIMESTAMP '2013-09-01' AS window_end, {k}::BIGINT AS _last_pane) AS e"

        def stack(k=k, ends=ends):
            con.execute(stacks.step(), {"to": k})
            con.execute(f"SELECT {keys}, SUM(_x) FROM ({stacks.windows(ends)}) GROUP BY ALL"
                        ).fetchall()
            con.execute(f"DELETE FROM {back} WHERE {purged}", {"last": k})
        stacked.append(seconds(stack))
    con.close()
    return {"groups": groups, "panes_per_window": width,
            "direct_ms": 1000 * statistics.median(direct),
            "stacks_ms": 1000 * statistics.median(stacked), "front_build_ms": 1000 * build,
            "stacks_amortised_ms": 1000 * (statistics.median(stacked) + build / width)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=2125)
    parser.add_argument("--panes", default="60,300,900,3600")
    parser.add_argument("--windows", type=int, default=20)
    args = parser.parse_args()
    rows = []
    for width in map(int, args.panes.split(",")):
        rows.append(measure(args.groups, width, args.windows))
        print(json.dumps(rows[-1]), flush=True)
    (RESULTS / "stacks.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["# Merging W/β pane partials against two stacks", "",
             f"`.venv/bin/python bench/stacks.py --groups {args.groups} --panes {args.panes}`: "
             f"milliseconds per window_end, medians of {args.windows}, one SUM per group "
             "(module docstring).", "",
             "| panes per window | direct merge | stacks | front build (once per W/β windows) "
             "| stacks, amortised |", "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['panes_per_window']} | {r['direct_ms']:.1f} | {r['stacks_ms']:.1f} | "
              f"{r['front_build_ms']:.0f} | {r['stacks_amortised_ms']:.1f} |" for r in rows]
    (RESULTS / "stacks.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
