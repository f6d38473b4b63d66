"""The cost model's predictions for capacities measured already, under another profile.

A sweep (`tandem bench`) stores each measured plan's capacity beside the prediction of the
profile it ran with. A change to the cost model, or a new calibration, changes only the
predictions: this script re-explains every measured (plan, rate) of the given bench.json files
with ``--profile`` and writes both figures side by side, with the share within 1.5x that the
issue's target counts (``benchmarking.bench.predictions``: measured at their own rate, not
bounds, of plans the model prices).

    .venv/bin/python bench/repredict.py bench/results/2026-11-29/20k/bench.json \
        bench/results/2026-11-29/bench.json --profile .tandem/profile.toml --name predictions
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarking.bench import points_from, predicted_capacity, predictions
from optimizer.optimizer import placement_spec
from runtime.explain import explain

RESULTS = Path(__file__).resolve().parent / "results"
FACTOR = 1.5


def repredicted(bench: Path, profile: str) -> list[dict]:
    """A row per measured plan of ``bench`` with a prediction: its figures then and now."""
    rows = []
    for point, m in predictions(points_from(json.loads(bench.read_text()))):
        plan = explain(point.query, rate=point.rate, profile=profile,
                       placement=placement_spec(m.placement))
        rows.append({"bench": str(bench), "query": point.query, "rate": point.rate,
                     "roles": m.roles, "placement": m.placement, "capacity": m.capacity,
                     "predicted_then": m.predicted,
                     "predicted": predicted_capacity(plan, point.rate),
                     "kind": kind(m.placement, plan.optimization.plan.by_reference)})
    return rows


def kind(placement: dict[str, str], by_reference: bool) -> str:
    """The class of plans a prediction belongs to: where the operators run and how the
    crossing goes, the classes the cost model prices by different functions."""
    engines = set(placement.values())
    if engines == {"duckdb"}:
        return "all in DuckDB"
    if engines == {"spark"}:
        return "all in Spark"
    if not by_reference:
        return "by value"
    after = sorted({op.rsplit("_", 1)[0] for op, e in placement.items() if e == "spark"})
    return f"by reference, {' and '.join(after)} in Spark after the MIG"


def ratio(row: dict, key: str = "predicted") -> float:
    return row["capacity"] / row[key]


def within(rows: list[dict], key: str = "predicted") -> int:
    return sum(1 for r in rows if 1 / FACTOR <= ratio(r, key) <= FACTOR)


def report(rows: list[dict], profile: str, command: str) -> str:
    lines = ["# Predictions under another profile", "",
             f"`{command}`", "", f"Profile: `{profile}`.", "",
             "| sweep | query | rate | plan | measured | predicted then | ratio then | "
             "predicted now | ratio now |", "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {Path(r['bench']).parent.name} | {r['query'].upper()} | {r['rate']:,.0f} | "
                     f"{', '.join(r['roles'])} | {r['capacity']:,.0f} | {r['predicted_then']:,.0f} | "
                     f"{ratio(r, 'predicted_then'):.2f} | {r['predicted']:,.0f} | {ratio(r):.2f} |")
    lines += ["", f"Within {FACTOR}x: **{within(rows, 'predicted_then')} of {len(rows)}** with the "
              f"profiles the sweeps ran with, **{within(rows)} of {len(rows)}** with this one.", "",
              "| plans | points | within then | within now | measured / predicted now |",
              "|---|---:|---:|---:|---|"]
    for name in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == name]
        spread = sorted(ratio(r) for r in mine)
        lines.append(f"| {name} | {len(mine)} | {within(mine, 'predicted_then')} | "
                     f"{within(mine)} | {spread[0]:.2f}–{spread[-1]:.2f} |")
    return "\n".join(lines + [""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benches", nargs="+", type=Path, help="bench.json files of sweeps")
    parser.add_argument("--profile", required=True, help="the calibration profile to predict with")
    parser.add_argument("--name", default="predictions", help="results go to bench/results/NAME.{md,json}")
    args = parser.parse_args()
    rows = [r for bench in args.benches for r in repredicted(bench, args.profile)]
    command = ("bench/repredict.py " + " ".join(str(b) for b in args.benches)
               + f" --profile {args.profile} --name {args.name}")
    text = report(rows, args.profile, command)
    (RESULTS / f"{args.name}.md").write_text(text)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(
        {"command": command, "profile": args.profile, "rows": rows,
         "within": within(rows), "total": len(rows)}, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
