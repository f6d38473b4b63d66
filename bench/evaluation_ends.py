"""What the window_ends of one evaluation cost together: each query's pure-DuckDB fragment over
whole windows, evaluated for 1, 4 and 16 window_ends at once, as a micro-batch by reference
evaluates the window_ends of its files in one query (rowstream/mig.py). The share is what each
window_end after the first adds, as a share of the first one's work (the evaluation less the
query's fixed cost, timed over a window of a few rows): the cost model's ``[duckdb.query]
further_end``.

    .venv/bin/python bench/evaluation_ends.py [--queries q1,q3,q4,q5,q6] [--rate 30000]

Writes bench/results/evaluation-ends.{json,md}. Nothing else should run meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import timedelta
from pathlib import Path

from benchmarking.calibrate import _aggregate, _Model
from benchmarking.speed import elapsed
from columnar.fragment_sql import fragments
from columnar.store import ColumnarStore
from rowstream.mig import EPOCH
from runtime.run import scratch
from workload.smart_plugs import DEBS_START, SmartPlugs

RESULTS = Path(__file__).resolve().parent / "results"
QUERIES = Path(__file__).resolve().parent.parent / "queries"
COUNTS, ROUNDS, RUNS, WARM = (1, 4, 16), 3, 12, 4


def timings(model: _Model, sql: str, rate: float, window: int, counts=COUNTS
            ) -> dict[int, list[float]]:
    """Median seconds of an evaluation of ``count`` window_ends, per round, for each count:
    the rounds interleave the counts. The store holds what a run holds (a window and a few
    seconds beyond it) and nothing is purged, so every evaluation reads the same tables."""
    fragment = fragments(model.optimization(sql, rate, "duckdb", {}).plan)[0]
    span = window + max(COUNTS)
    found: dict[int, list[float]] = {}
    with scratch("tandem-ends-") as tmp, ColumnarStore(Path(tmp) / "d.duckdb") as store:
        store.create("q")
        for table in fragment.sources:
            rows = SmartPlugs(rate=rate).between(0, span).select(list(table.columns))
            store.append_input("q", table, rows, 0, fragment.panes)
        for _ in range(ROUNDS):
            for count in counts:
                times = []
                for run in range(WARM + RUNS):
                    first = DEBS_START + window + run % (span - window - count + 1)
                    ends = [EPOCH + timedelta(seconds=first + k) for k in range(count)]
                    times.append(elapsed(lambda e=ends: store.evaluate(
                        "q", fragment.sql, e, fragment.stacks)))
                found.setdefault(count, []).append(statistics.median(times[WARM:]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", default="q1,q3,q4,q5,q6")
    parser.add_argument("--rate", type=float, default=30_000)
    args = parser.parse_args()
    model = _Model()
    fixed = statistics.median(timings(model, _aggregate("AVG", 60), 100, 60, (1,))[1])
    rows = []
    for name in args.queries.split(","):
        sql = (QUERIES / f"{name}.sql").read_text()
        found = timings(model, sql, args.rate, 300)
        median = {c: statistics.median(v) for c, v in found.items()}
        work = median[1] - fixed
        rows.append({"query": name, "rate": args.rate, "seconds": found,
                     "share": {c: (median[c] - median[1]) / ((c - 1) * work)
                               for c in COUNTS if c > 1}})
        print(name, {c: round(m * 1000, 1) for c, m in median.items()}, "ms")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "evaluation-ends.json").write_text(json.dumps(
        {"fixed_seconds": fixed, "rows": rows}, indent=1))
    lines = [f"# One evaluation of several window_ends ({args.rate:,.0f} tuples/s, whole "
             "5-minute windows)", "",
             "`.venv/bin/python bench/evaluation_ends.py`: each query's pure-DuckDB fragment "
             f"evaluated for {', '.join(map(str, COUNTS))} window_ends at once, the median of "
             f"{RUNS} runs after {WARM}, in {ROUNDS} interleaved rounds. The query's fixed "
             f"cost, over a window of a few rows: {fixed * 1000:.1f} ms. The share is what each "
             "window_end after the first adds, over the first one's work.", "",
             "| query | " + " | ".join(f"{c} ends, ms" for c in COUNTS) + " | "
             + " | ".join(f"share at {c}" for c in COUNTS if c > 1) + " |",
             "|---|" + "---:|" * (2 * len(COUNTS) - 1)]
    for row in rows:
        times = [" / ".join(f"{t * 1000:.0f}" for t in row["seconds"][c]) for c in COUNTS]
        shares = [f"{row['share'][c]:.2f}" for c in COUNTS if c > 1]
        lines.append(f"| {row['query']} | " + " | ".join(times + shares) + " |")
    (RESULTS / "evaluation-ends.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
