"""Capacity of Q1's pure-Spark, pure-DuckDB and optimiser's plans at one rate, measured in one
run as DESIGN.md defines it, written to bench/results/capacity.md.

    python bench/capacity.py [--rate 2000] [--measure 30] [--rounds 2]

Each plan gets the same stream: W seconds of event time (W = the largest window) fill the
windows in one-minute micro-batches (the warm-up), then ``--measure`` seconds follow in
micro-batches of one slide (1 s, DESIGN.md's span). Capacity = tuples of the measured
micro-batches / wall seconds from the end of the warm-up to the end of the last one. The plans
alternate over ``--rounds`` rounds; the table gives each plan's median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from optimizer.logical import windows  # noqa: E402
from rowstream.mig import EPOCH  # noqa: E402
from tandem.explain import explain  # noqa: E402
from tandem.run import run  # noqa: E402
from tandem.workload import DEBS_START  # noqa: E402

PLANS = {"pure-Spark": "spark", "pure-DuckDB": "duckdb", "optimiser's choice": "auto"}


def capacity(query: str, placement: str, rate: float, warmup: float, measure: float) -> dict:
    marks = []  # (wall clock, tuples, event time) per micro-batch
    with tempfile.TemporaryDirectory(prefix="tandem-capacity-") as tmp:
        run(query, placement=placement, rate=rate, duration=warmup + measure, batch=1.0,
            warmup=warmup, store=Path(tmp) / "c.duckdb", checkpoint=Path(tmp) / "checkpoint",
            on_batch=lambda r: marks.append((time.perf_counter(), r.tuples, r.event_time)))
    warm = EPOCH + timedelta(seconds=DEBS_START + warmup)  # where the warm-up ends
    last_warm = max(i for i, (_, _, event_time) in enumerate(marks)
                    if event_time and event_time <= warm)
    measured = [m for m in marks[last_warm + 1:] if m[1]]
    tuples = sum(m[1] for m in measured)
    seconds = measured[-1][0] - marks[last_warm][0]
    return {"tuples": tuples, "seconds": seconds, "capacity": tuples / seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--query", default="q1")
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--measure", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    plan = explain(args.query, rate=args.rate)
    warmup = max(w.size for w in windows(plan.optimization.logical.root))
    chosen = ", ".join(f"{op}={e}" for op, e in plan.optimization.plan.placement.items())
    figures: dict[str, list[dict]] = {name: [] for name in PLANS}
    for round_ in range(args.rounds):
        for name, placement in PLANS.items():
            figure = capacity(args.query, placement, args.rate, warmup, args.measure)
            figures[name].append(figure)
            print(f"round {round_ + 1}: {name}: {figure['capacity']:,.0f} tuples/s", flush=True)
    median = {name: statistics.median(f["capacity"] for f in runs) for name, runs in figures.items()}
    lines = [
        f"# Capacity of {args.query.upper()} at {args.rate:,.0f} tuples/s", "",
        f"Measured {time.strftime('%Y-%m-%d')} on this 2-core machine with "
        f"`python bench/capacity.py --query {args.query} --rate {args.rate:g} --measure "
        f"{args.measure:g} --rounds {args.rounds}`: {warmup:g} s of event time fill the windows "
        f"(one-minute micro-batches), then {args.measure:g} s are measured in 1-second "
        "micro-batches (DESIGN.md's span). Capacity = measured tuples / wall seconds; the plans "
        f"alternate over {args.rounds} rounds and the table gives medians. The optimiser's "
        f"choice at this rate, with the shipped (uncalibrated) profile: {chosen}.", "",
        "| plan | capacity (tuples/s) | feasible at the rate | runs |", "|---|---|---|---|"]
    for name, runs in figures.items():
        each = ", ".join(f"{f['capacity']:,.0f}" for f in runs)
        lines.append(f"| {name} | {median[name]:,.0f} | {'yes' if median[name] >= args.rate else 'no'}"
                     f" | {each} |")
    spark, chosen_capacity = median["pure-Spark"], median["optimiser's choice"]
    lines += ["", f"Ratios of medians: optimiser's choice / pure-Spark = "
              f"{chosen_capacity / spark:.1f}, pure-DuckDB / pure-Spark = "
              f"{median['pure-DuckDB'] / spark:.1f}."]
    out = ROOT / "bench" / "results" / "capacity.md"
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
