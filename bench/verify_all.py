"""Run `tandem verify --placements all` for Q1-Q6 and record the outcome in
bench/results/verify.md (rewritten after each query, so a long run leaves what it has done).

    python bench/verify_all.py [--parallel 3] [q1 q2 ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tandem.verify import verify  # noqa: E402

QUERIES = ("q1", "q2", "q3", "q4", "q5", "q6")
STATUSES = ("same", "different", "not runnable")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("queries", nargs="*", default=list(QUERIES))
    parser.add_argument("--parallel", type=int, default=3)
    args = parser.parse_args()
    rows, different = [], []
    for query in args.queries:
        started = time.perf_counter()
        outcomes = verify(query, "all", parallel=args.parallel,
                          catalog=str(ROOT / "queries" / "catalog.toml"))
        minutes = (time.perf_counter() - started) / 60
        count = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
        rows.append(f"| {query.upper()} | {len(outcomes)} | {count['same']} | "
                    f"{count['different']} | {count['not runnable']} | {minutes:.1f} |")
        different += [(query, o) for o in outcomes if o.status != "same"]
        print(rows[-1], flush=True)
        write(rows, different, args.parallel)


def write(rows: list[str], different: list, parallel: int) -> None:
    lines = ["# `tandem verify --placements all` for Q1-Q6", "",
             f"Measured {time.strftime('%Y-%m-%d')} with `python bench/verify_all.py --parallel "
             f"{parallel}`: each placement of phase two's space runs on Spark and DuckDB over "
             "400 s of event time at 3 tuples/s from 6 plugs (50 s micro-batches, "
             f"{parallel} placements at once in one Spark session), and every result row is "
             "compared with the polars reference evaluator (floats to a relative 1e-9).", "",
             "| query | placements | same as reference | different | not runnable | minutes |",
             "|---|---|---|---|---|---|", *rows, ""]
    if different:
        lines += ["Placements that did not give the reference's rows:", ""]
        lines += [f"- {q.upper()} " + ", ".join(f"{op}={e}" for op, e in o.placement.items())
                  + f": {o.status}, {o.rows} rows. {o.detail.splitlines()[0] if o.detail else ''}"
                  for q, o in different]
    else:
        lines.append("Every placement gave exactly the reference's rows.")
    (ROOT / "bench" / "results" / "verify.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
