"""The "Tandem" page in Airflow's navigation: for every query its SQL, the chosen plan as a tree
with the engine and costs of every operator, feasibility at the current rate, the last runs'
throughput and each DB-op's DuckDB SQL with its EXPLAIN; and a read-only SQL console over the
DuckDB store.

Airflow mounts a plugin's FastAPI app without its own authentication, so every route here
depends on Airflow's: the JWT of a logged-in user, from the UI's cookie or a bearer header."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from html import escape

from airflow.api_fastapi.core_api.security import requires_authenticated
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airflow_tandem.inspection import Overview, PlanNode, k_over_time, overview, queries
from columnar.inspect import ROW_LIMIT, Refused, read_only_query
from optimizer.errors import TandemError
from optimizer.migration import moved
from runtime import settings

TABLES = ("SELECT schema_name AS schema, table_name AS table, estimated_size AS rows "
          "FROM duckdb_tables() ORDER BY ALL")

app = FastAPI(title="Tandem", dependencies=[Depends(requires_authenticated())])

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1f2933; background: #f7f8fa; }
nav { padding: 12px 20px; background: #fff; border-bottom: 1px solid #dde1e6; }
nav a { margin-right: 14px; text-decoration: none; color: #1c64f2; font-weight: 600; }
nav a.current { color: #1f2933; border-bottom: 2px solid #1f2933; }
main { padding: 8px 20px 40px; max-width: 1200px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 6px; padding: 12px 16px;
          margin: 14px 0; }
h2 { font-size: 1.05rem; margin: 0 0 8px; }
pre { background: #f1f3f5; padding: 10px; overflow-x: auto; font-size: 0.82rem; }
ul.plan, ul.plan ul { list-style: none; padding-left: 22px; border-left: 1px dashed #c5cbd3; }
ul.plan { border-left: none; padding-left: 0; }
.op { display: inline-block; margin: 3px 0; }
.engine { font-size: 0.72rem; font-weight: 700; padding: 1px 6px; border-radius: 9px;
          margin-right: 6px; text-transform: uppercase; }
.engine-spark { background: #fde8d7; color: #a04100; }
.engine-duckdb { background: #fff4c2; color: #6b5500; }
.engine-duckdb-partitioned { background: #dcf5e3; color: #1c6b35; }
.engine-split { background: linear-gradient(90deg, #fde8d7 50%, #fff4c2 50%); color: #6b3a00; }
.engine-source { background: #e4e7eb; color: #3e4c59; }
.costs { color: #616e7c; font-size: 0.78rem; margin-left: 8px; }
.feasible { color: #0e7a3a; font-weight: 700; } .infeasible { color: #b42318; font-weight: 700; }
table { border-collapse: collapse; font-size: 0.85rem; }
td, th { border: 1px solid #dde1e6; padding: 3px 8px; text-align: left; }
.refusal { background: #fdecea; color: #b42318; padding: 8px 12px; border-radius: 4px; }
textarea { width: 100%; font-family: monospace; }
"""


def _number(x: float) -> str:
    return f"{x:,.4g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _tree(node: PlanNode) -> str:
    engine = "source" if node.kind == "window" else node.engine
    costs = "".join(f" {k} = {_number(v)}" for k, v in node.costs.items())
    children = "".join(_tree(c) for c in node.inputs)
    return (f'<li><span class="op" data-operator="{escape(node.id)}">'
            f'<span class="engine engine-{engine}">{escape(engine)}</span>'
            f"<b>{escape(node.id)}</b> {escape(node.description)}"
            f'<span class="costs">{escape(costs)}</span></span>'
            + (f"<ul>{children}</ul>" if children else "") + "</li>")


def _table(columns: list[str], rows: list) -> str:
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _engines(placement: str | None) -> str:
    """A placement (JSON, operator -> engine) as its engines' counts."""
    engines = list(json.loads(placement or "{}").values())
    return ", ".join(f"{engines.count(e)} {e}" for e in sorted(set(engines))) or "-"


def _seconds(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f}"


def _disorder(o: Overview) -> str:
    """The quality the query states, and K over its last run that sized a buffer."""
    text = f"<p>Result quality: {escape(o.quality)}.</p>"
    slack = o.slack
    if slack is None:
        return text + ("<p>No run has sized a K-slack buffer yet: <code>tandem run --source "
                       "DIR --placement duckdb --max-error 0.01</code> sizes one.</p>")
    k, timing = slack["k"], slack["decision_ms"]
    rows = [("K (s): first, median, last, largest",
             f"{k['first']:.3g}, {k['median']:.3g}, {k['last']:.3g}, {k['max']:.3g}"),
            ("decision time (ms): median, largest",
             f"{timing['median']:.3f}, {timing['max']:.3f}")]
    if slack["threshold"] is not None:
        of = ("coverage threshold (Eq. 4.1)" if slack.get("min_recall") is None
              else "instant recall Γ′ (Eq. 4.9), last" if slack["disorder"] == "am"
              else "share each stream admits (Γ^{1/m})")
        rows.append((of, f"{slack['threshold']:.5f}"))
    if slack["measured_coverage"] is not None:
        rows.append(("coverage measured (Alg. 4.3), median", f"{slack['measured_coverage']:.5f}"))
    return (text + f"<p>The last run: {escape(slack['quality'])}.</p>"
            + _table(["", ""], rows) + k_over_time(slack))


