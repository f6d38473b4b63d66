"""What enforcing the input suite costs per micro-batch: the gateway's vectorised checks and
Great Expectations itself, over the same landed file of one second of the stream at 100,000
tuples/s, against that micro-batch's budget (a 1-second micro-batch keeps up only if it takes
at most 1 s, so the budget is Q1's at 100k tuples/s).

    .venv/bin/python bench/validation_overhead.py [--rate 100000] [--repeats 5]

Writes bench/results/validation.json and .md. Each repeat times the three steps back to back
(parsing, the vectorised checks, Great Expectations); the figures are medians."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rowstream.expectations import input_parameters, input_suite, verdicts
from rowstream.landing import landed_frame
from runtime.settings import example_stream
from runtime.validation import INPUT_SUITE, run_suite
from workload.smart_plugs import SmartPlugs

PLUGS = example_stream("plugs")
INPUT = input_suite(PLUGS)

RESULTS = Path(__file__).resolve().parent / "results"


def timed(step) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = SmartPlugs(rate=args.rate).write_files(directory, 1.0, file_seconds=1.0)[0]
        frame = landed_frame(path, PLUGS)
        parameters = input_parameters(frame, PLUGS)
        gx_parameters = {k: parameters[k] for k in ("ts_min", "ts_max")}

        def checks():
            verdicts(frame, INPUT, input_parameters(frame, PLUGS))

        run_suite(INPUT_SUITE, INPUT, frame.head(10), gx_parameters)  # imports and warms GX
        times = {"parse": [], "checks": [], "great_expectations": []}
        for _ in range(args.repeats):
            times["parse"].append(timed(lambda: landed_frame(path, PLUGS)))
            times["checks"].append(timed(checks))
            times["great_expectations"].append(
                timed(lambda: run_suite(INPUT_SUITE, INPUT, frame, gx_parameters)))
    budget = 1.0  # seconds: one 1-second micro-batch
    medians = {k: statistics.median(v) for k, v in times.items()}
    report = {"rows_per_batch": frame.height, "expectations": len(INPUT),
              "repeats": args.repeats, "budget_seconds": budget,
              "seconds": medians, "all_seconds": times,
              "share_of_budget": {k: v / budget for k, v in medians.items()}}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "validation.json").write_text(json.dumps(report, indent=2) + "\n")
    rows = "\n".join(f"| {k.replace('_', ' ')} | {v * 1000:,.1f} ms | {v / budget:.1%} |"
                     for k, v in medians.items())
    (RESULTS / "validation.md").write_text(f"""# What the input suite costs per micro-batch

One landed CSV file of one second at {args.rate:,.0f} tuples/s ({frame.height:,} rows), the
input suite's {len(INPUT)} expectations (`rowstream/expectations.py`); medians of
{args.repeats} interleaved repeats on this 2-core machine. The budget is a 1-second micro-batch:
Q1 keeps up with {args.rate:,.0f} tuples/s only if a batch takes at most 1 s.

| step | per micro-batch | share of the budget |
|---|---|---|
{rows}

Inside a run the gateway enforces the suite by its vectorised twin (`checks`); Great
Expectations runs the same suite in the micro-batch DAG and in `tandem validate`, before Spark
reads a file. Parsing is listed because the gateway pays it whether or not it checks.

Reproduce: `.venv/bin/python bench/validation_overhead.py --rate {args.rate:g} --repeats {args.repeats}`
""")
    print((RESULTS / "validation.md").read_text())


if __name__ == "__main__":
    main()
