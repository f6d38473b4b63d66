"""Several queries in one run against each alone (docs/design.md, Several queries): the same
queries over the same landed files, once together (``tandem run q1 q3 q5``: DuckDB reads and
judges each batch's files once for all) and once one after the other, each round in the
other order of the one before.

    .venv/bin/python bench/shared.py [q1 q3 q5] [--rate 200000] [--duration 120] [--rounds 4]
        [--name shared]

Every operator runs in DuckDB, by reference, over in-order Parquet files of 1 s. Throughput is
the stream's tuples over the wall seconds of the run (together) or of the runs (alone, summed).
Writes bench/results/<name>.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from runtime.run import run, run_together
from runtime.spec import RunSpec
from workload.smart_plugs import SmartPlugs

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=["q1", "q3", "q5"])
    parser.add_argument("--rate", type=float, default=200_000.0)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--name", default="shared")
    args = parser.parse_args()
    cache = Path(tempfile.gettempdir()) / f"tandem-shared-{args.rate:g}-{args.duration:g}"
    if not (cache / "complete").exists():
        SmartPlugs(rate=args.rate).write_files(cache / "files", args.duration, 1.0,
                                               file_format="parquet")
        (cache / "complete").touch()
    files = str(cache / "files")
    first, *others = args.queries
    measured = []
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "s.duckdb"
        for round_ in range(args.rounds):
            for way in ("together", "alone") if round_ % 2 == 0 else ("alone", "together"):
                print(f"round {round_ + 1}: {' '.join(args.queries)} {way}", flush=True)
                spec = RunSpec(first, placement="duckdb", source=files, gateway="reference",
                               store=store)
                if way == "together":
                    summaries = run_together(replace(spec, together=tuple(others)))
                    wall = summaries[0].wall_seconds
                else:
                    summaries = [run(replace(spec, query=q)) for q in args.queries]
                    wall = sum(s.wall_seconds for s in summaries)
                measured.append({"round": round_ + 1, "way": way, "wall_seconds": wall,
                                 "tuples": summaries[0].tuples,
                                 "throughput": summaries[0].tuples / wall,
                                 "result_rows": {s.query: s.result_rows for s in summaries}})
    mean = {w: statistics.mean(r["throughput"] for r in measured if r["way"] == w)
            for w in ("together", "alone")}
    report = {"queries": args.queries, "rate": args.rate, "duration": args.duration,
              "runs": measured, "mean_throughput": mean,
              "together_over_alone": mean["together"] / mean["alone"]}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=1))
    lines = [f"# Several queries in one run ({args.name})", "",
             f"`.venv/bin/python bench/shared.py {' '.join(args.queries)}` — every operator in "
             f"DuckDB by reference, over {args.duration:g} s of readings at {args.rate:,.0f} "
             "tuples/s in 1-s Parquet files; the queries together (one read of each batch) "
             "and one after the other, in turn, each round in the other order.", "",
             "| round | queries | wall s | tuples | tuples/s of the stream |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['way']} | {r['wall_seconds']:.1f} | {r['tuples']:,} | "
              f"{r['throughput']:,.0f} |" for r in measured]
    lines += ["", f"Together over alone: {report['together_over_alone']:.2f}× the throughput "
              "(the means of the rounds).", ""]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
