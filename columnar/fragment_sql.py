"""Translation of a DB-op (a connected R2R fragment placed in DuckDB) into one DuckDB query.

The query is evaluated for a set of window_ends at once. It reads

* ``window_ends(window_end TIMESTAMP)``: the window_ends to evaluate;
* one table per input relation, named ``in_<operator id>``:
  - rows of a windowed stream (the MIG appends them as they arrive) are expanded to every window
    instance that holds them, ``window_end - size <= ts < window_end`` (DESIGN.md);
  - rows already tagged with their window_end (the output of a Spark join or aggregate) are read
    for the requested window_ends.

Every operator of the fragment becomes a CTE named by its id, so the SQL reads like the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from optimizer.cost import DUCKDB
from optimizer.logical import (
    WINDOW_COLUMNS,
    Aggregate,
    Join,
    LogicalPlan,
    Node,
    Project,
    Select,
    source_window,
)
from optimizer.physical import PhysicalPlan

WINDOW_ENDS = "window_ends"


@dataclass(frozen=True)
class FragmentInput:
    table: str  # in_<operator id>
    columns: tuple[str, ...]  # columns of the table
    window_size: float | None  # seconds, for rows of a windowed stream; None if tagged
    time_column: str | None


@dataclass(frozen=True)
class Fragment:
    id: str  # dbop_N
    members: tuple[str, ...]
    inputs: tuple[FragmentInput, ...]
    columns: tuple[str, ...]  # of the result
    sql: str


def fragments(physical: PhysicalPlan) -> list[Fragment]:
    """The DuckDB query of every DB-op of a physical plan, in the order of ``physical.db_ops``."""
    return [_translate(op.id, op.members, physical.logical) for op in physical.db_ops]


def input_table(node: Node, plan: LogicalPlan) -> FragmentInput:
    """The table that holds a relation a DB-op (or a Spark operator after one) reads. Two
    copies of one CTE (Q1 reads its window twice) share the table."""
    name = f"in_{plan.relation_ids[node]}"
    if node.instantiated:
        return FragmentInput(name, node.columns, None, None)
    window = source_window(node)
    stored = tuple(c for c in node.columns if c not in WINDOW_COLUMNS)
    return FragmentInput(name, stored, window.size, window.time_column)


def read_sql(node: Node, plan: LogicalPlan) -> str:
    """The rows of an input table for the window_ends being evaluated, with their window_end."""
    return _expand(input_table(node, plan), node.columns).sql(dialect=DUCKDB)


def _translate(name: str, member_ids: tuple[str, ...], plan: LogicalPlan) -> Fragment:
    by_id, ids = plan.by_id, plan.ids
    members = frozenset(by_id[m] for m in member_ids)
    root = by_id[member_ids[-1]]  # members are listed in post-order: the root comes last
    ctes: list[tuple[str, exp.Expression]] = []
    inputs: dict[str, FragmentInput] = {}
    relation: dict[Node, str] = {}

    def input_relation(node: Node) -> str:
        table = input_table(node, plan)
        if table.table not in inputs:
            inputs[table.table] = table
            ctes.append((f"{table.table}_windows", _expand(table, node.columns)))
        return f"{table.table}_windows"

    def visit(node: Node) -> str:
        if node in relation:
            return relation[node]
        if node not in members:
            relation[node] = input_relation(node)
            return relation[node]
        children = [visit(c) for c in node.inputs]
        ctes.append((ids[node], _operator_sql(node, children)))
        relation[node] = ids[node]
        return ids[node]

    visit(root)
    query = exp.select(*[exp.column(c) for c in root.columns]).from_(ids[root])
    for cte_name, body in ctes:
        query = query.with_(cte_name, as_=body)
    sql = query.sql(dialect=DUCKDB, pretty=True)
    return Fragment(name, member_ids, tuple(inputs.values()), root.columns, sql)


def _interval(seconds: float) -> exp.Expression:
    if float(seconds).is_integer():
        return exp.Interval(this=exp.Literal.string(str(int(seconds))), unit=exp.var("SECOND"))
    return exp.Interval(this=exp.Literal.string(str(round(seconds * 1000))),
                        unit=exp.var("MILLISECOND"))


def _expand(table: FragmentInput, columns: tuple[str, ...]) -> exp.Expression:
    if table.window_size is None:
        return (exp.select(*[exp.column(c) for c in columns]).from_(table.table)
                .where(exp.column("window_end").isin(
                    query=exp.select("window_end").from_(WINDOW_ENDS))))
    start = exp.Sub(this=exp.column("window_end", "e"), expression=_interval(table.window_size))
    ts = exp.column(table.time_column, "s")
    select = []
    for c in columns:
        if c == "window_start":
            select.append(exp.alias_(start.copy(), "window_start"))
        elif c == "window_end":
            select.append(exp.column("window_end", "e"))
        else:
            select.append(exp.column(c, "s"))
    return (exp.select(*select).from_(exp.to_table(table.table).as_("s"))
            .join(exp.to_table(WINDOW_ENDS).as_("e"),
                  on=exp.and_(exp.GTE(this=ts, expression=start),
                              exp.LT(this=ts.copy(), expression=exp.column("window_end", "e")))))


def _operator_sql(node: Node, children: list[str]) -> exp.Expression:
    if isinstance(node, Select):
        return exp.select("*").from_(children[0]).where(node.predicate.copy())
    if isinstance(node, Project):
        return exp.select(*[exp.alias_(e.copy(), n) for n, e in node.expressions]).from_(children[0])
    if isinstance(node, Aggregate):
        aggs = {a.name: a for a in node.aggregates}
        select = []
        for c in node.columns:
            if c in aggs:
                a = aggs[c]
                arg = exp.Star() if a.arg is None else a.arg.copy()
                select.append(exp.alias_(exp.func(a.func, arg), c))
            else:
                select.append(exp.column(c))
        return (exp.select(*select).from_(children[0])
                .group_by(*[exp.column(k) for k in node.group_by]))
    if isinstance(node, Join):
        left_cols = set(node.left.columns)

        def side(column: str) -> exp.Column:
            return exp.column(column, "l" if column in left_cols else "r")

        on = [exp.EQ(this=exp.column(l, "l"), expression=exp.column(r, "r")) for l, r in node.keys]
        on.append(exp.EQ(this=exp.column("window_end", "l"), expression=exp.column("window_end", "r")))
        if node.condition is not None:
            on.append(node.condition.copy().transform(
                lambda n: side(n.name) if isinstance(n, exp.Column) else n))
        return (exp.select(*[side(c) for c in node.columns])
                .from_(exp.to_table(children[0]).as_("l"))
                .join(exp.to_table(children[1]).as_("r"), on=exp.and_(*on)))
    raise TypeError(f"{node.kind} cannot run in DuckDB")

