"""The benchmark's report: bench/results/<date>/report.md with its figures, and bench.json."""

from __future__ import annotations

import json
import shutil
import time
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from benchmarking.bench import (  # noqa: E402
    CHOICE,
    DUCKDB,
    NO_FEASIBILITY,
    PIPELINED,
    PRECISION,
    QUERIES,
    ROLES,
    SPARK,
    Measured,
    Point,
    accuracy,
    bracket_text,
    grid,
    max_rate,
    prediction_share,
    predictions,
    ranked_points,
    summary,
)
from benchmarking.speed import sentence as speed_sentence  # noqa: E402

# The exact Spark designs tried for the pure-Spark plan (rowstream.dsps.SPARK_DESIGNS).
SPARK_DESIGNS = {
    "built-in": "Spark's own stateful operators (rowstream/dsps.py): windowed aggregates as "
    "groupBy(window(ts, W, beta)) in append mode, which expands every tuple to its W/beta "
    "windows; joins as stream-stream joins on the window's end, a windowed stream's rows "
    "joined by a time interval (each kept once in the join state). The optimiser's hybrid "
    "plans use these.",
    "panes": "as built-in, but a windowed aggregate of COUNT/SUM/AVG/MIN/MAX first aggregates "
    "each slide (a pane, Li et al. 2005) and then combines a window's W/beta panes: each pane, "
    "not each tuple, is expanded to its windows.",
    "buckets": "the whole plan as one transformWithStateInPandas operator (rowstream/"
    "buckets.py): rows hashed to buckets by the keys every operator groups and joins on, each "
    "bucket's window rows (after the predicates every window applies, only the columns the "
    "plan reads) kept once in Spark's RocksDB state store in Arrow chunks (cached in the "
    "Python worker, checked by a stamp in the chunk's key), and every completed "
    "window_end evaluated with polars over the bucket, one Python call per bucket and "
    "micro-batch.",
    "expert-numpy": "not a product design: Q1 and Q2 as an expert writes them by hand "
    "(bench/handwritten/spark_numpy.py), the yardstick the product's designs must match: "
    "applyInPandasWithState over 16 buckets of plugs, each bucket's window as numpy arrays in "
    "the state store, the window's maximum (or average) per plug from a plug x second matrix "
    "by a vectorised sliding maximum, and one bincount per window_end.",
}

STYLE = {SPARK: ("tab:orange", "s"), DUCKDB: ("tab:olive", "^"), CHOICE: ("tab:blue", "o"),
         NO_FEASIBILITY: ("tab:purple", "x"), PIPELINED: ("tab:cyan", "+")}


def _cell(m: Measured) -> str:
    if m.failed:
        return "failed" if m.carried_from is None else f"(failed at {m.carried_from:,.0f})"
    if m.capacity is None:
        return "–"
    text = f"{m.capacity:,.0f}"
    if m.bound:
        text = f"< {text}"
    if m.carried_from is not None:
        text = f"({text} at {m.carried_from:,.0f})"
    return f"**{text}**" if CHOICE in m.roles else text


def _role_name(m: Measured) -> str:
    return " / ".join(r for r in m.roles if r in ROLES) or _key(m)


