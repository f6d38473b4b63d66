"""Quality-driven disorder handling against its baselines (Ji Sec. 4.3.1–4.3.3, Fig. 4.10–4.12):
sliding-window SUMs over a disordered stream shaped like Ji's Table 4.1, each run by Tandem
(Spark plans the batches of landed files, DuckDB reads and evaluates them, K sized per file)
with AM-adt and PD-adt for relative-error thresholds ε_thr, and with No-K-slack and Max-K-slack.

    .venv/bin/python bench/qddh.py [--rate 2000] [--duration 300] [--unit 0.1]
        [--windows 0.5,1,5] [--errors 0.0001,0.001,0.01,0.1] [--methods am,pd]
        [--max-delay 4.5] [--name qddh]

Ji's queries: SUM over windows of W seconds sliding by 0.1 s, over one stream of about 2,000
tuples a second; here the plugs' readings (``SELECT window_end, SUM(value) ... GROUP BY
window_end``), landed in files of ``--unit`` seconds of arrival time.

For each run:
- **Φ(ε_thr)**, Eq. (4.10): the share of the true window SUMs (the reference evaluator's over
  every reading) that the run produced within ε_thr; a window it did not produce misses it.
  Over the windows every run evaluated, after the warm-up.
- **Latency**: how long after a window's end, in the stream's arrival time, the run could emit
  it: the end of the file after which the buffer's watermark passed the window (K, and the wait
  for that file). The wall time of the machine's work is not in it (the run's throughput is).
- **Adaptation time**: how long each decision of K took.

Writes bench/results/<name>.json and .md, and <name>-latency.png and <name>-phi.png.

    .venv/bin/python bench/qddh.py --join [--rate 2000] [--duration 180] [--unit 0.1]
        [--recalls 0.9,0.95,0.99,0.999] [--methods am,pd] [--name qddh-join]

reproduces Sec. 4.3.4 (Fig. 4.13) instead: M2 (``queries/m2.sql``), a join of the plugs' load
readings with their households' meter readings in 5-s windows sliding by the second, both
streams out of order (the meters by up to twice the plugs' delay, with delays of their own),
with AM-adt and PD-adt for recall requirements Γ and with the baselines. γ(P_meas), Eq. (4.3),
is measured every second over the last minute of window_ends (Table 4.2's P_meas and L_adt),
from the second minute on; Φ(Γ) and Φ(.99Γ), Eq. (4.11), are the shares of those measurements
that meet Γ and .99Γ. A run produces a subset of the true rows (tests/test_joins.py), so the
recall is its rows over the reference's, window_end by window_end. The latency of a window is
the later of the two streams' (the file that let each stream's watermark pass it).

    .venv/bin/python bench/qddh.py --cost [--query q1] [--rate 200000] [--duration 60]
        [--rounds 2] [--max-error 0.01]

measures what sizing K costs: the same query over the same landed files (1-s files of
arrival time, disordered) with the stream's fixed lateness and with AM-adt, in turn, each round
in the opposite order of the one before; the throughput is tuples over the run's wall seconds
(bench/results/<name>-cost.{md,json}).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from benchmarking import reference  # noqa: E402
from columnar.store import ColumnarStore  # noqa: E402
from optimizer import load_catalog, load_profile, optimize  # noqa: E402
from rowstream.eventtime import EPOCH  # noqa: E402
from runtime.settings import REPOSITORY_QUERIES, profile_path  # noqa: E402
from workload.disorder import Disorder  # noqa: E402
from workload.meters import HouseholdMeters  # noqa: E402
from workload.smart_plugs import SmartPlugs  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SLIDE_MS = 100  # Ji's slide, 0.1 s
WARMUP = 10.0  # the adaptive policies' warm-up (kslack.manager.WARMUP): not measured
BASELINES = ("none", "max")
LABELS = {"am": "AM-adt", "pd": "PD-adt", "none": "No-K-slack", "max": "Max-K-slack"}
FILES_PER_BATCH = 50


def query(directory: Path, window: float) -> Path:
    """Ji's sliding-window SUM over the plugs, as a query file beside a copy of the catalog."""
    path = directory / f"sum_{round(window * 1000)}ms.sql"
    path.write_text(
        "SELECT window_end, SUM(value) AS total\n"
        f"FROM HOP(plugs, ts, INTERVAL '{SLIDE_MS}' MILLISECOND, "
        f"INTERVAL '{round(window * 1000)}' MILLISECOND)\nGROUP BY window_end\n")
    return path


