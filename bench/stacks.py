"""Merging W/β pane partials per window against two stacks (columnar/stacks.py) and against
subtracting what leaves the window, by W/β: where ``optimizer.cost.STACKED_FROM`` comes from, and
why Tandem does not subtract.

    .venv/bin/python bench/stacks.py [--groups 2125] [--panes 60,300,900,3600] [--windows 20]
        [--drift-days 1] [--drift-readings 50]

A pane table as Q5's at 1M tuples/s holds it (one SUM partial per plug and pane, the DEBS
plugs' three keys), two blocks deep. Per window_end, one slide apart, as a run evaluates them:
the direct merge is the range of W/β panes grouped (fragment_sql's SQL without stacks); the
stacks are the back stack's step, the two lookups merged per group, and the purge of the back.
The front's build, once per W/β windows, is timed apart and amortised. Subtraction keeps each
group's window (its SUM and its COUNT, which says when a group has left the window) and per
window_end adds the entering pane and subtracts the leaving one. Medians of ``--windows``
window_ends, DuckDB on every core.

Drift: a running sum kept by adding and subtracting carries the rounding of everything it has
seen. ``--drift-days`` of one plug's 1-s load partials (DEBS 2014's loads, an appliance that is
off for stretches longer than the window), summed over 5-minute windows both ways in IEEE
doubles, as DuckDB sums them: the largest difference from the merged sum, and where the
window's readings are all 0, what subtraction makes of an exact 0 beside the tolerance the
results are compared with (docs/design.md, Semantics: 1e-9·(1 + |a|)).

Writes bench/results/stacks.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from benchmarking.verify import TOLERANCE
from columnar.stacks import Stacks
from workload.smart_plugs import SmartPlugs

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
    con.execute(f"""CREATE TABLE window_a AS SELECT {keys}, SUM(_x) AS _x, COUNT(*) AS _n
        FROM panes_a WHERE _pane > {first - 1 - width} AND _pane <= {first - 1} GROUP BY ALL""")
    direct, stacked, subtracted = [], [], []
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

        def subtract(k=k):
            con.execute(f"""CREATE OR REPLACE TABLE window_a AS
                SELECT {keys}, SUM(_x) AS _x, SUM(_n) AS _n FROM (
                    SELECT {keys}, _x, _n FROM window_a
                    UNION ALL SELECT {keys}, _x, 1 FROM panes_a WHERE _pane = {k}
                    UNION ALL SELECT {keys}, -_x, -1 FROM panes_a WHERE _pane = {k - width})
                GROUP BY ALL HAVING SUM(_n) > 0""")
            con.execute(f"SELECT {keys}, _x FROM window_a").fetchall()
        subtracted.append(seconds(subtract))
    con.close()
    return {"groups": groups, "panes_per_window": width,
            "direct_ms": 1000 * statistics.median(direct),
            "stacks_ms": 1000 * statistics.median(stacked), "front_build_ms": 1000 * build,
            "stacks_amortised_ms": 1000 * (statistics.median(stacked) + build / width),
            "subtract_ms": 1000 * statistics.median(subtracted)}


def drift(days: float, readings: int, width: int = 300) -> dict:
    """One plug's 1-s load partials over ``days`` (``readings`` a second), its 5-minute windows
    summed by merging the window's partials and by adding the entering and subtracting the
    leaving one."""
    span = int(days * 86400)
    plug = SmartPlugs(rate=readings, houses=1, households_per_house=1, plugs=1)
    loads = pl.from_arrow(plug.between(0, span)).filter(pl.col("property") == 1)
    pane = loads["ts"].dt.epoch("s").to_numpy()
    partials = np.zeros(span + width)
    np.add.at(partials, pane - pane.min(), loads["value"].to_numpy())
    # Stretches off, as an appliance's: its readings 0 for longer than the window.
    for start in range(3 * width, len(partials) - 2 * width, 40 * width):
        partials[start:start + 2 * width] = 0.0
    merged, running, worst, zero = [], 0.0, 0.0, []
    for k in range(len(partials)):
        running = running + partials[k] - (partials[k - width] if k >= width else 0.0)
        if k >= width:
            window = partials[k - width + 1:k + 1]
            exact = sum(window.tolist())  # the merge: the window's partials added in pane order
            merged.append(exact)
            worst = max(worst, abs(running - exact))
            if not window.any():
                zero.append(abs(running))
    return {"days": days, "readings_per_second": readings, "windows": len(merged),
            "largest_window_sum": max(merged), "largest_difference": worst,
            "off_windows": len(zero), "largest_off_residue": max(zero, default=0.0),
            "tolerance_at_zero": TOLERANCE}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=2125)
    parser.add_argument("--panes", default="60,300,900,3600")
    parser.add_argument("--windows", type=int, default=20)
    parser.add_argument("--drift-days", type=float, default=1.0)
    parser.add_argument("--drift-readings", type=int, default=50,
                        help="one plug's readings a second (Q5's plugs at 100k tuples/s: 47)")
    args = parser.parse_args()
    rows = []
    for width in map(int, args.panes.split(",")):
        rows.append(measure(args.groups, width, args.windows))
        print(json.dumps(rows[-1]), flush=True)
    drifted = drift(args.drift_days, args.drift_readings)
    print(json.dumps(drifted), flush=True)
    (RESULTS / "stacks.json").write_text(json.dumps({"windows": rows, "drift": drifted},
                                                    indent=1) + "\n")
    lines = ["# Merging W/β pane partials against two stacks and against subtraction", "",
             f"`.venv/bin/python bench/stacks.py --groups {args.groups} --panes {args.panes} "
             f"--drift-days {args.drift_days:g} --drift-readings {args.drift_readings}`: "
             f"milliseconds per window_end, medians of {args.windows}, one SUM per group "
             "(module docstring).", "",
             "| panes per window | direct merge | stacks | front build (once per W/β windows) "
             "| stacks, amortised | subtract |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['panes_per_window']} | {r['direct_ms']:.1f} | {r['stacks_ms']:.1f} | "
              f"{r['front_build_ms']:.0f} | {r['stacks_amortised_ms']:.1f} | "
              f"{r['subtract_ms']:.1f} |" for r in rows]
    lines += ["", f"Drift over {drifted['days']:g} day(s) of one plug's loads at "
              f"{drifted['readings_per_second']} readings a second, "
              f"{drifted['windows']:,} 5-minute windows (largest sum "
              f"{drifted['largest_window_sum']:,.1f}):"
              f" subtraction differs from the merge by up to {drifted['largest_difference']:.3g};"
              f" in the {drifted['off_windows']} windows whose readings are all 0 it gives up to"
              f" {drifted['largest_off_residue']:.3g} instead of 0 (the results' tolerance there:"
              f" {drifted['tolerance_at_zero']:g})."]
    (RESULTS / "stacks.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
