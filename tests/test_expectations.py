"""The suites of rowstream/expectations.py: Great Expectations itself, the gateway's vectorised
twin and the SQL that DuckDB runs over files it reads by reference flag the same rows of every
class of bad input, the results suite finds planted problems in
result rows, and validating the landing directory keeps each file's verdict once."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from benchmarking import reference
from optimizer import optimize
from optimizer.keys import count_columns, result_keys
from rowstream.expectations import input_parameters, input_suite, results_suite
from rowstream.landing import landed_files, landed_frame, read_landed
from rowstream.suite_sql import Landed, identifier, rule
from runtime.settings import example_stream
from runtime.validation import (
    RESULTS_SUITE,
    first_failures,
    run_suite,
    validate_file,
    validate_landed,
)
from tests.bad_input import plant
from tests.conftest import QUERIES, query_sql
from workload.smart_plugs import SmartPlugs

TOPOLOGY = dict(houses=2, households_per_house=2, plugs=6)

PLUGS = example_stream("plugs")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    landing = tmp_path_factory.mktemp("landing")
    return landing, plant(landing, SmartPlugs(rate=3, **TOPOLOGY), 200, 50)


def sql_rules(path, schema) -> pl.Series | None:
    """The rule of each row of a landed file by the suite's SQL form (rowstream/suite_sql.py),
    over the landed frame as DuckDB scans it; None for a file that cannot be read."""
    try:
        frame = landed_frame(path, schema)
    except Exception:
        return None
    landed = Landed({c: identifier(c) for c in frame.columns},
                    frozenset(c for c, t in frame.schema.items() if t.is_float()))
    con = duckdb.connect()
    con.register("landed", frame.with_row_index("position").to_arrow())
    sql = rule(input_suite(schema), landed, input_parameters(frame, schema))
    return pl.from_arrow(con.sql(f"SELECT {sql} AS rule FROM landed ORDER BY position")
                         .to_arrow_table())["rule"]


def test_great_expectations_the_gateway_and_the_sql_flag_the_same_rows(planted):
    landing, expected = planted
    flagged = {}
    for name in landed_files(landing):
        by_gx, _ = validate_file(landing / name, PLUGS)
        by_gateway = read_landed(landing / name, PLUGS)
        assert by_gx.select("origin", "rule", "reason").equals(
            by_gateway.select("origin", "rule", "reason"))
        if (by_sql := sql_rules(landing / name, PLUGS)) is not None:
            assert by_sql.equals(by_gx["rule"], check_names=False)
        flagged |= dict(by_gx.filter(pl.col("rule").is_not_null())
                        .select("origin", "rule").iter_rows())
    # Lateness depends on the stream before the file: the gateway marks it, not the suite.
    assert flagged == {o: r for o, r in expected.rules.items() if r != "late"}


def test_every_class_is_planted(planted):
    _, expected = planted
    classes = {rule.split("(")[0] for rule in expected.rules.values()}
    assert classes == {"expect_column_values_to_be_in_set", "expect_column_values_to_not_be_null",
                       "expect_column_values_to_be_between", "expect_column_values_to_be_unique",
                       "late", "unreadable"}


def test_the_landing_quarantine_keeps_each_file_once(planted, tmp_path):
    landing, expected = planted
    store = tmp_path / "tandem.duckdb"
    first = validate_landed(landing, store)
    assert [f.file for f in first] == landed_files(landing)
    assert validate_landed(landing, store) == []  # nothing new
    again = validate_landed(landing, store, again=True)
    assert again == first
    con = duckdb.connect(str(store), read_only=True)
    quarantined = dict(con.sql("SELECT origin, rule FROM tandem_log.quarantine").fetchall())
    failed = con.sql("SELECT sum(unexpected) FROM tandem_log.validations "
                     "WHERE expectation LIKE 'expect_column_values_to_be_unique%'").fetchall()[0][0]
    con.close()
    assert quarantined == {o: r for o, r in expected.rules.items() if r != "late"}
    assert failed == 2  # both rows of the duplicated id


def test_result_keys_come_from_the_plans(catalog, profile):
    plug = ("house_id", "household_id", "plug_id", "window_end")
    keys = {q: result_keys(optimize(query_sql(q), catalog, profile).logical.root)
            for q in ("q1", "q2", "q3", "q4", "q5", "q6")}
    assert keys == {"q1": plug, "q2": plug, "q3": plug, "q4": plug, "q6": plug,
                    "q5": ("house_id", "household_id", "window_end")}
    assert count_columns(optimize(query_sql("q1"), catalog, profile).logical.root) == (
        "high_loads",)


def test_the_results_suite_passes_the_reference_and_finds_planted_problems(catalog, profile):
    root = optimize(query_sql("q1"), catalog, profile).logical.root
    stream = pl.from_arrow(SmartPlugs(rate=3, **TOPOLOGY).between(0, 400))
    rows = reference.Evaluator({"plugs": stream}).result(root).select(root.columns)
    suite = results_suite(result_keys(root), count_columns(root))
    assert all(o.success for o in run_suite(RESULTS_SUITE, suite, rows))

    spoiled = rows.head(3).with_columns(
        pl.Series("plug_id", [None, *rows["plug_id"][1:3]], pl.Int32),
        pl.Series("high_loads", [1, -2, 1], pl.Int64))
    failed = first_failures(run_suite(RESULTS_SUITE, suite, spoiled), 3)
    assert failed.to_list() == ["expect_column_values_to_not_be_null(plug_id)",
                                "expect_column_values_to_be_between(high_loads)", None]
    duplicated = pl.concat([rows.head(2), rows.head(1)])
    failed = first_failures(run_suite(RESULTS_SUITE, suite, duplicated), 3).to_list()
    assert failed == [f"expect_compound_columns_to_be_unique({', '.join(result_keys(root))})",
                      None, f"expect_compound_columns_to_be_unique({', '.join(result_keys(root))})"]


def test_the_landing_suite_reads_the_projects_own_catalog(tmp_path, monkeypatch):
    # A project of one's own: its queries/catalog.toml, not the repository's, sets the input
    # suite's timestamp range. Files of 10 s of readings fail a range of 1 s around their
    # median, and pass the repository's day.
    from benchmarking.verify import SMALL

    landing = tmp_path / "landing"
    SmartPlugs(rate=5, **SMALL).write_files(landing, 20, 10)
    monkeypatch.chdir(tmp_path)
    assert sum(f.quarantined.total for f in validate_landed(landing, tmp_path / "a.duckdb")) == 0
    (tmp_path / "queries").mkdir()
    shipped = (QUERIES / "catalog.toml").read_text()
    (tmp_path / "queries" / "catalog.toml").write_text(
        shipped.replace("time_distance = 86400", "time_distance = 1"))
    report = validate_landed(landing, tmp_path / "b.duckdb")
    assert sum(f.quarantined.total for f in report) > 0
    assert all(set(f.quarantined.rules) == {"expect_column_values_to_be_between(ts)"}
               for f in report if f.quarantined.total)