def landed(directory: Path, rate: float, duration: float, unit: float,
           disorder: Disorder) -> Path:
    """The disordered stream landed in files of ``unit`` seconds of arrival time (kept for the
    next run of the bench with the same arguments: it is deterministic)."""
    marker = directory / "complete"
    if not marker.exists():
        shutil.rmtree(directory, ignore_errors=True)
        SmartPlugs(rate=rate).write_files(directory / "files", duration, unit,
                                          disorder=disorder, file_format="parquet")
        marker.touch()
    return directory / "files"


def one_run(sql: Path, files: Path, work: Path, method: str, max_error: float | None) -> dict:
    """A run of ``sql`` over the landed ``files`` with K sized by ``method``: its results,
    its decisions and its summary."""
    from runtime.run import run
    from runtime.spec import RunSpec

    name = f"{method}-{max_error}"
    store, checkpoint = work / f"{name}.duckdb", work / f"{name}.checkpoint"
    summary = run(RunSpec(str(sql), placement="duckdb", source=str(files), gateway="reference",
                          files_per_batch=FILES_PER_BATCH, store=store, checkpoint=checkpoint,
                          name="qddh", disorder=method,
                          max_error=max_error if max_error is not None else 0.01))
    with ColumnarStore(store) as columnar:
        results = pl.from_arrow(columnar.results("qddh")).select("window_end", "total")
        decisions = columnar.slack("qddh")
    shutil.rmtree(checkpoint, ignore_errors=True)
    store.unlink()
    return {"results": results, "decisions": decisions, "summary": summary}


def seconds(instant: datetime) -> float:
    """Unix seconds of a UTC wall time."""
    return (instant - EPOCH).total_seconds()


def file_end(name: str, unit: float) -> float:
    """A landed file's arrival end, Unix seconds, from its name (``plugs-<second>[.<ms>]``)."""
    return float(name.removesuffix(".parquet").split("-", 1)[1]) + unit


def latencies(decisions: list[dict], ends: np.ndarray, unit: float) -> np.ndarray:
    """For each window end (Unix seconds), how long after it the file that let the buffer's
    watermark pass it ended (module docstring)."""
    marks = np.array([seconds(d["watermark"]) if d["watermark"] else -np.inf
                      for d in decisions])
    arrived = np.array([file_end(d["file"], unit) for d in decisions])
    passed = np.maximum.accumulate(marks)  # the watermark never moves back
    first = np.searchsorted(passed, ends, side="left")  # the first file with watermark ≥ end
    return np.where(first < len(decisions), arrived[np.minimum(first, len(arrived) - 1)] - ends,
                    np.nan)


