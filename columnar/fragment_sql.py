"""Translation of a DB-op (a connected R2R fragment placed in DuckDB) into one DuckDB query.

The query is evaluated for a set of window_ends at once. It reads

* ``window_ends(window_end TIMESTAMP)``: the window_ends to evaluate;
* one table per input relation, named ``in_<operator id>``:
  - rows of a windowed stream (the MIG appends them as they arrive) are expanded to every window
    instance that holds them, ``window_end - size <= ts < window_end`` (DESIGN.md);
  - rows already tagged with their window_end (the output of a Spark join or aggregate) are read
    for the requested window_ends;
* ``panes_<aggregate id>``: the partial aggregates per slide of an aggregate over a windowed
  stream (below).

Every operator of the fragment becomes a CTE named by its id, so the SQL reads like the plan.

**Panes.** A row of a windowed stream lies in pane k (its slide) when (k - 1)·β <= ts < k·β, and
the window ending at K·β holds panes K - W/β + 1 … K (Li et al., "No pane, no gain", SIGMOD
Record 2005). The store keeps each row's pane (``_pane``), so a window instance is an equi-join
with its W/β panes rather than a range join over timestamps. An aggregate whose input is such
rows, through selections and projections only, with COUNT, SUM, AVG, MIN or MAX, is computed
from partial aggregates per (group, pane) that the store appends with the rows
(``PaneTable.sql``): evaluating a window_end combines W/β partials per group instead of scanning
every row of the window. Where W is not a multiple of β, rows are expanded by their timestamps.
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
    stateless_rows,
    substitute,
)
from optimizer.physical import PhysicalPlan

WINDOW_ENDS = "window_ends"
PANE = "_pane"
ROWS = "__input"  # what the SQL that fills an input or pane table reads: the rows appended
# Partial aggregates per pane, and how a window combines them (AVG: a sum and a count).
PARTIALS = {"COUNT": (("COUNT", ""),), "SUM": (("SUM", ""),), "MIN": (("MIN", ""),),
            "MAX": (("MAX", ""),), "AVG": (("SUM", "_sum"), ("COUNT", "_n"))}


@dataclass(frozen=True)
class FragmentInput:
    table: str  # in_<operator id>, or panes_<aggregate id>
    columns: tuple[str, ...]  # columns of the table
    window_size: float | None  # seconds, for rows of a windowed stream; None if tagged
    time_column: str | None
    slide: float | None = None  # seconds, for rows of a windowed stream

    @property
    def panes_per_window(self) -> int | None:
        """W/β, where the window is a whole number of panes (else None)."""
        if self.window_size is None or not self.slide:
            return None
        n = self.window_size / self.slide
        return round(n) if abs(n - round(n)) < 1e-9 else None

    @property
    def slide_us(self) -> int:
        return round(self.slide * 1_000_000)

    def stored_sql(self) -> str:
        """What the table keeps of the rows appended (``__input``): a windowed stream's rows
        with their pane."""
        if self.panes_per_window is None:
            return f"SELECT * FROM {ROWS}"
        return f"SELECT *, {_pane_of(self.time_column, self.slide_us)} AS {PANE} FROM {ROWS}"


@dataclass(frozen=True)
class PaneTable:
    """Partial aggregates per (group, pane) of an aggregate over the rows of ``source``."""

    table: FragmentInput  # panes_<aggregate id>; its window and slide are the source's
    source: FragmentInput  # the input table whose appended rows feed it
    sql: str  # over the appended rows (``__input``)


@dataclass(frozen=True)
class Fragment:
    id: str  # dbop_N
    members: tuple[str, ...]
    inputs: tuple[FragmentInput, ...]
    columns: tuple[str, ...]  # of the result
    sql: str
    panes: tuple[PaneTable, ...] = ()


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
    return FragmentInput(name, stored, window.size, window.time_column, window.slide)


def read_sql(node: Node, plan: LogicalPlan) -> str:
    """The rows of an input table for the window_ends being evaluated, with their window_end."""
    return _expand(input_table(node, plan), node.columns).sql(dialect=DUCKDB)


def _translate(name: str, member_ids: tuple[str, ...], plan: LogicalPlan) -> Fragment:
    by_id, ids = plan.by_id, plan.ids
    members = frozenset(by_id[m] for m in member_ids)
    root = by_id[member_ids[-1]]  # members are listed in post-order: the root comes last
    ctes: list[tuple[str, exp.Expression]] = []
    inputs: dict[str, FragmentInput] = {}  # read as rows or through their panes
    expanded: set[str] = set()  # inputs read as rows
    panes: list[PaneTable] = []
    relation: dict[Node, str] = {}

    def input_relation(node: Node) -> str:
        table = input_table(node, plan)
        inputs.setdefault(table.table, table)
        if table.table not in expanded:
            expanded.add(table.table)
            ctes.append((f"{table.table}_windows", _expand(table, node.columns)))
        return f"{table.table}_windows"

    def visit(node: Node) -> str:
        if node in relation:
            return relation[node]
        if node not in members:
            relation[node] = input_relation(node)
            return relation[node]
        pane_table = _pane_table(node, members, plan)
        if pane_table:
            inputs.setdefault(pane_table.source.table, pane_table.source)
            panes.append(pane_table)
            ctes.append((ids[node], _combine_panes(node, pane_table.table)))
        else:
            children = [visit(c) for c in node.inputs]
            ctes.append((ids[node], _operator_sql(node, children)))
        relation[node] = ids[node]
        return ids[node]

    visit(root)
    query = exp.select(*[exp.column(c) for c in root.columns]).from_(ids[root])
    for cte_name, body in ctes:
        query = query.with_(cte_name, as_=body)
    sql = query.sql(dialect=DUCKDB, pretty=True)
    return Fragment(name, member_ids, tuple(inputs.values()), root.columns, sql, tuple(panes))


def _stream_input(node: Node, members: frozenset[Node]) -> Node | None:
    """The relation of windowed-stream rows an aggregate of the fragment reads through its
    selections and projections (None if it reads anything else)."""
    below = node.inputs[0]
    while below in members and isinstance(below, Select | Project):
        below = below.inputs[0]
    return None if below in members or below.instantiated else below


def _pane_table(node: Node, members: frozenset[Node], plan: LogicalPlan) -> PaneTable | None:
    """The partial aggregates per pane that compute ``node``, if it is an aggregate that they
    can compute (module docstring)."""
    if not isinstance(node, Aggregate) or any(a.func not in PARTIALS for a in node.aggregates):
        return None
    stream = _stream_input(node, members)
    if stream is None:
        return None
    source = input_table(stream, plan)
    if source.panes_per_window is None:
        return None
    # Everything the partials read, as expressions over the rows the source table stores.
    predicates, columns = stateless_rows(node.inputs[0], base=stream)
    keys = [k for k in node.group_by if k not in WINDOW_COLUMNS]
    if any(k not in columns for k in keys):
        return None
    args = {a.name: exp.Star() if a.arg is None else substitute(a.arg, columns)
            for a in node.aggregates}
    groups = [columns[k] for k in keys]
    if any(c.name not in source.columns for e in (*predicates, *groups, *args.values())
           for c in e.find_all(exp.Column)):
        return None  # it reads the window's bounds: rows must be expanded to their windows

    groups.append(exp.maybe_parse(_pane_of(source.time_column, source.slide_us), dialect=DUCKDB))
    select = [exp.alias_(g.copy(), name) for g, name in zip(groups, (*keys, PANE), strict=True)]
    partials = []
    for a in node.aggregates:
        for func, suffix in PARTIALS[a.func]:
            partials.append(f"_{a.name}{suffix}")
            select.append(exp.alias_(exp.func(func, args[a.name].copy()), partials[-1]))
    query = exp.select(*select).from_(ROWS).group_by(*[g.copy() for g in groups])
    if predicates:
        query = query.where(exp.and_(*[p.copy() for p in predicates]))
    table = FragmentInput(f"panes_{plan.ids[node]}", (*keys, PANE, *partials),
                          source.window_size, None, source.slide)
    return PaneTable(table, source, query.sql(dialect=DUCKDB))


def _combine_panes(node: Aggregate, panes: FragmentInput) -> exp.Expression:
    """The aggregate of every window_end from the partials of its W/β panes."""
    aggs = {a.name: a for a in node.aggregates}
    select = []
    for c in node.columns:
        if c == "window_end":
            select.append(exp.column("window_end", "e"))
        elif c == "window_start":
            select.append(exp.alias_(_window_start(panes.window_size), c))
        elif c in aggs:
            a = aggs[c]
            if a.func == "AVG":
                value = exp.Div(this=exp.func("SUM", exp.column(f"_{c}_sum", "p")),
                                expression=exp.func("SUM", exp.column(f"_{c}_n", "p")))
            elif a.func == "COUNT":
                value = exp.cast(exp.func("SUM", exp.column(f"_{c}", "p")), "BIGINT")
            else:
                value = exp.func(a.func, exp.column(f"_{c}", "p"))
            select.append(exp.alias_(value, c))
        else:
            select.append(exp.column(c, "p"))
    keys = [exp.column(k, "p") for k in node.group_by if k not in WINDOW_COLUMNS]
    return (exp.select(*select).from_(exp.to_table(panes.table).as_("p"))
            .join(_window_panes(panes).as_("e"),
                  on=exp.EQ(this=exp.column(PANE, "p"), expression=exp.column(PANE, "e")))
            .group_by(*keys, exp.column("window_end", "e")))


def _pane_of(time_column: str, slide_us: int) -> str:
    """The pane of a row: k with (k - 1)·β <= ts < k·β."""
    return f"(epoch_us({time_column}) // {slide_us} + 1)"


def _window_panes(table: FragmentInput) -> exp.Subquery:
    """(window_end, _pane) for every pane of every window_end evaluated."""
    pane = f"epoch_us(window_end) // {table.slide_us} - k"
    return exp.maybe_parse(
        f"(SELECT window_end, {pane} AS {PANE} FROM {WINDOW_ENDS}, "
        f"range(0, {table.panes_per_window}) AS r(k))", dialect=DUCKDB)


def _window_start(size: float) -> exp.Expression:
    return exp.Sub(this=exp.column("window_end", "e"), expression=_interval(size))


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
    start = _window_start(table.window_size)
    select = []
    for c in columns:
        if c == "window_start":
            select.append(exp.alias_(start.copy(), "window_start"))
        elif c == "window_end":
            select.append(exp.column("window_end", "e"))
        else:
            select.append(exp.column(c, "s"))
    rows = exp.select(*select).from_(exp.to_table(table.table).as_("s"))
    if table.panes_per_window is not None:
        return rows.join(_window_panes(table).as_("e"), on=exp.EQ(
            this=exp.column(PANE, "s"), expression=exp.column(PANE, "e")))
    ts = exp.column(table.time_column, "s")
    return rows.join(exp.to_table(WINDOW_ENDS).as_("e"),
                     on=exp.and_(exp.GTE(this=ts, expression=start),
                                 exp.LT(this=ts.copy(), expression=exp.column("window_end", "e"))))


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

