"""What the Airflow plugin shows of a query: its SQL, the chosen plan as a tree with the engine
and costs of every operator, feasibility at the current rate, the last runs' throughput, and each
DB-op's DuckDB SQL with its EXPLAIN."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from pathlib import Path

from columnar.inspect import explain_fragment
from columnar.store import LOG_SCHEMA, QUARANTINE, ColumnarStore, StoreBusy, schema_name
from optimizer import load_catalog
from runtime import settings
from runtime.explain import explain
from runtime.microbatch import microbatch_name
from runtime.quality import Quality, slack_summary
from runtime.validation import VALIDATIONS


@dataclass
class PlanNode:
    id: str
    kind: str
    description: str
    engine: str
    costs: dict  # lambda_in, lambda_out, u of the physical operator that runs it (if any)
    inputs: list[PlanNode] = field(default_factory=list)


@dataclass
class Overview:
    query: str
    sql: str
    rate: float
    catalog: str
    feasible: bool
    bottleneck_cost: float
    utilization_cost: float
    plan: PlanNode
    db_ops: list[dict]  # id, members, sql, explain
    runs: list[dict]  # newest first
    runs_note: str = ""  # why there are none to show
    migrations: list[dict] = field(default_factory=list)  # newest first (runtime/migration.py)
    validations: list[dict] = field(default_factory=list)  # newest first (data_quality)
    quarantine: list[dict] = field(default_factory=list)  # rows per rule of the query's runs
    # The quality the query states, and K over its last run that sized one (slack_summary).
    quality: str = ""
    slack: dict | None = None


def queries() -> list[str]:
    return settings.query_names()


def overview(query: str, store: Path | None = None) -> Overview:
    explanation = explain(query)
    shown = explanation.to_json()
    physical = {member: op for op in shown["operators"] for member in op["members"]}
    nodes: dict[str, PlanNode] = {}
    for op in shown["logical_operators"]:  # post-order: inputs first
        cost = physical.get(op["id"], {})
        nodes[op["id"]] = PlanNode(
            op["id"], op["kind"], op["description"], op["engine"],
            {k: cost[k] for k in ("lambda_in", "lambda_out", "u") if k in cost},
            [nodes[i] for i in op["inputs"]])
    root = nodes[shown["logical_operators"][-1]["id"]]
    types = {c: t for s in load_catalog(explanation.catalog).streams.values()
             for c, t in s.columns.items()}
    db_ops = [{"id": f.id, "members": list(f.members), "sql": f.sql,
               "explain": explain_fragment(f, types)} for f in explanation.fragments]
    name = explanation.query.stem
    names = [name, microbatch_name(name)]
    runs, note = recent_runs(names, store or settings.store_path())
    migrations, _ = recent_runs([name], store or settings.store_path(), log="migrations")
    validations, quarantine = data_quality(names, store or settings.store_path())
    return Overview(name, explanation.query.read_text(), shown["rate"], str(explanation.catalog),
                    shown["feasible"], shown["bottleneck_cost"], shown["utilization_cost"], root,
                    db_ops, runs, note, migrations, validations, quarantine,
                    explanation.quality.describe(),
                    slack_of(name, explanation.quality, store or settings.store_path()))


def slack_of(name: str, quality: Quality, store: Path) -> dict | None:
    """K over the query's run in the store, where it sized a K-slack buffer."""
    if not store.is_file():
        return None
    try:
        columnar = ColumnarStore(store, read_only=True)
    except StoreBusy:
        return None
    with columnar:
        decisions = columnar.slack(name)
    return slack_summary(quality, decisions) if decisions else None


def recent_runs(names: list[str], store: Path, limit: int = 10,
                log: str = "runs") -> tuple[list[dict], str]:
    """The newest runs (or rows of another log) of any of ``names``, or none and the reason."""
    if not store.is_file():
        return [], f"no runs yet ({store} does not exist)"
    try:
        columnar = ColumnarStore(store, read_only=True)
    except StoreBusy as busy:  # it names the run
        return [], str(busy)
    with columnar:
        runs = [run for name in names for run in columnar.recent(log, name, limit)]
    runs.sort(key=lambda r: r["logged_at"], reverse=True)
    return runs[:limit], "" if runs else "no runs yet"


def data_quality(names: list[str], store: Path, limit: int = 12) -> tuple[list[dict], list[dict]]:
    """Great Expectations' newest verdicts on the landed files and on the results of ``names``
    (one row per file or table: rows checked and the expectations that failed), and the
    quarantined rows of the runs of ``names`` per rule."""
    if not store.is_file():
        return [], []
    try:
        columnar = ColumnarStore(store, read_only=True)
    except StoreBusy:
        return [], []
    tables = [f"{schema_name(n)}.results" for n in names]
    with columnar:
        validations = columnar.query(
            "SELECT max(validated_at) AS validated_at, suite, target, max(checked) AS rows, "
            "string_agg(CASE WHEN NOT success THEN expectation || ': ' || unexpected END, '; ' "
            "ORDER BY expectation) AS failed FROM tandem_log.validations "
            "WHERE suite = 'tandem_input' OR target IN (SELECT unnest(?)) "
            "GROUP BY suite, target ORDER BY validated_at DESC, target DESC LIMIT ?",
            [tables, limit]) if columnar.logged(VALIDATIONS) else []
        quarantine = columnar.query(
            f"SELECT query AS runs, rule, count(*) AS rows FROM {LOG_SCHEMA}.{QUARANTINE} "
            "WHERE query IN (SELECT unnest(?)) GROUP BY query, rule "
            "ORDER BY list_position(?, query), rows DESC", [names, names]
        ) if columnar.logged(QUARANTINE) else []
    for v in validations:
        v["target"] = Path(v["target"]).name if v["suite"] == "tandem_input" else v["target"]
    return validations, quarantine


COLOURS = ("#0b6bcb", "#c2410c", "#15803d", "#7e22ce")  # a line per stream


def k_over_time(slack: dict) -> str:
    """K against each stream's high-water mark, as an inline SVG line per stream."""
    lines = {name: [(datetime.fromisoformat(t).timestamp(), k) for t, k in points if t]
             for name, points in slack["k_over_time"].items()}
    every = [p for points in lines.values() for p in points]
    if len(every) < 2:
        return ""
    width, height, pad = 640, 160, 30
    t0, t1 = min(t for t, _ in every), max(t for t, _ in every)
    top = max(k for _, k in every) or 1.0
    drawn, legend = [], []
    for i, (name, points) in enumerate(lines.items()):
        colour = COLOURS[i % len(COLOURS)]
        xy = " ".join(f"{pad + (t - t0) / ((t1 - t0) or 1) * (width - 2 * pad):.1f},"
                      f"{height - pad - k / top * (height - 2 * pad):.1f}" for t, k in points)
        drawn.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{xy}"/>')
        if len(lines) > 1:
            legend.append(f'<text x="{width - pad - 80}" y="{pad + 12 * i}" font-size="11" '
                          f'fill="{colour}">{escape(name)}</text>')
    return (f'<svg class="k-over-time" width="{width}" height="{height}" role="img" '
            f'aria-label="K over the run">{"".join(drawn)}{"".join(legend)}'
            f'<text x="2" y="{pad}" font-size="11">{top:.3g} s</text>'
            f'<text x="2" y="{height - pad}" font-size="11">0</text>'
            f'<text x="{pad}" y="{height - 8}" font-size="11">K (s) over the streams\' event '
            f"time, {slack['decisions']:,} decisions</text></svg>")