def phi(exact: pl.DataFrame, produced: pl.DataFrame, thresholds: list[float]) -> dict:
    """Φ(ε_thr), Eq. (4.10), at each threshold, over ``exact``'s windows."""
    both = exact.join(produced, on="window_end", how="left", suffix="_got")
    error = (both["total_got"] - both["total"]).abs() / both["total"].abs()
    error = error.fill_null(1.0).fill_nan(0.0).to_numpy()
    return {str(t): float(np.mean(error <= t)) for t in thresholds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, help="tuples/s (default 2,000; 200,000 --cost)")
    parser.add_argument("--duration", type=float, help="seconds (default 180; 60 --cost)")
    parser.add_argument("--unit", type=float, default=0.1, help="seconds of arrival per file")
    parser.add_argument("--windows", default="0.5,1,5")
    parser.add_argument("--errors", default="0.0001,0.001,0.01,0.1")
    parser.add_argument("--methods", default="am,pd")
    parser.add_argument("--max-delay", type=float, default=4.5)
    parser.add_argument("--name", help="default qddh, qddh-join with --join")
    parser.add_argument("--cost", action="store_true", help="what sizing K costs (see above)")
    parser.add_argument("--query", default="q1")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-error", type=float, default=0.01)
    parser.add_argument("--join", action="store_true", help="M2's recall (see above)")
    parser.add_argument("--recalls", default="0.9,0.95,0.99,0.999")
    parser.add_argument("--restate", action="store_true",
                        help="with --join: rewrite the report from its JSON")
    args = parser.parse_args()
    args.name = args.name or ("qddh-join" if args.join else "qddh")
    if args.cost:
        cost(args)
        return
    if args.join and args.restate:
        report = json.loads((RESULTS / f"{args.name}.json").read_text())
        write_join(report, [float(r) for r in args.recalls.split(",")],
                   args.methods.split(","), args.name)
        return
    if args.join:
        join(args)
        return
    args.rate, args.duration = args.rate or 2000.0, args.duration or 180.0
    windows = [float(w) for w in args.windows.split(",")]
    errors = [float(e) for e in args.errors.split(",")]
    methods = args.methods.split(",")
    disorder = Disorder(max_delay=args.max_delay)
    cache = Path(tempfile.gettempdir()) / (
        f"tandem-qddh-{args.rate:g}-{args.duration:g}-{args.unit:g}-{args.max_delay:g}")
    files = landed(cache, args.rate, args.duration, args.unit, disorder)
    plugs = SmartPlugs(rate=args.rate)
    readings = pl.from_arrow(plugs.between(0, args.duration))
    catalog_file = REPOSITORY_QUERIES / "catalog.toml"
    catalog, profile = load_catalog(catalog_file), load_profile(profile_path(None))
    report = {"rate": args.rate, "duration": args.duration, "unit": args.unit,
              "max_delay": args.max_delay, "tuples": readings.height,
              "files_per_batch": FILES_PER_BATCH, "windows": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        shutil.copy(catalog_file, work / "catalog.toml")
        for window in windows:
            sql = query(work, window)
            root = optimize(sql.read_text(), catalog, profile).logical.root
            exact = reference.Evaluator({"plugs": readings}).result(root).select(
                "window_end", "total")
            configs = ([(m, e) for m in methods for e in errors]
                       + [(b, None) for b in BASELINES])
            runs = {}
            for number, (method, max_error) in enumerate(configs, 1):
                print(f"W = {window:g} s, run {number}/{len(configs)}: {LABELS[method]}"
                      + (f" ε_thr {max_error:g}" if max_error is not None else "")
                      + f" ({time.perf_counter() - started:.0f} s so far)", flush=True)
                runs[(method, max_error)] = one_run(sql, files, work, method, max_error)
            # The windows every run evaluated, after the warm-up.
            first = readings["ts"].min()
            last = min(r["results"]["window_end"].max() for r in runs.values())
            exact_part = exact.filter(
                (pl.col("window_end") > first + timedelta(seconds=WARMUP + window))
                & (pl.col("window_end") <= last))
            ends = np.array([seconds(e) for e in exact_part["window_end"].to_list()])
            rows = []
            for (method, max_error), found in runs.items():
                ks = [d["k"] for d in found["decisions"]]
                lag = latencies(found["decisions"], ends, args.unit)
                summary = found["summary"]
                rows.append({
                    "method": method, "max_error": max_error,
                    "phi": phi(exact_part, found["results"], errors),
                    "latency": float(np.nanmean(lag)),
                    "k_median": statistics.median(ks), "k_max": max(ks),
                    "late": summary.quarantined.late, "tuples": summary.tuples,
                    "wall_seconds": summary.wall_seconds,
                    "decision_ms": [1e3 * d["seconds"] for d in found["decisions"]
                                    if d["threshold"] is not None or method in BASELINES]})
            report["windows"][f"{window:g}"] = {"windows_measured": len(ends), "runs": rows}
    report["seconds"] = time.perf_counter() - started
    write(report, errors, methods, args.name)


def cost(args) -> None:
    """Throughput with the fixed lateness against AM-adt over the same files (``--cost``)."""
    from runtime.run import run
    from runtime.spec import RunSpec

    rate, duration = args.rate or 200_000.0, args.duration or 60.0
    cache = Path(tempfile.gettempdir()) / f"tandem-qddh-cost-{rate:g}-{duration:g}"
    files = landed(cache, rate, duration, 1.0, Disorder(max_delay=args.max_delay))
    order = [("fixed", None), ("am", args.max_error)]
    measured = []
    with tempfile.TemporaryDirectory() as scratch:
        # Round 0 warms the process up (imports, the JVM's JIT, the page cache) and is not
        # counted: the first run of a process takes half as long again, whichever it is.
        for round_ in range(args.rounds + 1):
            for method, max_error in order if round_ % 2 else order[::-1]:
                print(f"round {round_}: {args.query} with K {method}", flush=True)
                summary = run(RunSpec(args.query, placement="duckdb", source=str(files),
                                      gateway="reference", store=Path(scratch) / "c.duckdb",
                                      checkpoint=Path(scratch) / "c", disorder=method,
                                      max_error=max_error))
                if not round_:
                    break
                measured.append({"round": round_, "disorder": method,
                                 "tuples": summary.tuples, "wall_seconds": summary.wall_seconds,
                                 "throughput": summary.throughput,
                                 "k": summary.slack["k"] if summary.slack else None})
    mean = {m: statistics.mean(r["throughput"] for r in measured if r["disorder"] == m)
            for m, _ in order}
    report = {"query": args.query, "rate": rate, "duration": duration,
              "max_error": args.max_error, "runs": measured, "mean_throughput": mean,
              "am_over_fixed": mean["am"] / mean["fixed"]}
    (RESULTS / f"{args.name}-cost.json").write_text(json.dumps(report, indent=1))
    lines = [f"# What sizing K costs ({args.name}-cost)", "",
             f"`.venv/bin/python bench/qddh.py --cost --query {args.query}` — {args.query} all "
             f"in DuckDB by reference over {duration:g} s of readings at {rate:,.0f} tuples/s, "
             "out of order, in 1-s files; the fixed lateness and AM-adt "
             f"(ε_thr {args.max_error:g}) in turn, each round in the other order, after a run "
             "that warms the process up.", "",
             "| round | K | tuples | wall s | tuples/s |", "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['disorder']} | {r['tuples']:,} | {r['wall_seconds']:.1f} | "
              f"{r['throughput']:,.0f} |" for r in measured]
    lines += ["", f"AM-adt over the fixed lateness: {report['am_over_fixed']:.3f} of its "
              "throughput (the means of the rounds).", ""]
    (RESULTS / f"{args.name}-cost.md").write_text("\n".join(lines))
    print("\n".join(lines))


P_MEAS, L_ADT = 60.0, 1.0  # Table 4.2: the recall's measurement period and how often it is read


def join(args) -> None:
    """M2 under recall requirements against the baselines (``--join``, module docstring)."""
    from runtime.run import run
    from runtime.spec import RunSpec

    rate, duration, unit = args.rate or 2000.0, args.duration or 180.0, args.unit
    recalls = [float(r) for r in args.recalls.split(",")]
    methods = args.methods.split(",")
    plugs = SmartPlugs(rate=rate)
    sources = {"plugs": plugs, "meters": HouseholdMeters(rate=400, plugs=plugs)}
    disorders = {"plugs": Disorder(max_delay=args.max_delay),
                 "meters": Disorder(max_delay=2 * args.max_delay, seed=7)}
    cache = Path(tempfile.gettempdir()) / (
        f"tandem-qddh-join-{rate:g}-{duration:g}-{unit:g}-{args.max_delay:g}")
    if not (cache / "complete").exists():
        shutil.rmtree(cache, ignore_errors=True)
        for name, source in sources.items():
            source.write_files(cache / name, duration, unit, disorder=disorders[name],
                               file_format="parquet")
        (cache / "complete").touch()
    readings = {name: pl.from_arrow(source.between(0, duration)).with_columns(
        pl.col("ts").dt.replace_time_zone(None)) for name, source in sources.items()}
    sql = REPOSITORY_QUERIES / "m2.sql"
    catalog = load_catalog(REPOSITORY_QUERIES / "catalog.toml")
    root = optimize(sql.read_text(), catalog, load_profile(profile_path(None))).logical.root
    true = reference.Evaluator(readings).result(root).group_by("window_end").len("true")
    configs = [(m, g) for m in methods for g in recalls] + [(b, None) for b in BASELINES]
    runs, started = {}, time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        for number, (method, recall) in enumerate(configs, 1):
            print(f"run {number}/{len(configs)}: {LABELS[method]}"
                  + (f" Γ {recall:g}" if recall is not None else "")
                  + f" ({time.perf_counter() - started:.0f} s so far)", flush=True)
            store = Path(scratch) / f"{method}-{recall}.duckdb"
            summary = run(RunSpec(str(sql), source=str(cache), files_per_batch=FILES_PER_BATCH,
                                  store=store, checkpoint=Path(scratch) / f"{method}-{recall}",
                                  name="m2", disorder=method, min_recall=recall or 0.99))
            with ColumnarStore(store) as columnar:
                produced = pl.from_arrow(columnar.con.sql(
                    "SELECT window_end, count(*) AS produced FROM q_m2.results "
                    "GROUP BY window_end").to_arrow_table())
                decisions = columnar.slack("m2")
            runs[(method, recall)] = (produced, decisions, summary)
    # γ(P_meas) every L_adt over the window_ends every run evaluated, from the second P_meas.
    last = min(p["window_end"].max() for p, _, _ in runs.values())
    first = true["window_end"].min() + timedelta(seconds=P_MEAS)
    measured_at = np.arange(seconds(first), seconds(last) + 1e-9, L_ADT)
    ends = true.filter(pl.col("window_end") <= last).sort("window_end")
    end_seconds = np.array([seconds(e) for e in ends["window_end"].to_list()])
    rows = []
    for (method, recall), (produced, decisions, summary) in runs.items():
        counts = ends.join(produced, on="window_end", how="left").fill_null(0)
        got, want = np.cumsum(counts["produced"].to_numpy()), np.cumsum(counts["true"].to_numpy())
        upto = np.searchsorted(end_seconds, measured_at, side="right") - 1
        since = np.searchsorted(end_seconds, measured_at - P_MEAS, side="right") - 1
        gamma = ((got[upto] - np.where(since >= 0, got[np.maximum(since, 0)], 0))
                 / (want[upto] - np.where(since >= 0, want[np.maximum(since, 0)], 0)))
        lag = np.max([latencies([d for d in decisions if d["stream"] == name], end_seconds,
                                unit) for name in sources], axis=0)
        measured = end_seconds >= seconds(first)
        targets = recalls if recall is None else [recall]
        rows.append({
            "method": method, "min_recall": recall,
            "phi": {str(g): float(np.mean(gamma >= g)) for g in targets},
            "phi_99": {str(g): float(np.mean(gamma >= 0.99 * g)) for g in targets},
            "recall_min": float(gamma.min()), "recall": float(got[-1] / want[-1]),
            "latency": float(np.nanmean(lag[measured])),
            "k": summary.slack["k_by_stream"] if summary.slack else None,
            "late": summary.quarantined.late, "tuples": summary.tuples,
            "wall_seconds": summary.wall_seconds,
            "decision_ms": [1e3 * d["seconds"] for d in decisions
                            if d["threshold"] is not None]})
    every = [ms for r in rows for ms in r["decision_ms"]]
    for r in rows:
        r["decision_ms"] = timings(r["decision_ms"]) if r["decision_ms"] else None
    report = {"rate": rate, "meters_rate": 400, "duration": duration, "unit": unit,
              "max_delay": {n: d.max_delay for n, d in disorders.items()},
              "tuples": sum(r.height for r in readings.values()),
              "measurements": len(measured_at), "seconds": time.perf_counter() - started,
              "runs": rows, "adaptation_ms": timings(every) if every else None}
    write_join(report, recalls, methods, args.name)


def write_join(report: dict, recalls: list[float], methods: list[str], name: str) -> None:
    """The report's Markdown, JSON and figure; ``--restate`` writes them again from the
    JSON, as the code words them now."""
    top = next(r for r in report["runs"] if r["method"] == "max")
    lines = [f"# Quality-driven disorder handling for a join between streams ({name})", "",
             f"`.venv/bin/python bench/qddh.py --join` — M2 over {report['tuples']:,} readings "
             f"(the plugs at {report['rate']:g} tuples/s, their meters at "
             f"{report['meters_rate']} a second) over {report['duration']:g} s, out of order by "
             f"up to {report['max_delay']['plugs']:g} s and {report['max_delay']['meters']:g} s, "
             f"landed in files of {report['unit']:g} s of arrival time; "
             f"{report['seconds'] / 60:.0f} min in all. γ(P_meas) read "
             f"{report['measurements']} times (every {L_ADT:g} s over the last {P_MEAS:g} s of "
             "window_ends, from the second minute). EqSel; AM-adt sizes one K for both "
             "streams (Same-K, kslack.manager.same_k) for the instant recall Γ' that makes up "
             "the last P_meas (Eq. 4.9, kslack.calibration), PD-adt each stream for Γ^{1/2} "
             "(kslack.manager.Recall).", "",
             "| K sized by | Γ | Φ(Γ) | Φ(.99Γ) | least γ | recall, whole run | latency (s) "
             "| vs Max-K-slack | K median plugs / meters (s) | late readings |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["runs"]:
        g = r["min_recall"]
        phis, phis_99 = (
            (f"{r['phi'][str(g)]:.3f}", f"{r['phi_99'][str(g)]:.3f}") if g is not None else
            (" / ".join(f"{r['phi'][str(x)]:.2f}" for x in recalls),
             " / ".join(f"{r['phi_99'][str(x)]:.2f}" for x in recalls)))
        ks = (" / ".join(f"{r['k'][s]['median']:.3f}" for s in ("plugs", "meters"))
              if r["k"] else "")
        lines.append(f"| {LABELS[r['method']]} | {g if g is not None else 'each'} | {phis} | "
                     f"{phis_99} | {r['recall_min']:.4f} | {r['recall']:.4f} | "
                     f"{r['latency']:.3f} | {against(r['latency'], top['latency'])} | {ks} | "
                     f"{r['late']:,} |")
    if report["adaptation_ms"]:
        a = report["adaptation_ms"]
        lines += ["", f"Adaptation: {a['decisions']:,} decisions, median {a['median']:.3f} ms, "
                  f"99th percentile {a['p99']:.3f} ms, at most {a['max']:.3f} ms; "
                  f"{a['over_1ms']:,} over 1 ms.", ""]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=1, default=str))
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4))
    for method in [*methods, *BASELINES]:
        runs = [r for r in report["runs"] if r["method"] == method]
        style = "--" if method in BASELINES else "o-"
        latency = [runs[0]["latency"]] * len(recalls) if method in BASELINES else [
            r["latency"] for r in runs]
        phi_99 = [runs[0]["phi_99"][str(g)] for g in recalls] if method in BASELINES else [
            r["phi_99"][str(r["min_recall"])] for r in runs]
        axes[0].plot(recalls, latency, style, label=LABELS[method])
        axes[1].plot(recalls, phi_99, style, label=LABELS[method])
    axes[0].set_yscale("log")
    axes[0].set_ylabel("average latency (s)")
    axes[1].set_ylabel("Φ(.99Γ)")
    axes[1].axhline(0.97, color="grey", linewidth=0.8)
    for ax in axes:
        ax.set_xlabel("Γ")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=110)
    plt.close(fig)
    print("\n".join(lines))