def _overview(o: Overview) -> str:
    state = ('<span class="feasible">feasible</span>' if o.feasible
             else '<span class="infeasible">not feasible</span>')
    runs = (_table(["logged at (UTC)", "plan", "placement", "source", "tuples", "wall s",
                    "tuples/s", "result rows"],
                   [(r["logged_at"], r["query"], _engines(r["placement"]), r["source"],
                     f"{r['tuples']:,}", f"{r['wall_seconds']:.1f}", f"{r['throughput']:,.0f}",
                     f"{r['result_rows']:,}") for r in o.runs])
            if o.runs else f"<p>{escape(o.runs_note)}</p>")
    migrations = (_table(
        ["logged at (UTC)", "migration", "strategy", "moved", "reason", "duration s",
         "output silence s", "event time read again s", "tables taken over"],
        [(m["logged_at"], m["number"], m["strategy"], moved(json.loads(m["old"]), json.loads(m["new"])), m["reason"],
          _seconds(m["duration_seconds"]), _seconds(m["silence_seconds"]),
          f"{m['replayed_seconds']:g}", ", ".join(json.loads(m["taken"])) or "none")
         for m in o.migrations])
        if o.migrations else "<p>No migration yet: <code>tandem run --adaptive</code> migrates "
        "a running query's plan when the statistics call for it.</p>")
    checked = (_table(["validated at (UTC)", "suite", "file or table", "rows", "failed expectations"],
                      [(v["validated_at"], v["suite"], v["target"], f"{v['rows']:,}",
                        v["failed"] or "none") for v in o.validations])
               if o.validations else "<p>Nothing validated yet: the micro-batch DAG and "
               "<code>tandem validate</code> run Great Expectations.</p>")
    if o.quarantine:
        checked += "<h3>Quarantined by the runs</h3>" + _table(
            ["runs", "rule", "rows"], [(q["runs"], q["rule"], f"{q['rows']:,}")
                                       for q in o.quarantine])
    db_ops = "".join(
        f"<h3>{escape(d['id'])} <small>({escape(', '.join(d['members']))})</small></h3>"
        f"<pre class=\"duckdb-sql\">{escape(d['sql'])}</pre>"
        f"<details><summary>EXPLAIN</summary><pre>{escape(d['explain'])}</pre></details>"
        for d in o.db_ops) or "<p>This plan runs every operator in Spark.</p>"
    return f"""
<section><h2>SQL</h2><pre>{escape(o.sql)}</pre></section>
<section id="plan"><h2>Plan</h2>
<p>At {_number(o.rate)} tuples/s (catalog {escape(o.catalog)}): {state};
bottleneck cost {_number(o.bottleneck_cost)}, utilization cost {_number(o.utilization_cost)}.
Costs are per operator (a DB-op's members share its costs).</p>
<ul class="plan">{_tree(o.plan)}</ul></section>
<section><h2>Last runs</h2>{runs}</section>
<section id="disorder"><h2>Disorder handling</h2>{_disorder(o)}</section>
<section id="migrations"><h2>Plan migrations</h2>{migrations}</section>
<section id="validations"><h2>Great Expectations</h2>{checked}</section>
<section><h2>DuckDB SQL of the DB-ops</h2>{db_ops}</section>"""


def _page(query: str, body: str, sql: str = "", answer: str = "") -> HTMLResponse:
    links = "".join(f'<a href="?query={q}" class="{"current" if q == query else ""}">{q}</a>'
                    for q in queries())
    console = f"""
<section id="console"><h2>SQL console (read-only, {escape(str(settings.store_path()))})</h2>
<form method="get" action="console">
<input type="hidden" name="query" value="{escape(query)}">
<textarea name="sql" rows="4">{escape(sql or "SELECT * FROM duckdb_tables()")}</textarea>
<p><button type="submit">Run</button> at most {ROW_LIMIT} rows</p></form>{answer}</section>"""
    return HTMLResponse(f"""<!doctype html><html><head><meta charset="utf-8">
<title>Tandem · {escape(query)}</title><style>{STYLE}</style></head>
<body><nav>{links}</nav><main>{body}{console}</main></body></html>""")


def _query(query: str | None) -> str:
    known = queries()
    if query is None:
        return "q1" if "q1" in known else known[0]
    if query not in known:
        raise HTTPException(404, f"no query {query!r}: give one of {', '.join(known)}")
    return query


@app.get("/", response_class=HTMLResponse)
def page(query: str | None = None) -> HTMLResponse:
    query = _query(query)
    try:
        body = _overview(overview(query))
    except TandemError as err:
        body = f'<p class="refusal">{escape(str(err))}</p>'
    return _page(query, body)


@app.get("/console", response_class=HTMLResponse)
def console(sql: str, query: str | None = None) -> HTMLResponse:
    query = _query(query)
    try:
        answer = read_only_query(settings.store_path(), sql)
        shown = _table(answer.columns, answer.rows) + (
            f"<p>first {ROW_LIMIT} rows shown</p>" if answer.truncated else "")
    except Refused as refusal:
        shown = f'<p class="refusal">Refused: {escape(str(refusal))}</p>'
    try:
        tables = read_only_query(settings.store_path(), TABLES)
        listing = _table(tables.columns, tables.rows)
    except Refused as refusal:
        listing = f"<p>{escape(str(refusal))}</p>"
    return _page(query, f'<section><p><a href="./?query={query}">← {query}</a></p>'
                 f"<h2>Tables of the store</h2>{listing}</section>", sql, shown)


@app.get("/api/queries/{query}")
def query_json(query: str) -> dict:
    """The page's content as JSON, for scripts."""
    return asdict(overview(_query(query)))


class TandemPlugin(AirflowPlugin):
    name = "tandem"
    fastapi_apps = [{"app": app, "url_prefix": "/tandem", "name": "Tandem"}]
    external_views = [{"name": "Tandem", "href": "tandem/", "destination": "nav",
                       "url_route": "tandem", "nav_top_level": True}]