def write(points: list[Point], out_dir: Path, command: str, calibration: str,
          minutes: float, spark_design: str, latest: bool = True, speed: dict | None = None
          ) -> Path:
    """The report in ``out_dir``; ``latest``: its figures also become the results directory's
    bench.json (not when an old run's report is written again); ``speed``: the speed probe's
    ``benchmarking.speed.record``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    queries = [q for q in QUERIES if any(p.query == q for p in points)]
    data = write_json(points, out_dir / "bench.json", command, calibration, minutes, spark_design,
                      speed)
    if latest:
        latest_json = out_dir.parent / "bench.json"
        before = json.loads(latest_json.read_text()) if latest_json.exists() else {}
        # bench/peers/ and bench/gateways.py measure for hours and add their figures here (the
        # peers', the DuckDB-alone limits): a sweep must not drop them.
        added = {k: before[k] for k in ("peers", "limits") if before.get(k)}
        latest_json.write_text(json.dumps(data | added, indent=1) + "\n")
    kept = out_dir / "profile.toml"  # the unit costs the predictions and choices came from
    if Path(calibration).is_file() and not (kept.exists() and kept.samefile(calibration)):
        shutil.copy(calibration, kept)

    within, total = prediction_share(points)
    lines = [f"# Capacity against arrival rate: hybrid against pure plans ({time.strftime('%Y-%m-%d')})",
             "", f"Measured with `{command}` in {minutes:.0f} min on this 2-core machine, "
             f"profile: {calibration}. Capacity = tuples / wall seconds over the measured "
             "1-second micro-batches (docs/design.md, Benchmarks), after the windows were filled with the "
             "largest window's span of event time at the rate. **Bold**: the optimiser's "
             "choice; `< x`: the plan could not even warm up at the rate (an upper bound); "
             "`(x at r)`: not measured again, infeasible at the lower rate r already; `failed`: "
             "the run stopped with the error the failures section quotes.", "",
             *([speed_sentence(speed), ""] if speed else []),
             "## Headline", "",
             "| query | max rate: optimiser | pure-Spark | pure-DuckDB | without feasibility "
             "| with Ji's C_b check | optimiser / pure-Spark | optimiser / pure-DuckDB |",
             "|---|---|---|---|---|---|---|---|"]
    for q in queries:
        s = data["queries"][q]
        r = s["max_rate"]
        lines.append(f"| {q.upper()} | {r[CHOICE]:,.0f} | {r[SPARK]:,.0f} | {r[DUCKDB]:,.0f} | "
                     f"{r[NO_FEASIBILITY]:,.0f} | {r[PIPELINED]:,.0f} | "
                     f"{_fmt(s['ratio_vs_spark'])} | "
                     f"{_fmt(s['ratio_vs_duckdb'])} |")
    lines += ["", f"Optimiser accuracy (chosen plan within 10 % of the best measured): "
              f"**{accuracy(points):.0%}** of {len(grid(points))} (query, rate) points; "
              f"{_ranked(points)}. "
              f"Predicted capacity within 1.5x of measured: **{within} of {total}** measured "
              "(plan, rate) points. A max rate of 0 means not even the lowest rate, and its "
              "ratio is blank. Bisection narrowed the max rates of the optimiser, pure-Spark and "
              f"pure-DuckDB to within {PRECISION - 1:.0%} where the grid brackets them (the "
              "bisection section below); the ratios of capacities at the highest rate where both "
              "plans were measured are:", ""]
    for q in queries:
        s = data["queries"][q]
        lines.append(f"- {q.upper()}: optimiser / pure-Spark {_fmt(s['capacity_ratio_vs_spark'])}"
                     f" at {s['capacity_ratio_rate_vs_spark']:,.0f} tuples/s, optimiser / "
                     f"pure-DuckDB {_fmt(s['capacity_ratio_vs_duckdb'])} at "
                     f"{s['capacity_ratio_rate_vs_duckdb']:,.0f} tuples/s.")
    targets = out_dir.parent / "targets.toml"  # the project's, beside the results
    if targets.exists():
        lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
        lines += [f"| {t} | {m} | {'yes' if ok else '**no**'} |"
                  for t, m, ok in _targets(data, tomllib.loads(targets.read_text())["target"])]
    failures = [(p, m) for p in points for m in p.plans if m.failed and m.carried_from is None]
    if failures:
        lines += ["", "## Failures", ""] + [
            f"- {p.query.upper()} at {p.rate:,.0f} tuples/s, {_role_name(m)}: {m.failed}"
            for p, m in failures]
    lines += _flink(out_dir.parent / "bench.json", queries)
    notes = out_dir / "notes.md"
    if notes.exists():  # written by hand after the run: the gaps' causes, what would close them
        lines += ["", notes.read_text().strip()]

    for q in queries:
        mine = [p for p in grid(points) if p.query == q]
        names = _plan_names(mine)
        lines += ["", f"## {q.upper()}", "", f"![{q}]({q}.png)", "",
                  "| rate | " + " | ".join(names) + " | optimiser's choice |",
                  "|---" * (len(names) + 2) + "|"]
        for p in mine:
            by_name = {_key(m): m for m in p.plans}
            cells = [_cell(by_name[n]) if n in by_name else "" for n in names]
            lines.append(f"| {p.rate:,.0f} | " + " | ".join(cells)
                         + f" | {_in_duckdb(p.role(CHOICE).placement)} |")
        _figure(mine, names, out_dir / f"{q}.png")

    probes = [p for p in points if p.probe]
    if probes:
        lines += ["", "## Bisection", "", "Each step measured one role's plan between the "
                  "largest rate it kept up with and the smallest it fell behind at.", "",
                  "| query | role | rate | capacity | kept up |", "|---|---|---|---|---|"]
        lines += [f"| {p.query.upper()} | {_role_name(m)} | {p.rate:,.0f} | {_cell(m)} | "
                  f"{'yes' if m.feasible else 'no'} |" for p in probes for m in p.plans]
    lines += ["", "## The pure-Spark plan", "",
              f"pure-Spark ran as **{spark_design}**. The exact designs tried (each gives the "
              "reference's rows, tests/test_run.py):", ""]
    lines += [f"- **{name}**: {text}" for name, text in SPARK_DESIGNS.items()]
    designs = out_dir / "spark_designs.md"
    if designs.exists():  # bench/spark_designs.py's comparison of that day
        lines += ["", designs.read_text().split("\n", 2)[2].strip()]
    lines += ["", "## Feasibility ablation (Fig. 6.8)", "",
              "Maximum sustainable rate of the optimiser's choice with the feasibility check of "
              "Definition 6.1, without it (C_u alone), and with Ji's check on the busiest "
              "operator (C_b) instead of the calibrated profile's on the wall time of the MIG's "
              "pipeline, max(A, E) + σ · min(A, E) over its job (A) and its evaluation thread "
              "(E) (docs/optimizer.md). Feasible plans rank by C_u with or without the check, "
              "so the first two differ only where the check finds the plan of least C_u "
              "infeasible.", "",
              "![ablation](ablation.png)", ""]
    _ablation(points, queries, out_dir / "ablation.png")
    lines += ["## Predicted against measured capacity", "",
              "The cost model's capacity of a plan is the rate over its load: the MIG's job and "
              "evaluation thread overlapped as the calibrated profile's σ says (with σ = 1, "
              "C_u of Eq. 6.6). Upper "
              "bounds and carried figures are left out, and so is pure-Spark when it runs a "
              "design other than Spark's built-in operators, the only Spark operators the "
              "optimiser places and the cost model prices.", "", "![prediction](prediction.png)",
              "", "| query | rate | plan | predicted | measured | measured / predicted |",
              "|---|---|---|---|---|---|"]
    for p, m in predictions(points):
        lines.append(f"| {p.query.upper()} | {p.rate:,.0f} | {_role_name(m)} | "
                     f"{m.predicted:,.0f} | {m.capacity:,.0f} | {m.capacity / m.predicted:.2f} |")
    _prediction(points, out_dir / "prediction.png")
    report = out_dir / "report.md"
    report.write_text("\n".join(lines) + "\n")
    return report


def write_json(points: list[Point], path: Path, command: str, calibration: str, minutes: float,
               spark_design: str, speed: dict | None = None) -> dict:
    """The figures for scripts (``bench.summary``) and how they were measured."""
    data = summary(points) | {"command": command, "minutes": round(minutes, 1),
                              "profile": calibration, "spark_design": spark_design,
                              "speed": speed}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def _targets(data: dict, targets: list[dict]) -> list[tuple[str, str, bool]]:
    """(target, measured figure, met) for the ``targets`` whose figures a bench run has. A
    target names a ``figure``: ``ratio_vs_spark`` or ``ratio_vs_duckdb`` (the optimiser's
    maximum sustainable rate over a pure plan's) or ``max_rate`` of its ``queries``, or one of
    the run's ``overall`` figures; it is met at ``at_least``."""
    out = []
    for target in targets:
        figure, least = target["figure"], target["at_least"]
        says = f"{target['says']} ({target['why']})" if "why" in target else target["says"]
        for q in target.get("queries", []):
            s = data["queries"].get(q)
            if s is None:
                continue
            rate = s["max_rate"][CHOICE]
            if figure == "max_rate":
                out.append((says.format(query=q.upper()), f"{rate:,.0f}", rate >= least))
                continue
            role = {"ratio_vs_spark": SPARK, "ratio_vs_duckdb": DUCKDB}[figure]
            ratio, theirs = s[figure], s["max_rate"][role]
            out.append((says.format(query=q.upper()), f"{rate:,.0f} / " + (
                f"{theirs:,.0f} = {ratio:.1f}x" if ratio else
                "none (it kept up with no rate measured)"), bool(ratio and ratio >= least)))
        if "queries" not in target:
            value = data["overall"][figure]
            shown = ("–" if value is None else f"{value:.0%}" + (
                f" of {data['overall']['prediction_points']}"
                if figure == "prediction_within_1_5x" else ""))
            out.append((says, shown, value is not None and value >= least))
    return out


def _flink(path: Path, queries: list[str]) -> list[str]:
    """Flink SQL's maximum rates beside Tandem's, from bench/peers/flink.py's search (its
    ``peers.flink`` in ``path``), for this run's queries. Its ratios are the search's, not this
    sweep's: a ratio across runs of a noisy machine would not be honest."""
    peer = (json.loads(path.read_text()) if path.exists() else {}).get("peers", {}).get("flink", {})
    rows = [(q, peer[q]) for q in queries if peer.get(q, {}).get("max_rate")]
    if not rows:
        return []
    lines = ["", "## Flink SQL", "", "From `bench/peers/flink.py` (`flink.md` says when each "
             "step was taken): each system's maximum sustainable rate over the same events, the "
             "largest kept up with and the smallest fallen behind at; Flink's is the best of its "
             "formulations, from CSV files; Tandem's from CSV and Parquet files.", "",
             "| query | Flink (formulation) | Tandem (CSV) | Tandem (Parquet) | CSV / Flink | "
             "best / Flink |", "|---|---|---|---|---|---|"]
    for q, entry in rows:
        tandem = entry["tandem"]
        lines.append(f"| {q.upper()} | {bracket_text(entry['max_rate'])} "
                     f"({entry['formulation']}) | {bracket_text(tandem.get('tandem'))} | "
                     f"{bracket_text(tandem.get('tandem-parquet'))} | "
                     f"{_fmt(entry['ratio']['csv'])} | {_fmt(entry['ratio']['best'])} |")
    return lines


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}x"


