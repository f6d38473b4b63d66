"""The CLI as a user runs it: `tandem explain` (readable text, and JSON with the keys of
docs/design.md), `tandem generate`, `tandem run`, `tandem results` and `tandem verify`."""

from __future__ import annotations

import io
import json
import logging
import re

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from optimizer import load_profile
from runtime import settings
from tandem.cli import app, engine_output_to
from tests.conftest import short
from tests.test_reference import assert_same_rows

runner = CliRunner()
DESIGN_KEYS = {"placement", "operators", "bottleneck_cost", "utilization_cost", "feasible",
               "plans_examined", "optimization_ms", "duckdb_sql"}


def test_what_the_engines_log_after_a_run_stays_off_the_terminal(tmp_path, capfd, monkeypatch):
    # Py4J's first logging.exception configures the root logger inside the run; its callback
    # thread logs again after the run, when the redirected stderr is closed.
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as a new CLI process has it
    log = tmp_path / "spark.log"
    with engine_output_to(log):
        logging.exception("Error while receiving.")
    logging.error("the JVM is gone")
    for handler in root.handlers:
        handler.close()
    assert capfd.readouterr().err == ""
    assert "the JVM is gone" in log.read_text()


def test_explain_json_has_the_contract_keys():
    result = runner.invoke(app, ["explain", "queries/q1.sql", "--rate", "20000", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert DESIGN_KEYS <= plan.keys()
    assert set(plan["placement"].values()) <= {"spark", "duckdb"}
    assert len(plan["placement"]) == 6
    for op in plan["operators"]:
        assert {"id", "kind", "engine", "lambda_in", "lambda_out", "u"} <= op.keys()
    # Without --exhaustive only the pruned search runs, and its pruning (Ji Sec. 6.3.4) examines
    # fewer plans than Q1's space of 188 (test_explain_text_shows_engines_costs_search_and_sql).
    examined = plan["plans_examined"]
    assert examined["exhaustive"] is None and 0 < examined["pruned"] < 188
    assert plan["bottleneck_cost"] == max(op["u"] for op in plan["operators"])
    db_ops = [op["id"] for op in plan["operators"] if op["kind"] == "db-op"]
    assert sorted(plan["duckdb_sql"]) == sorted(db_ops)
    assert plan["feasible"] is (plan["bottleneck_cost"] <= 1)


def test_explain_shares_the_costs_per_batch_among_its_files(tmp_path):
    """By reference, each cost of a micro-batch is shared by the files the batch takes: from one
    file a batch to four, the source's cost falls by Spark's control cost times 1 - 1/4, and
    Q5's DB-op's by its query's and its pane inserts' fixed costs times 1 - 1/4 (where each
    window_end of an evaluation costs the first one's work, ``further_end`` = 1), and nothing
    else of the plan changes."""
    path = settings.profile_path(None)
    text = re.sub(r"(?m)^further_end = .*\n", "", path.read_text())
    every_end = tmp_path / "every-end.toml"
    every_end.write_text(text.replace("[duckdb.query]", "[duckdb.query]\nfurther_end = 1.0", 1))

    def plan(profile, *args):
        result = runner.invoke(app, ["explain", "q5", "--rate", "1000000", "--placement",
                                     "duckdb", "--json", "--profile", str(profile), *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    one, four = plan(every_end, "--files-per-batch", "1"), plan(every_end)
    assert (one["crossing"], one["files_per_batch"], four["files_per_batch"]) == \
        ("reference", 1, 4)
    by_kind = {p["files_per_batch"]: {op["kind"]: op for op in p["operators"]}
               for p in (one, four)}
    profile = load_profile(every_end)
    fixed = {(e, f): profile.get(e, f, "per_call") / profile.micro_batch_seconds
             for e, f in (("spark", "control"), ("duckdb", "query"), ("duckdb", "panes"))}
    assert by_kind[1]["source"]["u"] - by_kind[4]["source"]["u"] == \
        pytest.approx(fixed["spark", "control"] * 3 / 4)
    assert by_kind[1]["db-op"]["u"] - by_kind[4]["db-op"]["u"] == \
        pytest.approx((fixed["duckdb", "query"] + fixed["duckdb", "panes"]) * 3 / 4)
    assert by_kind[1]["sink"] == by_kind[4]["sink"]


def test_generate_writes_a_landing_directory(tmp_path):
    result = runner.invoke(app, ["generate", str(tmp_path / "landing"), "--rate", "50",
                                 "--duration", "25", "--file-seconds", "10"])
    assert result.exit_code == 0, result.output
    files = sorted((tmp_path / "landing").glob("*.csv"))
    assert len(files) == 3
    assert sum(len(f.read_text().splitlines()) - 1 for f in files) == 50 * 25
    assert "--source" in result.output


def test_explain_text_shows_engines_costs_search_and_sql():
    result = runner.invoke(app, ["explain", "q1", "--rate", "20000", "--exhaustive"])
    assert result.exit_code == 0, result.output
    out = result.output
    for phrase in ("spark", "duckdb", "λin", "u ", "C_b", "C_u", "feasible", "state memory",
                   # Of Q1's 3^6 placements, 168 put duckdb-partitioned only where it can read
                   # and be read (optimizer/partitioning.py); 20 more split its MAX over
                   # Spark's selection.
                   "plans examined", "188 exhaustive, same plan", "optimisation time",
                   "DuckDB SQL", "WITH"):
        assert phrase in out


def test_exhaustive_and_placement_switches(tmp_path):
    pinned = runner.invoke(app, ["explain", "q3", "--placement", "join_1=spark", "--json",
                                 "--exhaustive", "--no-feasibility"])
    plan = json.loads(pinned.output)
    assert plan["placement"]["join_1"] == "spark"
    # join_1 pinned: 2^5 placements on two engines, 98 with duckdb-partitioned where it can run,
    # 128 with its two aggregates split where Spark's selections feed them
    assert plan["plans_examined"]["exhaustive"] == 128
    assert plan["exhaustive_agrees"] is True and plan["feasibility_check"] is False
    bad = runner.invoke(app, ["explain", "q3", "--placement", "join_9=spark"])
    assert bad.exit_code == 2 and "no operator 'join_9'" in bad.output


def test_memory_budget_can_make_a_plan_infeasible():
    ok = json.loads(runner.invoke(app, ["explain", "q1", "--json"]).output)
    tight = runner.invoke(app, ["explain", "q1", "--json", "--memory-budget", "1MB",
                                "--placement", "duckdb"])
    plan = json.loads(tight.output)
    assert plan["memory_bytes"] > 1e6 and plan["feasible"] is False and ok["feasible"] is True
    bad = runner.invoke(app, ["explain", "q1", "--memory-budget", "lots"])
    assert bad.exit_code == 2 and "--memory-budget" in bad.output


@pytest.mark.integration
def test_run_and_verify_report_what_they_did(tmp_path):
    store = tmp_path / "t.duckdb"
    ran = runner.invoke(app, ["run", short("q5"), "--placement", "duckdb", "--rate", "20",
                              "--duration", "60", "--batch", "30", "--store", str(store)])
    assert ran.exit_code == 0, ran.output
    said = " ".join(ran.output.split())  # rich wraps lines at the terminal's width
    assert "done: 1,200 tuples" in said and "0 quarantined rows" in said
    assert "(30.0 s of event time)" in said  # the last batch's work against its span
    assert "q_q5.results" in said and str(store) in "".join(ran.output.split())
    # The hint is a command that shows the latest windows, as the store holds them.
    assert f"tandem results q5 --store {store}" in "".join(ran.output.splitlines())
    shown = runner.invoke(app, ["results", "q5", "--store", str(store), "--windows", "2",
                                "--format", "csv"])
    assert shown.exit_code == 0, shown.output
    with duckdb.connect(str(store), read_only=True) as con:
        stored = pl.from_arrow(con.sql("SELECT * EXCLUDE (batch_id) FROM q_q5.results").to_arrow_table())
    ends = stored["window_end"].unique().sort()[-2:]
    want = stored.filter(pl.col("window_end").is_in(ends.implode()))
    got = pl.read_csv(io.StringIO(shown.stdout), try_parse_dates=True)
    assert want.height > 0 and got.height == want.height
    assert_same_rows(got.select(want.columns), want)
    # The sample holds the three uniform plans, Spark's with its aggregate split and the
    # optimiser's: asked for four, it holds those five.
    checked = runner.invoke(app, ["verify", short("q5"), "--placements", "4", "--parallel", "2",
                                  "--duration", "60"])
    assert checked.exit_code == 0, checked.output
    assert "5 placements: 5 same as the reference, 0 different" in " ".join(checked.output.split())
    assert "aggregate_1=x" in checked.output  # split
