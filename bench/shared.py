"""Several queries in one run against each alone (docs/design.md, Several queries): the same
queries over the same landed files, once together (``tandem run q1 q3 q5``: DuckDB reads and
judges each batch's files once for all) and once one after the other, each round in the
other order of the one before.

    .venv/bin/python bench/shared.py [q1 q3 q5] [--rate 200000] [--duration 120] [--rounds 4]
        [--quality] [--name shared]

Every operator runs in DuckDB, by reference, over Parquet files of 1 s, in order. With
``--quality`` the readings arrive out of order (``workload.disorder.Disorder``'s defaults) and
each query states a relative error of its own (``ERRORS``, in turn), so that each sizes a
K-slack buffer of its own from the one read (Ji's K-slack chain, Sec. 5.3); the report adds
what deciding every query's K after a file took, all queries together (Ji's "global
reconfiguration", Sec. 5.6.3). Throughput is the stream's tuples over the wall seconds of the
run (together) or of the runs (alone, summed). Writes bench/results/<name>.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from columnar.store import ColumnarStore
from runtime.run import run, run_together
from runtime.spec import RunSpec
from workload.disorder import Disorder
from workload.smart_plugs import SmartPlugs

RESULTS = Path(__file__).resolve().parent / "results"
QUERIES = Path(__file__).resolve().parents[1] / "queries"
ERRORS = (0.01, 0.05, 0.02, 0.1, 0.005, 0.03)  # --quality: the queries' ε_thr, in turn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="*", default=["q1", "q3", "q5"])
    parser.add_argument("--rate", type=float, default=200_000.0)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--quality", action="store_true",
                        help="out of order, each query with a relative error of its own")
    parser.add_argument("--name", default="shared")
    args = parser.parse_args()
    disorder = Disorder() if args.quality else None
    errors = {q: ERRORS[i % len(ERRORS)] for i, q in enumerate(args.queries)}
    cache = Path(tempfile.gettempdir()) / (f"tandem-shared-{args.rate:g}-{args.duration:g}"
                                           + ("-disordered" if disorder else ""))
    if not (cache / "complete").exists():
        SmartPlugs(rate=args.rate).write_files(cache / "files", args.duration, 1.0,
                                               disorder=disorder, file_format="parquet")
        (cache / "complete").touch()
    files = str(cache / "files")
    measured, decisions = [], []
    with tempfile.TemporaryDirectory() as scratch:
        queries = args.queries
        if args.quality:  # each query a copy of its own that states its requirement
            queries = []
            for query, error in errors.items():
                path = Path(scratch) / f"{query}e.sql"
                path.write_text(f"/*+ QUALITY(max_error = {error}) */\n"
                                + (QUERIES / f"{query}.sql").read_text())
                queries.append(str(path))
        first, *others = queries
        store = Path(scratch) / "s.duckdb"
        for round_ in range(args.rounds):
            for way in ("together", "alone") if round_ % 2 == 0 else ("alone", "together"):
                print(f"round {round_ + 1}: {' '.join(args.queries)} {way}", flush=True)
                spec = RunSpec(first, placement="duckdb", source=files, gateway="reference",
                               store=store)
                if way == "together":
                    summaries = run_together(replace(spec, together=tuple(others)))
                    wall = summaries[0].wall_seconds
                    if args.quality:
                        decisions += decided(store, [s.query for s in summaries])
                else:
                    summaries = [run(replace(spec, query=q)) for q in queries]
                    wall = sum(s.wall_seconds for s in summaries)
                measured.append({"round": round_ + 1, "way": way, "wall_seconds": wall,
                                 "tuples": summaries[0].tuples,
                                 "throughput": summaries[0].tuples / wall,
                                 "result_rows": {s.query: s.result_rows for s in summaries},
                                 "k": {s.query: s.slack["k"] for s in summaries if s.slack}})
    mean = {w: statistics.mean(r["throughput"] for r in measured if r["way"] == w)
            for w in ("together", "alone")}
    report = {"queries": args.queries, "rate": args.rate, "duration": args.duration,
              "max_errors": errors if args.quality else None,
              "runs": measured, "mean_throughput": mean,
              "together_over_alone": mean["together"] / mean["alone"]}
    if decisions:
        ms = np.array(decisions) * 1000
        report["decisions_ms"] = {"files": int(ms.size), "median": float(np.median(ms)),
                                  "p99": float(np.percentile(ms, 99)), "max": float(ms.max()),
                                  "over_1ms": int((ms > 1).sum())}
    (RESULTS / f"{args.name}.json").write_text(json.dumps(report, indent=1))
    lines = [f"# Several queries in one run ({args.name})", "",
             f"`.venv/bin/python bench/shared.py {' '.join(args.queries)}` — every operator in "
             f"DuckDB by reference, over {args.duration:g} s of readings at {args.rate:,.0f} "
             "tuples/s in 1-s Parquet files"
             + (", out of order, each query stating its relative error ε_thr ("
                + ", ".join(f"{q} {e:g}" for q, e in report["max_errors"].items()) + ")"
                if args.quality else "")
             + "; the queries together (one read of each batch) and one after the other, in "
             "turn, each round in the other order.", "",
             "| round | queries | wall s | tuples | tuples/s of the stream |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['way']} | {r['wall_seconds']:.1f} | {r['tuples']:,} | "
              f"{r['throughput']:,.0f} |" for r in measured]
    lines += ["", f"Together over alone: {report['together_over_alone']:.2f}× the throughput "
              "(the means of the rounds).", ""]
    if decisions:
        d = report["decisions_ms"]
        lines += [f"Every query's K decided after a file, the {len(args.queries)} queries' "
                  f"decisions summed, over {d['files']:,} files of the runs together: median "
                  f"{d['median']:.3f} ms, 99th percentile {d['p99']:.3f} ms, at most "
                  f"{d['max']:.3f} ms; {d['over_1ms']} over 1 ms.", ""]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def decided(store: Path, queries: list[str]) -> list[float]:
    """Per file of a run together, what deciding every query's K after it took, summed."""
    with ColumnarStore(store) as columnar:
        per_file: dict[str, float] = {}
        for query in queries:
            for decision in columnar.slack(query):
                per_file[decision["file"]] = (per_file.get(decision["file"], 0.0)
                                              + decision["seconds"])
    return list(per_file.values())


if __name__ == "__main__":
    main()
