"""Live plan migration, measured (docs/adaptive.md; Zhu, thesis Sec. 16).

    .venv/bin/python bench/migration.py strategies [--windows 30,60,120,300] [--rates 2000,20000]
                                                   [--batch 5]
    .venv/bin/python bench/migration.py step [--rates 2000,40000]

**strategies**: Moving State against Parallel Track, against the window size W and the rate.
For each (W, rate), a per-plug average load over HOP windows of W, sliding by a second (the
query is written here), runs over the generator as fast as it can, in micro-batches of
``--batch`` seconds of event time. At 2W into the stream it
migrates from pure-Spark to pure-DuckDB, once by each strategy, in turn. Each migration reports:

* its duration (wall s): Moving State's from the pause to the new plan's first batch, Parallel
  Track's from its start to the release of the new plan's results;
* the output silence (wall s): the longest time in which no result reached the run's table;
* how far the resident memory of the driver and its JVM rose during the migration (sampled
  every 0.1 s; the runs share one process, so the rise, not the level);
* Moving State's predicted T_MS (``optimizer.migration``), whose measured duration the issue
  wants within 1.5x.

**step**: Q1 over a stream at the first rate that steps to the second for 200 s and back, in
1-second micro-batches, three ways in turn: the static plan the optimiser picks at the first
rate, the one it picks at the second, and ``--adaptive`` starting from pure-Spark (so that the
rule has a plan to leave). Capacity = the stream's tuples / wall seconds.

Results go to bench/results/migration.json and migration.md."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tandem.explain import explain  # noqa: E402
from tandem.migration import run_adaptive  # noqa: E402
from tandem.run import run  # noqa: E402
from tandem.workload import SmartPlugs  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CATALOG = str(ROOT / "queries" / "catalog.toml")
AVERAGE = """SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_load
FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '{w}' SECONDS)
WHERE property = 1
GROUP BY house_id, household_id, plug_id
"""


def resident() -> int:
    """The resident memory of this process and its children (Spark's JVM), bytes."""
    me = psutil.Process()
    return me.memory_info().rss + sum(c.memory_info().rss for c in me.children(recursive=True))


class PeakMemory:
    """How far the resident memory rises above where it was when ``start`` was called, while
    on. The runs share one process, whose JVM keeps the heap it grew: the rise, not the level,
    is the migration's."""

    def __init__(self):
        self.base = self.peak = 0
        self.on, self._stop = False, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def start(self) -> None:
        self.base = self.peak = resident()
        self.on = True

    @property
    def rise(self) -> int:
        return self.peak - self.base

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            if self.on:
                try:
                    self.peak = max(self.peak, resident())
                except psutil.Error:
                    continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def strategies(windows: list[int], rates: list[float], profile: str, batch: float,
               out: dict) -> None:
    memory = PeakMemory()
    rows = out.setdefault("strategies", [])
    try:
        for w in windows:
            for rate in rates:
                for strategy in ("ms", "pt"):
                    scratch = Path(tempfile.mkdtemp(prefix="tandem-migration-"))
                    try:
                        query = scratch / f"avg{w}.sql"
                        query.write_text(AVERAGE.format(w=w))
                        def started(migration):
                            memory.start()

                        summary = run_adaptive(
                            str(query), rate=rate, duration=4 * w, batch=batch,
                            catalog=CATALOG, profile=profile, placement="spark", adaptive=False,
                            store=scratch / "t.duckdb",
                            migrate_at=[(2 * w, "duckdb", strategy)], on_migration=started)
                        memory.on = False
                        (m,) = summary.migrations
                        rows.append({"window": w, "rate": rate, "strategy": strategy,
                                     "batch": batch,
                                     "duration": m.duration, "silence": m.silence,
                                     "memory_rise": memory.rise,
                                     "predicted": m.predicted_seconds,
                                     "replayed_seconds": m.replayed_seconds,
                                     "wall": sum(p.wall_seconds for p in summary.plans)})
                        print(f"W={w} s, {rate:,.0f}/s, {strategy}: {m.duration:.1f} s, "
                              f"silence {m.silence:.1f} s, memory +{memory.rise / 2**30:.2f} GiB",
                              flush=True)
                    finally:
                        shutil.rmtree(scratch, ignore_errors=True)
    finally:
        memory.close()


def step(rates: list[float], profile: str, out: dict) -> None:
    low, high = rates
    steps = ((300.0, high), (500.0, low))
    duration = 700.0
    tuples = SmartPlugs(rate=low, steps=steps).index_at(duration)
    plans = {f"best at {low:,.0f}/s": explain("q1", rate=low, profile=profile),
             f"best at {high:,.0f}/s": explain("q1", rate=high, profile=profile)}
    rows = out.setdefault("step", [])
    for label, explanation in [*plans.items(), ("adaptive from pure-Spark", None)]:
        scratch = Path(tempfile.mkdtemp(prefix="tandem-step-"))
        try:
            started = time.perf_counter()
            if explanation is None:
                summary = run_adaptive("q1", rate=low, steps=steps, duration=duration,
                                       placement="spark", profile=profile,
                                       store=scratch / "t.duckdb")
                migrations = [m.to_json() for m in summary.migrations]
                placement = summary.plans[-1].placement
            else:
                run("q1", rate=low, steps=steps, duration=duration, store=scratch / "t.duckdb",
                    explanation=explanation)
                migrations, placement = [], explanation.optimization.plan.placement
            wall = time.perf_counter() - started
            rows.append({"plan": label, "placement": placement, "tuples": tuples, "wall": wall,
                         "capacity": tuples / wall, "migrations": migrations})
            print(f"{label}: {tuples / wall:,.0f} tuples/s, {len(migrations)} migrations",
                  flush=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def report(out: dict) -> str:
    lines = ["# Live plan migration", "",
             f"Written {date.today()} by `bench/migration.py` (module docstring: what each part "
             "runs).", ""]
    if out.get("strategies"):
        spans = sorted({r.get("batch") for r in out["strategies"]}, key=str)
        lines += ["## Moving State against Parallel Track (pure-Spark to pure-DuckDB)", "",
                  f"Micro-batches of {', '.join(f'{b:g}' for b in spans if b)} s of event time.",
                  "",
                  "Predicted: T_MS in wall seconds (Eq. 12.3, also its output silence); T_PT "
                  "in seconds of event time (Eq. 12.4), which pass faster when the run reads "
                  "as fast as it can.", "",
                  "| W s | rate /s | strategy | duration s | predicted s | output silence s "
                  "| memory rise GiB |", "|---:|---:|---|---:|---:|---:|---:|"]
        for r in out["strategies"]:
            predicted = f"{r['predicted']:.1f}" if r["predicted"] else "-"
            lines.append(f"| {r['window']} | {r['rate']:,.0f} | {r['strategy']} | "
                         f"{r['duration']:.1f} | {predicted} | {r['silence']:.1f} | "
                         f"{r['memory_rise'] / 2**30:.2f} |")
        lines.append("")
    if out.get("step"):
        lines += ["## Q1 over a rate step", "", "| plan | placement | capacity tuples/s | "
                  "migrations |", "|---|---|---:|---:|"]
        for r in out["step"]:
            engines = sorted(set(r["placement"].values()))
            lines.append(f"| {r['plan']} | {', '.join(engines)} | {r['capacity']:,.0f} | "
                         f"{len(r['migrations'])} |")
        best = max((r["capacity"] for r in out["step"] if "adaptive" not in r["plan"]),
                   default=None)
        adaptive = [r["capacity"] for r in out["step"] if "adaptive" in r["plan"]]
        if best and adaptive:
            lines += ["", f"Adaptive / best static: {statistics.median(adaptive) / best:.2f}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("strategies", "step"))
    parser.add_argument("--windows", default="30,60,120,300")
    parser.add_argument("--rates", default=None)
    parser.add_argument("--batch", type=float, default=5.0,
                        help="strategies: event time per micro-batch, seconds")
    parser.add_argument("--profile", default=str(RESULTS / "2026-11-25" / "profile.toml"),
                        help="the calibration profile the optimiser and the cost model use")
    args = parser.parse_args()
    path = RESULTS / "migration.json"
    out = json.loads(path.read_text()) if path.exists() else {}
    out.pop(args.part, None)
    if args.part == "strategies":
        strategies([int(w) for w in args.windows.split(",")],
                   [float(r) for r in (args.rates or "2000,20000").split(",")], args.profile,
                   args.batch, out)
    else:
        step([float(r) for r in (args.rates or "2000,40000").split(",")], args.profile, out)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    (RESULTS / "migration.md").write_text(report(out))


if __name__ == "__main__":
    main()