def against(latency: float, top: float) -> str:
    """A latency against Max-K-slack's ``top``, in words."""
    change = round(100 * (1 - latency / top)) if top else 0
    return f"{change} % lower" if change > 0 else f"{-change} % higher" if change else "the same"


def timings(ms: list[float]) -> dict:
    """Decision times (ms): how many, their median, 99th percentile and largest, and how many
    took over 1 ms."""
    return {"decisions": len(ms), "median": statistics.median(ms),
            "p99": float(np.percentile(ms, 99)), "max": max(ms),
            "over_1ms": sum(m > 1 for m in ms)}


def write(report: dict, errors: list[float], methods: list[str], name: str) -> None:
    decisions = [ms for w in report["windows"].values() for r in w["runs"]
                 if r["method"] in ("am", "pd") for ms in r["decision_ms"] or ()]
    report["adaptation_ms"] = timings(decisions) if decisions else None
    for found in report["windows"].values():  # each run's timings, not every decision's
        for r in found["runs"]:
            if isinstance(r["decision_ms"], list):
                r["decision_ms"] = timings(r["decision_ms"]) if r["decision_ms"] else None
    lines = [f"# Quality-driven disorder handling ({name})", "",
             f"`.venv/bin/python bench/qddh.py` — {report['tuples']:,} readings at "
             f"{report['rate']:g} tuples/s over {report['duration']:g} s, out of order by up "
             f"to {report['max_delay']:g} s (workload/disorder.py), landed in files of "
             f"{report['unit']:g} s of arrival time, {report['files_per_batch']} a batch; "
             f"{report['seconds'] / 60:.0f} min in all.", "",
             "Latency: seconds after a window's end, in arrival time, that the file which let "
             "the watermark pass it ended. Φ(ε_thr): Eq. (4.10) at the run's own ε_thr (the "
             "baselines' at each ε_thr in the columns).", ""]
    for window, found in report["windows"].items():
        runs = found["runs"]
        top = next(r for r in runs if r["method"] == "max")
        lines += [f"## W = {window} s ({found['windows_measured']:,} windows measured)", "",
                  "| K sized by | ε_thr | Φ(ε_thr) | latency (s) | vs Max-K-slack | K median (s) "
                  "| K max (s) | late readings |", "|---|---|---|---|---|---|---|---|"]
        for r in runs:
            error = r["max_error"]
            phis = (f"{r['phi'][str(error)]:.3f}" if error is not None else
                    " / ".join(f"{r['phi'][str(e)]:.2f}" for e in errors))
            lines.append(f"| {LABELS[r['method']]} | {error if error is not None else 'each'} "
                         f"| {phis} | {r['latency']:.3f} | "
                         f"{against(r['latency'], top['latency'])} | {r['k_median']:.3f} | "
                         f"{r['k_max']:.3f} | {r['late']:,} |")
        lines.append("")
    if report["adaptation_ms"]:
        a = report["adaptation_ms"]
        lines += [f"Adaptation: {a['decisions']:,} decisions by AM-adt and PD-adt, median "
                  f"{a['median']:.3f} ms, 99th percentile {a['p99']:.3f} ms, at most "
                  f"{a['max']:.3f} ms; {a['over_1ms']:,} over 1 ms.", ""]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=1, default=str))
    figures(report, errors, methods, name)


