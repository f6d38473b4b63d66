"""Unsupported or malformed SQL gets a one-line error naming the construct and its position."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from optimizer.errors import QueryError
from optimizer.frontend import parse_query
from tandem.cli import app

HOP = "HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)"

# (SQL, a phrase the message must contain, the text the reported position must point at)
CASES = [
    ("SELECT plug_id FROM (SELECT", "malformed SQL", "SELECT", 1),
    ("SELECT plug_id FROM plugs", "stream 'plugs' must be windowed", "plugs"),
    (f"SELECT x FROM {HOP}", "unknown column 'x'", "x"),
    ("SELECT * FROM HOP(gauges, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)",
     "unknown stream 'gauges'", "gauges"),
    ("SELECT * FROM HOP(plugs, ts, INTERVAL '1' SECOND)", "HOP takes 4 arguments", "HOP"),
    ("SELECT * FROM HOP(plugs, id, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)", "time column 'ts'",
     "id"),
    ("SELECT * FROM HOP(plugs, ts, INTERVAL '7' SECOND, INTERVAL '1' MINUTE)",
     "multiple of the slide", "HOP"),
    ("SELECT * FROM HOP(plugs, ts, 5, INTERVAL '1' MINUTE)", "INTERVAL literals", "5"),
    (f"SELECT * FROM {HOP} AS a\nLEFT JOIN {HOP} AS b ON a.id = b.id", "LEFT OUTER JOIN", "LEFT"),
    (f"SELECT * FROM {HOP} AS a CROSS JOIN {HOP} AS b", "CROSS JOIN", "CROSS"),
    (f"SELECT plug_id FROM {HOP}\nUNION\nSELECT plug_id FROM {HOP}", "UNION is not supported",
     "UNION"),
    (f"SELECT plug_id, window_end FROM {HOP}\nORDER BY plug_id", "ORDER BY", "ORDER"),
    (f"SELECT plug_id, window_end FROM {HOP} LIMIT 10", "LIMIT", "LIMIT"),
    (f"SELECT DISTINCT plug_id FROM {HOP}", "SELECT DISTINCT", "DISTINCT"),
    (f"SELECT plug_id, AVG(value) OVER (PARTITION BY plug_id) AS a FROM {HOP}",
     "window functions", "OVER"),
    (f"SELECT plug_id, STDDEV(value) AS s FROM {HOP} GROUP BY plug_id", "aggregate STDDEV",
     "STDDEV"),
    (f"SELECT plug_id, COUNT(DISTINCT value) AS n FROM {HOP} GROUP BY plug_id",
     "COUNT(DISTINCT ...)", "COUNT"),
    (f"SELECT house_id, MAX(SUM(value)) AS m FROM {HOP} GROUP BY house_id", "nested aggregates",
     "SUM"),
    (f"SELECT plug_id, COUNT() AS n FROM {HOP} GROUP BY plug_id", "COUNT takes one argument",
     "COUNT"),
    (f"SELECT plug_id, COUNT(*, value) AS n FROM {HOP} GROUP BY plug_id",
     "COUNT takes one argument", "COUNT"),
    (f"SELECT plug_id, value, COUNT(*) AS n FROM {HOP} GROUP BY plug_id",
     "'value' must appear in GROUP BY", "value"),
    (f"SELECT * FROM {HOP} WHERE plug_id IN (SELECT plug_id FROM {HOP})", "IN (subquery)", "IN ("),
    (f"SELECT * FROM {HOP} AS a JOIN {HOP} AS b", "needs ON or USING", "JOIN"),
    (f"SELECT a.id FROM {HOP} AS a JOIN {HOP} AS b ON b.value > 1", "must relate both inputs",
     "JOIN"),
    ("INSERT INTO results SELECT 1", "only SELECT queries", "INSERT"),
    (f"SELECT * FROM {HOP}; SELECT * FROM {HOP}", "one statement per query", "SELECT", 1),
    (f"SELECT plug_id, value * 2 FROM {HOP}", "needs a name", "value * 2"),
    (f"SELECT * FROM {HOP} WHERE window_start > TIMESTAMP '2014-09-01'",
     "window_start and window_end", "window_start"),
    (f"SELECT * FROM {HOP} AS a JOIN HOP(plugs, ts, INTERVAL '2' SECOND, INTERVAL '1' MINUTE) AS b "
     "ON a.id = b.id", "share one slide", "HOP", 1),
    (f"SELECT id FROM {HOP} AS a JOIN {HOP} AS b ON a.id = b.id", "'id' is ambiguous", "id"),
    ("WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r", "WITH RECURSIVE", "RECURSIVE"),
    (f"SELECT RANDOM() AS r, window_end FROM {HOP}", "RANDOM is not supported", "RANDOM"),
    (f"SELECT * FROM {HOP} WHERE value > (SELECT 1)", "subqueries inside expressions",
     "SELECT 1"),
    ("SELECT * FROM TUMBLES(plugs, ts, INTERVAL '1' MINUTE)", "table function TUMBLES",
     "TUMBLES"),
    ("SELECT * FROM HOP('plugs', ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)",
     "must name a stream", "'plugs'"),
    (f"SELECT * FROM {HOP} WHERE COUNT(*) > 1", "aggregates are not allowed in WHERE", "COUNT"),
    (f"SELECT plug_id FROM {HOP} HAVING value > 1", "HAVING needs GROUP BY", "value"),
    (f"SELECT plug_id, SUM(*) AS s FROM {HOP} GROUP BY plug_id", "SUM(*) is not valid", "SUM"),
    (f"SELECT *, COUNT(*) AS n FROM {HOP} GROUP BY plug_id", "SELECT * cannot be combined", "*"),
    (f"SELECT plug_id AS a, value AS a FROM {HOP}", "two output columns are named 'a'",
     "value AS a"),
    (f"SELECT a.* FROM {HOP} AS a", "qualified * is not supported", "a.*"),
    ("SELECT * FROM HOP(plugs, ts, INTERVAL '0' SECOND, INTERVAL '1' MINUTE)",
     "slide and size must be positive", "'0'"),
    (f"SELECT * FROM {HOP} AS a JOIN {HOP} AS b USING (nope)", "USING column 'nope'", "nope"),
]


def expected_position(sql: str, anchor: str, occurrence: int = 0) -> tuple[int, int]:
    offset = -1
    for _ in range(occurrence + 1):
        offset = sql.index(anchor, offset + 1)
    line = sql.count("\n", 0, offset) + 1
    return line, offset - (sql.rfind("\n", 0, offset) + 1) + 1


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_unsupported_sql_names_construct_and_position(catalog, case):
    sql, phrase, *anchor = case
    with pytest.raises(QueryError) as info:
        parse_query(sql, catalog)
    err = info.value
    assert phrase in err.message
    assert (err.line, err.col) == expected_position(sql, *anchor)
    assert "\n" not in str(err)


def test_at_least_fifteen_kinds_of_errors_are_covered():
    assert len({case[1] for case in CASES}) >= 15


def test_cli_prints_one_line_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.sql"
    bad.write_text(f"SELECT plug_id, value FROM {HOP}\nFULL JOIN {HOP} AS b ON plug_id = b.plug_id")
    result = CliRunner().invoke(app, ["explain", str(bad), "--catalog", "queries/catalog.toml"])
    assert result.exit_code == 2
    output = result.output.strip()
    assert "Traceback" not in output and len(output.splitlines()) == 1
    assert output.endswith("line 2, column 1: FULL OUTER JOIN is not supported: Tandem joins are "
                           "inner joins")


def test_a_token_error_quoting_several_lines_is_refused_in_one_line(catalog):
    # An unterminated string: the tokenizer's message quotes the lines after it.
    with pytest.raises(QueryError) as info:
        parse_query(f"SELECT plug_id FROM {HOP} GROUP BY '\n plug_id", catalog)
    assert "malformed SQL" in str(info.value) and "\n" not in str(info.value)
