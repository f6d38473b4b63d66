"""Live plan migration, measured (docs/adaptive.md; Zhu, thesis Sec. 16).

    .venv/bin/python bench/migration.py strategies [--windows 30,60,120,300] [--rates 2000,20000]
                                                   [--batch 5]
    .venv/bin/python bench/migration.py step [--rates 2000,40000] [--batch 1] [--rounds 2]

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
micro-batches of ``--batch`` seconds (1), three ways in turn per round: the static plan the
optimiser picks at the first rate, the one it picks at the second, and ``--adaptive`` starting
from pure-Spark (so that the rule has a plan to leave). Each runs as fast as it can; its
capacity in each phase (before, during and after the step, by the batches' event time) is the
phase's tuples over the wall time it took. The issue's target compares the adaptive run's
capacity during the step with the best static plan's for the stepped-up rate.

Results go to bench/results/migration.json and migration.md."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rowstream.eventtime import EPOCH  # noqa: E402
from runtime.explain import explain  # noqa: E402
from runtime.migration import run_adaptive  # noqa: E402
from runtime.run import run  # noqa: E402
from runtime.spec import RunSpec  # noqa: E402
from workload.smart_plugs import SmartPlugs  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CATALOG = str(ROOT / "queries" / "catalog.toml")
STEP_UP, STEP_DOWN, DURATION = 300.0, 500.0, 700.0  # step: event seconds
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


def step(rates: list[float], profile: str, batch: float, rounds: int, out: dict) -> None:
    low, high = rates
    steps = ((STEP_UP, high), (STEP_DOWN, low))
    plans = {f"best at {low:,.0f}/s": explain("q1", rate=low, profile=profile),
             f"best at {high:,.0f}/s": explain("q1", rate=high, profile=profile)}
    rows = out.setdefault("step", [])
    stream = SmartPlugs(rate=low, steps=steps)
    for round_ in range(rounds):  # interleaved: the machine's noise falls on every plan alike
        for label, explanation in [*plans.items(), ("adaptive from pure-Spark", None)]:
            scratch = Path(tempfile.mkdtemp(prefix="tandem-step-"))
            batches: list[tuple[float, float]] = []  # (wall, event second)

            def record(report, batches=batches):
                if report.event_time is not None:
                    second = (report.event_time - EPOCH).total_seconds() - stream.start
                    batches.append((time.perf_counter(), second))

            try:
                started = time.perf_counter()
                if explanation is None:
                    summary = run_adaptive("q1", rate=low, steps=steps, duration=DURATION,
                                           batch=batch, placement="spark", profile=profile,
                                           store=scratch / "t.duckdb", on_batch=record)
                    migrations = [{**m.to_json(), "at_second": batches_before(batches, m)}
                                  for m in summary.migrations]
                    placement = summary.plans[-1].placement
                else:
                    run(RunSpec("q1", rate=low, steps=steps, duration=DURATION, batch=batch,
                                store=scratch / "t.duckdb"),
                        explanation=explanation, on_batch=record)
                    migrations, placement = [], explanation.optimization.plan.placement
                phases = phase_capacity(started, batches, stream)
                rows.append({"round": round_, "plan": label, "placement": placement,
                             "batch": batch, "phases": phases, "migrations": migrations})
                print(f"round {round_} {label}: " + ", ".join(
                    f"{k} {v:,.0f}/s" for k, v in phases.items()) +
                    f"; {len(migrations)} migrations", flush=True)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)


def batches_before(batches: list[tuple[float, float]], migration) -> float | None:
    """The stream's event second when ``migration`` began (the last batch before it)."""
    before = [second for wall, second in batches if wall <= migration.started_at]
    return max(before, default=None)


def phase_capacity(started: float, batches: list[tuple[float, float]],
                   stream: SmartPlugs) -> dict:
    """Tuples per wall second in each phase of the step: the stream's tuples in the phase over
    the wall time from when the run's batches reached its start to when they reached its end
    (tuples read again by a migration are not the stream's)."""
    def reached(second: float) -> float:
        if second <= 0:
            return started
        return next((wall for wall, s in batches if s >= second), batches[-1][0])

    bounds = {"before": (0.0, STEP_UP), "step": (STEP_UP, STEP_DOWN),
              "after": (STEP_DOWN, DURATION)}
    return {phase: (stream.index_at(high) - stream.index_at(low)) / (reached(high) - reached(low))
            for phase, (low, high) in bounds.items()}


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
    for span in sorted({r["batch"] for r in out.get("step", [])}):
        rows = [r for r in out["step"] if r["batch"] == span]
        lines += [f"## Q1 over a rate step, {span:g}-second micro-batches", "",
                  f"Capacity in tuples per wall second, by phase of the stream (the rate "
                  f"steps up at {STEP_UP:g} s of event time and down at {STEP_DOWN:g} s); "
                  "rounds interleaved.", "",
                  "| round | plan | placement | before | step | after | migrations at s |",
                  "|---:|---|---|---:|---:|---:|---|"]
        for r in rows:
            engines = sorted(set(r["placement"].values()))
            cells = [f"{r['phases'].get(k, 0):,.0f}" for k in ("before", "step", "after")]
            at = ", ".join(f"{m['at_second']:g} ({m['strategy']})" for m in r["migrations"]
                           if m.get("at_second") is not None) or "-"
            lines.append(f"| {r['round']} | {r['plan']} | {', '.join(engines)} | "
                         f"{' | '.join(cells)} | {at} |")
        lines += ["", "Adaptive / best static plan for the new rate, in the phase after the "
                  "step up, per round: " + ", ".join(
                      f"{ratio:.2f}" for ratio in step_ratios(rows)) + ".", ""]
    return "\n".join(lines) + "\n"


def step_ratios(rows: list[dict]) -> list[float]:
    """Per round: the adaptive run's capacity during the step over the best static plan's
    at the stepped-up rate, both measured in that round."""
    ratios = []
    for round_ in sorted({r["round"] for r in rows}):
        mine = [r for r in rows if r["round"] == round_]
        best = [r["phases"].get("step") for r in mine if r["plan"].startswith("best at")]
        adaptive = [r["phases"].get("step") for r in mine if "adaptive" in r["plan"]]
        if best and adaptive and adaptive[0] and best[-1]:
            ratios.append(adaptive[0] / best[-1])
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=("strategies", "step"))
    parser.add_argument("--windows", default="30,60,120,300")
    parser.add_argument("--rates", default=None)
    parser.add_argument("--batch", type=float, default=None,
                        help="event time per micro-batch, seconds (strategies: 5, step: 1)")
    parser.add_argument("--rounds", type=int, default=2, help="step: interleaved rounds")
    parser.add_argument("--profile", default=str(RESULTS / "2026-11-25" / "profile.toml"),
                        help="the calibration profile the optimiser and the cost model use")
    args = parser.parse_args()
    path = RESULTS / "migration.json"
    out = json.loads(path.read_text()) if path.exists() else {}
    if args.part == "strategies":
        out.pop("strategies", None)
        strategies([int(w) for w in args.windows.split(",")],
                   [float(r) for r in (args.rates or "2000,20000").split(",")], args.profile,
                   args.batch or 5.0, out)
    else:  # the rows of other micro-batch sizes stay
        span = args.batch or 1.0
        out["step"] = [r for r in out.get("step", []) if r.get("batch") not in (span, None)]
        step([float(r) for r in (args.rates or "2000,40000").split(",")], args.profile, span,
             args.rounds, out)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    (RESULTS / "migration.md").write_text(report(out))


if __name__ == "__main__":
    main()