def figures(report: dict, errors: list[float], methods: list[str], name: str) -> None:
    """Latency and Φ against ε_thr, one panel per window size (Ji's Fig. 4.11 and 4.12)."""
    for metric, ylabel, path in (("latency", "average latency (s)", f"{name}-latency.png"),
                                 ("phi", "Φ(ε_thr)", f"{name}-phi.png")):
        panels = list(report["windows"].items())
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
        for ax, (window, found) in zip(axes[0], panels, strict=True):
            for method in [*methods, *BASELINES]:
                runs = [r for r in found["runs"] if r["method"] == method]
                if method in BASELINES:
                    y = ([runs[0]["latency"]] * len(errors) if metric == "latency"
                         else [runs[0]["phi"][str(e)] for e in errors])
                    ax.plot(errors, y, "--", label=LABELS[method])
                else:
                    y = [r["latency"] if metric == "latency" else r["phi"][str(r["max_error"])]
                         for r in runs]
                    ax.plot([r["max_error"] for r in runs], y, "o-", label=LABELS[method])
            ax.set_xscale("log")
            ax.set_xlabel("ε_thr")
            ax.set_title(f"W = {window} s")
            if metric == "latency":
                ax.set_yscale("log")
            else:
                ax.axhline(0.95, color="grey", linewidth=0.8)
        axes[0][0].set_ylabel(ylabel)
        axes[0][-1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(RESULTS / path, dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
