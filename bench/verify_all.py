"""Run `tandem verify --placements all` for Q1-Q6 and record the outcome in
bench/results/verify.md. Every outcome is kept in bench/results/verify.json as soon as it is
known: a run that stops leaves what it has checked, and the next run checks only the rest
(``--again`` checks everything again).

    python bench/verify_all.py [--parallel 3] [q1 q2 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarking.verify import STATUSES, placements, verify  # noqa: E402
from optimizer.cost import SPARK  # noqa: E402

QUERIES = ("q1", "q2", "q3", "q4", "q5", "q6")
RESULTS = ROOT / "bench" / "results"
CATALOG = str(ROOT / "queries" / "catalog.toml")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("queries", nargs="*", default=list(QUERIES))
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--again", action="store_true")
    args = parser.parse_args()
    path = RESULTS / "verify.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    lock = threading.Lock()
    for query in args.queries:
        kept = [] if args.again else record.get(query, {}).get("outcomes", [])
        entry = record[query] = {"placements": len(placements(query, "all", catalog=CATALOG)),
                                 "parallel": args.parallel, "outcomes": kept, "minutes": None}
        started = time.perf_counter()

        def keep(outcome, entry=entry) -> None:
            with lock:
                entry["outcomes"].append({"placement": outcome.placement, "status": outcome.status,
                                          "rows": outcome.rows, "detail": outcome.detail})
                path.write_text(json.dumps(record, indent=1) + "\n")
                write(record)

        verify(query, "all", parallel=args.parallel, catalog=CATALOG, on_outcome=keep,
               done=[o["placement"] for o in kept])
        entry["minutes"] = round((time.perf_counter() - started) / 60, 1)
        path.write_text(json.dumps(record, indent=1) + "\n")
        write(record)
        print(f"{query}: done in {entry['minutes']} min", flush=True)


def write(record: dict) -> None:
    lines = ["# `tandem verify --placements all` for Q1-Q6", "",
             f"Updated {time.strftime('%Y-%m-%d')} by `python bench/verify_all.py` (outcomes in "
             "`verify.json`): each placement of phase two's space runs on Spark and DuckDB over "
             "400 s of event time at 3 tuples/s from 6 plugs (50 s micro-batches, several "
             "placements at once in one Spark session), and every result row is compared with "
             "the polars reference evaluator (floats to a relative 1e-9).", "",
             "| query | placements | checked | same as reference | different | failed "
             "| minutes of the last run (placements at once) |", "|---|---|---|---|---|---|---|"]
    odd = []
    for query in QUERIES:
        if query not in record:
            lines.append(f"| {query.upper()} | | not run yet | | | | |")
            continue
        entry = record[query]
        outcomes = entry["outcomes"]
        count = {s: sum(o["status"] == s for o in outcomes) for s in STATUSES}
        minutes = entry["minutes"] if entry["minutes"] is not None else "running or stopped"
        lines.append(f"| {query.upper()} | {entry['placements']} | {len(outcomes)} | "
                     f"{count['same']} | {count['different']} | {count['failed']} | "
                     f"{minutes} ({entry['parallel']}) |")
        odd += [(query, o) for o in outcomes if o["status"] != "same"]
    lines.append("")
    if odd:
        lines += ["Placements that did not give the reference's rows:", ""]
        lines += [f"- {q.upper()} "
                  + (", ".join(op for op, e in o["placement"].items() if e == SPARK) or "none")
                  + f" in Spark: {o['status']}, {o['rows']} rows. "
                  + (o["detail"].splitlines()[0] if o["detail"] else "") for q, o in odd]
    else:
        lines.append("Every placement checked gave exactly the reference's rows.")
    (RESULTS / "verify.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
