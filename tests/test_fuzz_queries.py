"""Queries users write: mutated Q1-Q6 are either accepted (they optimise and explain) or refused
with a one-line error, never a traceback; a self-join of a CTE written the natural way works."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from columnar.fragment_sql import fragments
from optimizer import optimize
from optimizer.errors import TandemError
from optimizer.frontend import parse_query
from runtime.explain import Explanation
from tests.conftest import query_sql

QUERY_NAMES = ("q1", "q2", "q3", "q4", "q5", "q6")
TOKEN = re.compile(r"'[^']*'|\d+(?:\.\d+)?|\w+|<=|>=|<>|!=|[^\w\s]")
GARBAGE = ["(", ")", ",", "'", '"', ";", "--", "/*", "*", ".", "SELECT", "FROM", "JOIN", "ON",
           "GROUP", "BY", "WHERE", "HAVING", "NULL", "1e309", "-0", "'x'", "\x00", "é", "HOP",
           "TUMBLE", "INTERVAL", "OVER", "CASE", "WHEN", "END", "AS", "WITH", "UNION", "ts",
           "window_end", "plug_id", "MAX", "COUNT", "=", "<", "AND", "OR", "NOT", "IN", "?", "$1"]


def tokenised(name: str) -> list[str]:
    return TOKEN.findall(re.sub(r"--[^\n]*", "", query_sql(name)))


def test_the_queries_survive_tokenising(catalog, profile):
    for name in QUERY_NAMES:  # what the mutations start from is the query itself
        original = optimize(query_sql(name), catalog, profile)
        joined = optimize(" ".join(tokenised(name)), catalog, profile)
        assert joined.logical.root.columns == original.logical.root.columns
        assert joined.plan.placement == original.plan.placement
        # The same costs, up to the order in which their terms were added.
        assert (joined.plan.cost.bottleneck, joined.plan.cost.utilization) == pytest.approx(
            (original.plan.cost.bottleneck, original.plan.cost.utilization), rel=1e-12)


@st.composite
def mutated(draw) -> str:
    tokens = tokenised(draw(st.sampled_from(QUERY_NAMES)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(tokens) - 1))
        how = draw(st.sampled_from(["drop", "swap", "duplicate", "garbage", "text"]))
        if how == "drop":
            del tokens[i]
        elif how == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif how == "duplicate":
            tokens.insert(i, tokens[i])
        elif how == "garbage":
            tokens.insert(i, draw(st.sampled_from(GARBAGE)))
        else:
            tokens.insert(i, draw(st.text(max_size=8)))
    return " ".join(tokens)


# The reliability fixture only appends to a log: sharing it across examples is safe.
@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sql=mutated())
def test_a_mutated_query_is_explained_or_refused_in_one_line(catalog, profile, reliability, sql):
    try:
        optimization = optimize(sql, catalog, profile)
    except TandemError as err:
        message = str(err)
        reliability("query", outcome="refused", one_line="\n" not in message)
        assert message and "\n" not in message and "Traceback" not in message
        return
    reliability("query", outcome="accepted")
    # Accepted: it explains as `tandem explain --json` does, as JSON, with DuckDB SQL that
    # DuckDB's dialect parses for every DB-op of the plan.
    explained = Explanation(Path(), Path(), Path(), optimization, fragments(optimization.plan))
    document = json.loads(json.dumps(explained.to_json()))
    assert sorted(document["duckdb_sql"]) == sorted(op.id for op in optimization.plan.db_ops)
    for sql in document["duckdb_sql"].values():
        sqlglot.parse_one(sql, read="duckdb")


SELF_JOIN = """
WITH a AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_load
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT x.house_id, x.household_id, x.plug_id, y.plug_id AS other_plug, x.window_end,
       x.avg_load, y.avg_load AS other_load
FROM a AS x JOIN a AS y
  ON x.house_id = y.house_id AND x.household_id = y.household_id
 AND x.window_end = y.window_end AND x.plug_id < y.plug_id
"""


def test_a_self_join_of_a_cte_names_its_columns_by_their_aliases(catalog):
    plan = parse_query(SELF_JOIN, catalog)
    assert plan.columns == ("house_id", "household_id", "plug_id", "other_plug",
                                 "window_end", "avg_load", "other_load")


def test_a_self_join_without_aliases_for_its_clashing_outputs_says_so(catalog):
    sql = SELF_JOIN.replace(" AS other_plug", "")
    with pytest.raises(TandemError, match="two output columns are named 'plug_id': name one"):
        parse_query(sql, catalog)

