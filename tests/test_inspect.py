"""The console runs what only reads the store's tables and refuses the rest with a reason; the
EXPLAIN of every DB-op runs over empty tables."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from columnar.inspect import Refused, explain_fragment, read_only_query
from runtime.explain import explain


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "tandem.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA q_q1; CREATE TABLE q_q1.results AS SELECT range AS n FROM range(500)")
    con.close()
    return path


@pytest.mark.parametrize("sql, why", [
    ("INSERT INTO q_q1.results VALUES (1)", "INSERT is refused"),
    ("DELETE FROM q_q1.results", "DELETE is refused"),
    ("UPDATE q_q1.results SET n = 0", "UPDATE is refused"),
    ("DROP TABLE q_q1.results", "DROP is refused"),
    ("CREATE TABLE t AS SELECT 1", "CREATE is refused"),
    ("ATTACH 'other.duckdb'", "ATTACH is refused"),
    ("COPY q_q1.results TO 'out.csv'", "COPY is refused"),
    ("SET enable_external_access = true", "SET is refused"),
    ("PRAGMA database_list", "PRAGMA is refused"),
    ("INSTALL httpfs", "INSTALL is refused"),
    ("SELECT * FROM read_csv('/etc/passwd')", "reading files is refused (read_csv)"),
    ("SELECT * FROM read_parquet('x.parquet')", "reading files is refused (read_parquet)"),
    ("SELECT * FROM glob('*')", "reading files is refused (glob)"),
    ("SELECT read_text('/etc/hosts')", "reading files is refused (read_text)"),
    ("SELECT * FROM '/etc/passwd'", "reading the file '/etc/passwd' is refused"),
    ("SELECT 1; DELETE FROM q_q1.results", "one statement at a time"),
    ("SELEC 1", "not valid SQL"),
])
def test_the_console_refuses_what_does_not_only_read_tables(store, reliability, sql, why):
    try:
        read_only_query(store, sql)
        refusal = None
    except Refused as refused:
        refusal = str(refused)
    reliability("escape", sql=sql, refused=refusal is not None)
    assert refusal is not None and why in refusal


def test_the_console_answers_a_select_up_to_its_row_limit(store):
    answer = read_only_query(store, "WITH r AS (SELECT n FROM q_q1.results) "
                                    "SELECT count(*) AS rows, sum(n) AS total FROM r")
    assert answer.columns == ["rows", "total"] and answer.rows == [(500, sum(range(500)))]
    assert not answer.truncated
    many = read_only_query(store, "SELECT n FROM q_q1.results ORDER BY n", limit=200)
    assert [r[0] for r in many.rows] == list(range(200)) and many.truncated


def test_duckdb_refuses_file_access_the_parse_would_miss(store, monkeypatch, reliability):
    """The second line of defence: the connection itself reads no file."""
    monkeypatch.setattr("columnar.inspect.check_read_only", lambda sql: sql)
    sql = "SELECT * FROM read_csv('/etc/hosts')"
    with pytest.raises(Refused, match="refused by DuckDB"):
        read_only_query(store, sql)
    reliability("escape", sql=f"{sql} (past the parser)", refused=True)


def test_a_store_another_process_writes_to_is_reported_busy(store):
    writer = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); "
         "print('open', flush=True); time.sleep(60)", str(store)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        with pytest.raises(Refused) as refused:
            read_only_query(store, "SELECT 1")
        # One line that names the process by its command line, and where to look instead.
        said = str(refused.value)
        assert "\n" not in said and f"(PID {writer.pid})" in said
        assert "`python -c import duckdb, sys, time;" in said
        assert "follow the run on its terminal" in said
    finally:
        writer.kill()
        writer.wait()


@pytest.mark.parametrize("query", ["q1", "q2", "q3", "q4", "q5", "q6", "j2"])
def test_every_db_op_of_the_pure_duckdb_plans_explains(query):
    explanation = explain(query, placement="duckdb")
    types = {"ts": "TIMESTAMP", "value": "DOUBLE", "property": "INTEGER", "plug_id": "INTEGER",
             "household_id": "INTEGER", "house_id": "INTEGER", "id": "BIGINT"}
    for fragment in explanation.fragments:
        plan = explain_fragment(fragment, types)
        assert "PROJECTION" in plan.upper() and "WINDOW_ENDS" in plan.upper()


def test_a_huge_cross_join_stops_at_the_statement_timeout(store):
    with pytest.raises(Refused, match="stopped after 0.5 s"):
        read_only_query(store, "SELECT count(*) FROM q_q1.results a, q_q1.results b, "
                               "q_q1.results c, q_q1.results d", timeout=0.5)


def test_a_result_of_millions_of_rows_stops_at_the_row_limit(store):
    # 500^3 rows: DuckDB stops producing them after the limit, well within the timeout.
    answer = read_only_query(store, "SELECT a.n FROM q_q1.results a, q_q1.results b, "
                                    "q_q1.results c ORDER BY 1 DESC", limit=10)
    assert answer.truncated and answer.rows == [(499,)] * 10