def _ranked(points: list[Point]) -> str:
    accurate, ranked = ranked_points(points)
    if not ranked:
        return "at none of them did more than one plan keep up"
    return (f"at {accurate} of the {ranked} where more than one plan kept up (there the "
            "choice is a ranking)")


def _in_duckdb(placement: dict[str, str]) -> str:
    duck = [op for op, e in placement.items() if e == "duckdb"]
    if not duck:
        return "all in Spark"
    if len(duck) == len(placement):
        return "all in DuckDB"
    return "DuckDB: " + ", ".join(duck)


def _key(m: Measured) -> str:
    roles = [r for r in ROLES if r in m.roles]
    if roles:
        return roles[0]
    kind = "rival" if any(r.startswith("rival") for r in m.roles) else "other"
    return f"{kind} ({_in_duckdb(m.placement)})"


def _plan_names(points: list[Point]) -> list[str]:
    names = list(ROLES)
    for p in points:
        for m in p.plans:
            if _key(m) not in names:
                names.append(_key(m))
    # A role always shares a placement with a role before it at some point: keep the columns
    # that hold a figure.
    return [n for n in names if any(_key(m) == n for p in points for m in p.plans)]


def _figure(points: list[Point], names: list[str], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    rates = [p.rate for p in points]
    for name in names:
        xs, ys = [], []
        for p in points:
            m = next((m for m in p.plans if name in m.roles or _key(m) == name), None)
            if m and m.capacity and m.carried_from is None:
                xs.append(p.rate)
                ys.append(m.capacity)
        color, marker = STYLE.get(name, ("tab:gray", "."))
        ax.plot(xs, ys, marker=marker, color=color, label=name,
                linewidth=2 if name == CHOICE else 1, alpha=1 if name in STYLE else 0.5)
    ax.plot(rates, rates, "k--", linewidth=0.8, label="capacity = rate")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arrival rate (tuples/s)")
    ax.set_ylabel("capacity (tuples/s)")
    ax.set_title(f"{points[0].query.upper()}: capacity against rate (1-s micro-batches)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside, not over
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ablation(points: list[Point], queries: list[str], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.27
    labels = {CHOICE: "feasibility check (calibrated load)", NO_FEASIBILITY: "without it",
              PIPELINED: "Ji's check (C_b)"}
    for i, (role, label) in enumerate(labels.items()):
        values = [max_rate([p for p in grid(points) if p.query == q], role) for q in queries]
        ax.bar([k + (i - 1) * width for k in range(len(queries))], values, width,
               label=label, color=STYLE[role][0])
    ax.set_xticks(range(len(queries)), [q.upper() for q in queries])
    ax.set_ylabel("max sustainable rate (tuples/s)")
    ax.set_title("Feasibility ablation (Fig. 6.8)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _prediction(points: list[Point], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 5))
    pairs = [(m.predicted, m.capacity) for _, m in predictions(points)]
    if pairs:
        xs, ys = zip(*pairs, strict=True)
        ax.scatter(xs, ys, s=14)
        low, high = min(xs + ys), max(xs + ys)
        ax.plot([low, high], [low, high], "k--", linewidth=0.8)
        ax.plot([low, high], [low * 1.5, high * 1.5], "k:", linewidth=0.6)
        ax.plot([low, high], [low / 1.5, high / 1.5], "k:", linewidth=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("predicted capacity (tuples/s)")
    ax.set_ylabel("measured capacity (tuples/s)")
    ax.set_title("Cost model: predicted against measured")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
