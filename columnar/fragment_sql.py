"""Translation of a DB-op (a connected R2R fragment placed in DuckDB) into one DuckDB query.

The query is evaluated for a set of window_ends at once. It reads

* ``window_ends(window_end TIMESTAMP)``: the window_ends to evaluate;
* one table per input relation, named ``in_<operator id>``:
  - rows of a windowed stream (the MIG appends them as they arrive) are expanded to every window
    instance that holds them, ``window_end - size <= ts < window_end`` (docs/design.md, Semantics);
  - rows already tagged with their window_end (the output of a Spark join or aggregate) are read
    for the requested window_ends;
* ``panes_<aggregate id>``: what an aggregate over a windowed stream keeps per slide (below).

Every operator of the fragment becomes a CTE named by its id, so the SQL reads like the plan.

**Panes.** A row of a windowed stream lies in pane k (its slide) when (k - 1)·β <= ts < k·β, and
the window ending at K·β holds panes K - W/β + 1 … K (Li et al., "No pane, no gain", SIGMOD
Record 2005). The store keeps each row's pane (``_pane``), so a window instance is an equi-join
with its W/β panes rather than a range join over timestamps. An aggregate whose input is such
rows, through selections and projections only, with COUNT, SUM, AVG, MIN or MAX, is computed
from partial aggregates per (group, pane) that the store appends with the rows
(``PaneTable.sql``): evaluating a window_end merges W/β partials per group, found by a range on
the pane, instead of scanning every row of the window. Where a window holds ``STACKED_FROM``
panes or more, the store keeps the partials of final panes in two stacks
(``columnar/stacks.py``), and a window_end merges two rows per group, a prefix and a suffix,
whatever W/β. Where W is not a multiple of β, rows are expanded by their timestamps. For a
split aggregate (``optimizer/cost.py``, SPLIT) the partials are the same query in Spark's
dialect (``PaneTable.spark_sql``), which Spark runs in its executors over each micro-batch's
rows; the store appends the partials it collects, and the merge is unchanged.

**Correlated aggregates.** An aggregate over the join of a window's rows with another relation
of the same window (Q1: the readings above 90 % of their plug's maximum in the window) cannot
be combined from partials: which rows count depends on the other side. Its pane table keeps
each (group, pane)'s rows as one list of the columns it reads; evaluating a window_end joins
the W/β lists of a group to the other relation's row once, and filters and aggregates each
list with lambdas. That is the join of the row-expanded form done per pane rather than per row
(50 times fewer probes in Q1 at 100k tuples/s), and the window's rows themselves need not be
kept (``rows_kept``).

**Exact pruning.** Where a row counts only if ``x OP f(M)`` (OP is > or >=, f non-decreasing, M
the MAX of the same rows per group and window: Q1's ``value > 0.9 * max_load``), every window
that holds a row holds its pane, so its M is at least the MAX of the rows appended with it in
its pane: a row that fails against that bound fails in every window, and its list does not
keep it (``_pruned``; of the generator's loads at 1M tuples/s the lists keep 51 %). Pruning
against later panes too (the suffix maximum, which rises when a burst begins) would drop more,
at the cost of rewriting lists already kept; it is not done.

**Ordered lists.** Where the aggregate counts the rows that pass one comparison ``v OP t`` of a
value of the row alone with a threshold of the other relation's (Q1 and Q2: COUNT(*) where the
load exceeds a threshold the window sets), a list holds only the non-NULL values v, ascending,
and the first value of each chunk of about √n of them (``_minima``). The rows that pass are a
suffix (OP is > or >=) or a prefix (< or <=) of the list: the minima say in which chunk it
begins or ends, and only that chunk is compared value by value. A count reads about 2√n values
instead of n (at 1M tuples/s, Q2's evaluation of a window_end took 0.47 s instead of 1.00 s,
``bench/results/ordered-lists.md``); ordering the values costs the append a sort per (group,
pane).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from columnar.stacks import PANE, Stacks
from optimizer.cost import DUCKDB, STACKED_FROM
from optimizer.deployment import Deployment
from optimizer.errors import TandemError
from optimizer.expressions import conjuncts
from optimizer.logical import (
    WINDOW_COLUMNS,
    AggCall,
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
from optimizer.ordered_lists import SMALLEST_CHUNK
from optimizer.physical import PhysicalPlan, split

WINDOW_ENDS = "window_ends"
ROWS = "__input"  # what the SQL that fills an input or pane table reads: the rows appended
LAST_PANE = "_last_pane"  # of a window_end evaluated
LISTS, ELEMENT = "_rows", "x"  # a pane's rows as one list (a correlated aggregate), one row of it
MINIMA = "_minima"  # of an ordered list: the first value of each of its chunks
# An ordered list's chunk: about its square root of values, at least SMALLEST_CHUNK. Of Q2's
# 235 loads per plug and second at 1M tuples/s, a count reads 15 minima and one chunk of 16
# (what the cost model prices, optimizer/ordered_lists.py).
CHUNK = f"GREATEST({SMALLEST_CHUNK}, CAST(CEIL(SQRT(LEN({{rows}}))) AS BIGINT))"
# Where a comparison v OP t holds on a suffix of the ascending values (OP is > or >=) or a
# prefix (< or <=): the chunk where it starts or ends is the last whose first value is at most
# t (at most for > and <=, below for >= and <).
EDGE = {exp.GT: exp.LTE, exp.GTE: exp.LT, exp.LT: exp.LT, exp.LTE: exp.LTE}
MIRRORED = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE}
OPERATOR = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
# Partial aggregates per pane, and how a window combines them (AVG: a sum and a count).
PARTIALS = {"COUNT": (("COUNT", ""),), "SUM": (("SUM", ""),), "MIN": (("MIN", ""),),
            "MAX": (("MAX", ""),), "AVG": (("SUM", "_sum"), ("COUNT", "_n"))}
MERGE = {"COUNT": "SUM", "SUM": "SUM", "MIN": "MIN", "MAX": "MAX"}  # two partials into one


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
    stacks: Stacks | None = None  # what windows read of partials (not of a correlated's lists)
    # A split aggregate's: the same partials in Spark's dialect, over the batch's rows of the
    # source relation (``{rows}``, a DataFrame ``SparkSession.sql`` is given), which Spark
    # computes in its executors and the store appends as they come (``sql`` is not run).
    spark_sql: str | None = None


@dataclass(frozen=True)
class Fragment:
    id: str  # dbop_N
    members: tuple[str, ...]
    inputs: tuple[FragmentInput, ...]  # the tables whose rows it reads
    columns: tuple[str, ...]  # of the result
    sql: str
    panes: tuple[PaneTable, ...] = ()

    @property
    def reads(self) -> tuple[str, ...]:
        """The tables its SQL reads, besides window_ends."""
        return (*(t.table for t in self.inputs), *(p.table.table for p in self.panes))

    @property
    def stacks(self) -> tuple[Stacks, ...]:
        """The stacks its pane tables keep, which an evaluation extends first."""
        return tuple(p.stacks for p in self.panes if p.stacks)

    @property
    def sources(self) -> tuple[FragmentInput, ...]:
        """Every table that the rows arriving feed: those it reads, and the sources of its pane
        tables (the store needs not keep the rows of a source that it reads through panes
        only)."""
        tables = {t.table: t for t in (*self.inputs, *(p.source for p in self.panes))}
        return tuple(tables.values())


def fragments(physical: PhysicalPlan) -> list[Fragment]:
    """The DuckDB query of every DB-op of a physical plan, in the order of ``physical.db_ops``."""
    splits = split(physical.logical, physical.placement)
    return [_translate(op.id, op.members, physical.logical, splits) for op in physical.db_ops]


def rows_kept(deployment: Deployment, fragments: list[Fragment]) -> set[str]:
    """The input tables whose rows the store keeps: those a DB-op reads as rows, and those of
    the crossings that Spark reads back after the MIG (the rows of the others feed pane tables
    only, and are not kept)."""
    plan = deployment.physical.logical
    kept = {t.table for f in fragments for t in f.inputs}
    read = {plan.relation_ids[i] for s in deployment.steps if not s.in_duckdb
            for i in s.node.inputs}
    read.add(plan.relation_ids[plan.root])
    kept.update(input_table(n, plan).table for n in deployment.crossings
                if plan.relation_ids[n] in read)
    return kept


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


def _translate(name: str, member_ids: tuple[str, ...], plan: LogicalPlan,
               splits: frozenset[Node] = frozenset()) -> Fragment:
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
        pane_table = _pane_table(node, members, plan, node in splits)
        if node in splits and pane_table is None:
            raise TandemError(f"{ids[node]} cannot be split: its partials per pane read more "
                              "than the stream's columns (place it on duckdb)")
        correlated = None if pane_table else _correlated(node, members, plan)
        if pane_table:
            panes.append(pane_table)
            ctes.append((ids[node], _combine_panes(node, pane_table)))
        elif correlated:
            panes.append(correlated.rows)
            ctes.append((ids[node], correlated.sql(visit(correlated.other))))
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


def _below_stateless(node: Node, members: frozenset[Node]) -> Node:
    """The first relation at or below ``node`` that is not one of the fragment's selections
    and projections."""
    while node in members and isinstance(node, Select | Project):
        node = node.inputs[0]
    return node


def _stream_below(node: Node, members: frozenset[Node]) -> Node | None:
    """The relation of windowed-stream rows that ``node`` is, through the fragment's selections
    and projections (None if it is anything else)."""
    node = _below_stateless(node, members)
    return None if node in members or node.instantiated else node


def _pane_table(node: Node, members: frozenset[Node], plan: LogicalPlan,
                in_spark: bool = False) -> PaneTable | None:
    """The partial aggregates per pane that compute ``node``, if it is an aggregate that they
    can compute (module docstring); ``in_spark``: Spark computes them (a split aggregate,
    ``PaneTable.spark_sql``)."""
    if not isinstance(node, Aggregate) or any(a.func not in PARTIALS for a in node.aggregates):
        return None
    stream = _stream_below(node.inputs[0], members)
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

    groups.append(_pane_expression(source.time_column, source.slide_us))
    select = [exp.alias_(g.copy(), name) for g, name in zip(groups, (*keys, PANE), strict=True)]
    partials = []
    for a in node.aggregates:
        for func, suffix in PARTIALS[a.func]:
            partials.append((f"_{a.name}{suffix}", MERGE[func]))
            select.append(exp.alias_(exp.func(func, args[a.name].copy()), partials[-1][0]))
    query = exp.select(*select).from_(ROWS).group_by(*[g.copy() for g in groups])
    if predicates:
        query = query.where(exp.and_(*[p.copy() for p in predicates]))
    table = FragmentInput(f"panes_{plan.ids[node]}", (*keys, PANE, *(c for c, _ in partials)),
                          source.window_size, None, source.slide)
    stacks = Stacks(table.table, tuple(keys), tuple(partials), source.panes_per_window,
                    source.slide_us) if source.panes_per_window >= STACKED_FROM else None
    spark = query.sql(dialect="spark").replace(f"FROM {ROWS}", "FROM {rows}") if in_spark else None
    return PaneTable(table, source, query.sql(dialect=DUCKDB), stacks, spark)


def _combine_panes(node: Aggregate, panes: PaneTable) -> exp.Expression:
    """The aggregate of every window_end from its W/β partials per group, or from the two
    its stacks hold for it where its windows are long (``STACKED_FROM``)."""
    aggs = {a.name: a for a in node.aggregates}
    select = []
    for c in node.columns:
        if c == "window_end":
            select.append(exp.column("window_end", "p"))
        elif c == "window_start":
            select.append(exp.alias_(exp.Sub(this=exp.column("window_end", "p"),
                                             expression=_interval(panes.table.window_size)), c))
        elif c in aggs:
            a = aggs[c]
            if a.func == "AVG":
                value = exp.Div(this=exp.func("SUM", exp.column(f"_{c}_sum", "p")),
                                expression=exp.func("SUM", exp.column(f"_{c}_n", "p")))
            elif a.func == "COUNT":
                value = exp.cast(exp.func("SUM", exp.column(f"_{c}", "p")), "BIGINT")
            else:
                value = _typed(a, exp.func(a.func, exp.column(f"_{c}", "p")))
            select.append(exp.alias_(value, c))
        else:
            select.append(exp.column(c, "p"))
    keys = [exp.column(k, "p") for k in node.group_by if k not in WINDOW_COLUMNS]
    ends = _ends_last_pane(panes.table)
    windows = (panes.stacks.windows(ends) if panes.stacks else
               f"SELECT e.window_end, p.* FROM {panes.table.table} AS p JOIN {ends} "
               f"ON {_in_window(panes.table, 'p').sql(dialect=DUCKDB)}")
    windows = f"({windows}) AS p"
    return (exp.select(*select).from_(windows, dialect=DUCKDB)
            .group_by(*keys, exp.column("window_end", "p")))


@dataclass(frozen=True)
class Correlated:
    """An aggregate over the rows of a window joined to a relation of the same window (a
    correlated aggregate: Q1 counts the readings above 90 % of their window's maximum), read
    from the rows of each (group, pane) kept as one list (module docstring)."""

    node: Aggregate
    rows: PaneTable  # the rows' lists per (group, pane)
    other: Node  # the relation joined to the rows
    keys: tuple[tuple[str, str], ...]  # (column of the lists, column of ``other``)
    groups: tuple[str, ...]  # the aggregate's keys, columns of the lists
    kept: exp.Expression | None  # over an element x: does the row pass the predicates
    args: dict[str, exp.Expression | None]  # each aggregate's argument over an element x
    # Ordered lists (module docstring): the comparison OP and the threshold t of ``v OP t``.
    ordered: tuple[type, exp.Expression] | None = None

    def sql(self, other: str) -> exp.Expression:
        """The aggregate for every window_end evaluated: the lists of its W/β panes joined to
        the other relation's row of the window, filtered, then combined."""
        kept = exp.column(LISTS, "p")
        if self.ordered:
            count = exp.func("SUM", self._passing())
        else:
            if self.kept is not None:
                kept = _list_func("LIST_FILTER", kept, self.kept)
            count = exp.func("SUM", exp.func("LEN", kept.copy()))
        select = []
        for c in self.node.columns:
            if c == "window_end":
                select.append(exp.column("window_end", "e"))
            elif c == "window_start":
                select.append(exp.alias_(_window_start(self.rows.table.window_size), c))
            elif c in self.args:
                select.append(exp.alias_(self._combine(c, kept, count), c))
            else:
                select.append(exp.column(c, "p"))
        on = [exp.EQ(this=exp.column(k, "p"), expression=exp.column(o, "r"))
              for k, o in self.keys]
        on.append(exp.EQ(this=exp.column("window_end", "e"),
                         expression=exp.column("window_end", "r")))
        return (exp.select(*select).from_(exp.to_table(self.rows.table.table).as_("p"))
                .join(_window_ends_last_pane(self.rows.table), on=_in_window(self.rows.table, "p"))
                .join(exp.to_table(other).as_("r"), on=exp.and_(*on))
                .group_by(*[exp.column(g, "p") for g in self.groups],
                          exp.column("window_end", "e"))
                # A window with no row left gives no group, as the join and the filter would.
                .having(exp.GT(this=count.copy(), expression=exp.Literal.number(0))))

    def _passing(self) -> exp.Expression:
        """How many values of an ordered list pass ``v OP t``: those of the chunks wholly
        after (or before) the edge chunk, and the edge chunk's, compared one by one."""
        op, threshold = self.ordered
        t = threshold.sql(dialect=DUCKDB)
        rows, b = f"p.{LISTS}", CHUNK.format(rows=f"p.{LISTS}")
        j = f"LEN(LIST_FILTER(p.{MINIMA}, LAMBDA m : m {OPERATOR[EDGE[op]]} {t}))"
        edge = (f"CASE WHEN {j} = 0 THEN 0 ELSE LEN(LIST_FILTER(LIST_SLICE({rows}, ({j} - 1) * {b} "
                f"+ 1, {j} * {b}), LAMBDA {ELEMENT} : {ELEMENT} {OPERATOR[op]} {t})) END")
        whole = (f"GREATEST(0, LEN({rows}) - {j} * {b})" if op in (exp.GT, exp.GTE)
                 else f"GREATEST(0, ({j} - 1) * {b})")
        return exp.maybe_parse(f"{whole} + {edge}", dialect=DUCKDB)

    def _combine(self, name: str, kept: exp.Expression, count: exp.Expression) -> exp.Expression:
        func, arg = next(a.func for a in self.node.aggregates if a.name == name), self.args[name]
        if arg is None:  # COUNT(*)
            return exp.cast(count.copy(), "BIGINT")
        present = exp.func("SUM", exp.func("LEN", _list_func(
            "LIST_FILTER", kept.copy(), exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null())))))
        values = _list_func("LIST_TRANSFORM", kept.copy(), arg)
        if func == "COUNT":
            return exp.cast(present, "BIGINT")
        if func == "AVG":
            return exp.Div(this=exp.func("SUM", exp.func("LIST_SUM", values)), expression=present)
        call = next(a for a in self.node.aggregates if a.name == name)
        return _typed(call, exp.func(func, exp.func(f"LIST_{func}", values)))


def _typed(call: AggCall, value: exp.Expression) -> exp.Expression:
    """An aggregate's value in Spark's type: DuckDB sums integers into a HUGEINT, Spark into a
    BIGINT."""
    return exp.cast(value, "BIGINT") if call.func == "SUM" and call.integer else value


def _list_func(name: str, items: exp.Expression, body: exp.Expression) -> exp.Expression:
    """``name(items, lambda x: body)``, where x is one row of a list."""
    return exp.func(name, items, exp.Lambda(this=body.copy(),
                                            expressions=[exp.to_identifier(ELEMENT)]))


def _of_element(e: exp.Expression) -> exp.Expression:
    """``e`` over the stored columns of one row as over a list's element x."""
    return e.transform(lambda n: exp.column(n.name, ELEMENT)
                       if isinstance(n, exp.Column) and not n.table else n)


def _correlated(node: Node, members: frozenset[Node], plan: LogicalPlan) -> Correlated | None:
    """The aggregate as a correlated aggregate over lists of rows per pane, if it is one: it
    reads, through selections and projections, a join of a windowed stream's rows (the rows
    side) with another relation at equal window_end, and its keys are the rows' own."""
    if not isinstance(node, Aggregate) or any(a.func not in PARTIALS for a in node.aggregates):
        return None
    join = _below_stateless(node.inputs[0], members)
    if join not in members or not isinstance(join, Join):
        return None
    above, columns = stateless_rows(node.inputs[0], base=join)  # over the join's columns
    left = set(join.left.columns)
    for side, other, keys in ((join.left, join.right, join.keys),
                              (join.right, join.left, [(r, l) for l, r in join.keys])):
        stream = _stream_below(side, members)
        source = None if stream is None else input_table(stream, plan)
        if source is None or source.panes_per_window is None:
            continue
        predicates, stored = stateless_rows(side, base=stream)
        # The join's columns over the rows' stored columns, the other relation's row r and the
        # window e; the other side's keys equal the rows' (the rule needs the rows' own keys).
        equal = {theirs: stored[mine] for mine, theirs in keys}
        joined = {"window_end": exp.column("window_end", "e"),
                  "window_start": _window_start(source.window_size)}
        joined.update({c: stored[c] if (c in left) == (side is join.left)
                       else equal.get(c, exp.column(c, "r"))
                       for c in join.columns if c not in WINDOW_COLUMNS})
        groups = {k: substitute(columns.get(k, exp.column(k)), joined)
                  for k in node.group_by if k not in WINDOW_COLUMNS}
        if any(c.table for g in groups.values() for c in g.find_all(exp.Column)):
            continue  # a key is not the rows' own: one list would feed several groups
        by_sql = {g.sql(dialect=DUCKDB): k for k, g in groups.items()}
        list_keys, on = dict(groups), []
        for mine, theirs in keys:
            name = by_sql.get(stored[mine].sql(dialect=DUCKDB), f"_{mine}")
            list_keys[name] = stored[mine]
            on.append((name, theirs))
        conditions = [substitute(p, joined) for p in above]
        if join.condition is not None:
            conditions.append(substitute(join.condition, joined))
        args = {a.name: None if a.arg is None else substitute(substitute(a.arg, columns), joined)
                for a in node.aggregates}
        ordered = _ordered_count(conditions, node, args)
        if ordered:
            value = ordered[0].sql(dialect=DUCKDB)
            listed = exp.maybe_parse(f"LIST({value} ORDER BY {value}) FILTER (WHERE {value} IS NOT "
                                     "NULL)", dialect=DUCKDB)
        else:
            read = sorted({c.name for e in (*conditions, *filter(None, args.values()))
                           for c in e.find_all(exp.Column) if not c.table})
            # A row of the list: the columns the predicates and aggregates read (a COUNT(*) of
            # every joined row reads none: the list only counts).
            listed = exp.func("LIST", exp.Struct(expressions=[
                exp.PropertyEQ(this=exp.to_identifier(c), expression=exp.column(c)) for c in read]
                ) if read else exp.true())
        pane = exp.maybe_parse(_pane_of(source.time_column, source.slide_us), dialect=DUCKDB)
        select = [exp.alias_(e.copy(), n) for n, e in list_keys.items()]
        select += [exp.alias_(pane, PANE), exp.alias_(listed, LISTS)]
        query = (exp.select(*select).from_(ROWS)
                 .group_by(*[e.copy() for e in list_keys.values()], pane.copy()))
        if predicates:
            query = query.where(exp.and_(*[p.copy() for p in predicates]))
        query = _pruned(query, conditions, other, side, keys, stored, list_keys, pane, plan) or query
        columns = (*list_keys, PANE, LISTS)
        if ordered:
            query = exp.select("*", exp.alias_(exp.maybe_parse(
                f"LIST_TRANSFORM(RANGE(1, LEN({LISTS}) + 1, {CHUNK.format(rows=LISTS)}), "
                f"LAMBDA i : {LISTS}[i])", dialect=DUCKDB), MINIMA)).from_(query.subquery())
            columns += (MINIMA,)
        table = FragmentInput(f"panes_{plan.ids[node]}", columns, source.window_size, None,
                              source.slide)
        kept = exp.and_(*[_of_element(c) for c in conditions]) if conditions else None
        return Correlated(node, PaneTable(table, source, query.sql(dialect=DUCKDB)), other,
                          tuple(on), tuple(groups), kept,
                          {n: None if a is None else _of_element(a) for n, a in args.items()},
                          ordered[1:] if ordered else None)
    return None


def _ordered_count(conditions: list[exp.Expression], node: Aggregate,
                   args: dict[str, exp.Expression | None]):
    """(v, OP, t) where every aggregate is COUNT(*) of the rows that pass the one comparison
    ``v OP t``, v a value of the row alone and t one of the other relation's row: the rule of
    ordered lists (module docstring). None where it does not apply."""
    if any(a.func != "COUNT" or args[a.name] is not None for a in node.aggregates):
        return None
    terms = [t for c in conditions for t in conjuncts(c)]
    if len(terms) != 1 or type(terms[0]) not in MIRRORED:
        return None
    term = terms[0]
    for value, threshold, op in ((term.this, term.expression, type(term)),
                                 (term.expression, term.this, MIRRORED[type(term)])):
        mine, theirs = list(value.find_all(exp.Column)), list(threshold.find_all(exp.Column))
        if mine and not any(c.table for c in mine) and all(c.table for c in theirs):
            return value, op, threshold
    return None


def _pruned(query: exp.Select, conditions: list[exp.Expression], other: Node, side: Node,
            keys, stored: dict[str, exp.Expression], list_keys: dict[str, exp.Expression],
            pane: exp.Expression, plan: LogicalPlan) -> exp.Select | None:
    """``query`` (the lists' SQL) keeping only the rows that can still count: exact pruning of a
    correlated aggregate (module docstring), where its rows must pass ``x OP f(r.M)`` (OP one
    of >, >=; f non-decreasing) and M is the MAX of the same rows' relation per group (Q1: a
    reading counts where value > 0.9 * its window's max_load). Every window that holds a row
    holds its pane, whose MAX is at most M: a row that fails against its pane's MAX, among the
    rows appended with it, fails in every window. None where the rule does not apply."""
    if not isinstance(other, Aggregate) or not other.inputs:
        return None
    if plan.relation_ids.get(other.inputs[0]) != plan.relation_ids.get(side):
        return None  # the MAX is not over the same rows
    pairs = set(keys)
    if any((g, g) not in pairs for g in other.group_by if g not in WINDOW_COLUMNS):
        return None  # a group of the MAX spans rows of several lists' groups
    maxima = {a.name: a.arg for a in other.aggregates if a.func == "MAX" and a.arg is not None}
    for term in (t for c in conditions for t in conjuncts(c)):
        bound = _bound_of(term, maxima)
        if bound is None:
            continue
        row, column, comparison = bound
        arg = substitute(maxima[column], stored)
        bounds = (exp.select(*[exp.alias_(e.copy(), f"_k{i}") for i, e in
                               enumerate(list_keys.values())],
                             exp.alias_(pane.copy(), "_kp"), exp.alias_(exp.func("MAX", arg), "_bound"))
                  .from_(ROWS).group_by(*[e.copy() for e in list_keys.values()], pane.copy()))
        if query.args.get("where"):
            bounds = bounds.where(query.args["where"].this.copy())
        on = [exp.NullSafeEQ(this=e.copy(), expression=exp.column(f"_k{i}", "b"))
              for i, e in enumerate(list_keys.values())]
        on.append(exp.EQ(this=pane.copy(), expression=exp.column("_kp", "b")))
        keeps = comparison(row.copy(), exp.column("_bound", "b"))
        return (query.copy().join(exp.Subquery(this=bounds, alias=exp.TableAlias(
                    this=exp.to_identifier("b"))), on=exp.and_(*on)).where(keeps, append=True))
    return None


def _bound_of(term: exp.Expression, maxima: dict[str, exp.Expression]):
    """(the row's side, the MAX's column, how to compare the row with a bound on the MAX) if
    ``term`` is ``row > f(r.M)`` or ``row >= f(r.M)`` (or mirrored) with f non-decreasing."""
    if isinstance(term, exp.GT | exp.GTE):
        row, threshold = term.this, term.expression
    elif isinstance(term, exp.LT | exp.LTE):
        row, threshold = term.expression, term.this
    else:
        return None
    if any(c.table for c in row.find_all(exp.Column)):
        return None
    others = {c.name for c in threshold.find_all(exp.Column) if c.table}
    if len(others) != 1 or (column := others.pop()) not in maxima:
        return None
    if not _non_decreasing(threshold):
        return None
    strict = isinstance(term, exp.GT | exp.LT)

    def compare(value: exp.Expression, maximum: exp.Expression) -> exp.Expression:
        at = threshold.transform(lambda n: maximum.copy() if isinstance(n, exp.Column) else n)
        return (exp.GT if strict else exp.GTE)(this=value, expression=at)
    return row, column, compare


def _non_decreasing(e: exp.Expression) -> bool:
    """Is ``e`` a non-decreasing function of its one column: the column, plus or minus a
    constant, times a non-negative constant?"""
    if isinstance(e, exp.Column):
        return True
    if isinstance(e, exp.Paren):
        return _non_decreasing(e.this)
    if isinstance(e, exp.Add | exp.Sub | exp.Mul):
        constants = [s for s in (e.this, e.expression) if isinstance(s, exp.Literal)]
        variable = [s for s in (e.this, e.expression) if not isinstance(s, exp.Literal)]
        if len(constants) != 1 or len(variable) != 1:
            return False
        if isinstance(e, exp.Sub) and variable[0] is e.expression:
            return False  # c - M falls as M rises
        if isinstance(e, exp.Mul) and (constants[0].is_string
                                       or float(constants[0].this) < 0):
            return False
        return _non_decreasing(variable[0])
    return False


def _pane_of(time_column: str, slide_us: int) -> str:
    """The pane of a row: k with (k - 1)·β <= ts < k·β."""
    return _pane_expression(time_column, slide_us).sql(dialect=DUCKDB)


def _pane_expression(time_column: str, slide_us: int) -> exp.Expression:
    """``_pane_of`` in any dialect: DuckDB's epoch_us and //, Spark's unix_micros and div."""
    return exp.paren(exp.Add(
        this=exp.IntDiv(this=exp.UnixMicros(this=exp.column(time_column)),
                        expression=exp.Literal.number(slide_us)),
        expression=exp.Literal.number(1)))


def _window_panes(table: FragmentInput) -> exp.Subquery:
    """(window_end, _pane) for every pane of every window_end evaluated: rows expanded to their
    windows by an equi-join (a range join made DuckDB sort the whole window's rows)."""
    pane = f"epoch_us(window_end) // {table.slide_us} - k"
    return exp.maybe_parse(
        f"(SELECT window_end, {pane} AS {PANE} FROM {WINDOW_ENDS}, "
        f"range(0, {table.panes_per_window}) AS r(k))", dialect=DUCKDB)


def _window_ends_last_pane(table: FragmentInput) -> exp.Expression:
    """The window_ends evaluated (``e``), each with its last pane K (it ends at K·β)."""
    return exp.maybe_parse(_ends_last_pane(table), dialect=DUCKDB)


def _ends_last_pane(table: FragmentInput) -> str:
    return (f"(SELECT window_end, epoch_us(window_end) // {table.slide_us} AS {LAST_PANE} "
            f"FROM {WINDOW_ENDS}) AS e")


def _in_window(table: FragmentInput, alias: str) -> exp.Expression:
    """Is the pane of a partial (or a list of rows) of ``alias`` one of e's window, K - W/β + 1
    … K? A range, not an equi-join with every pane of the window: DuckDB reads only the row
    groups whose panes can match, by their zone maps (purged partials stay in their row groups),
    and joins a window's few partials per group without a hash table of every pane."""
    return exp.maybe_parse(
        f"{alias}.{PANE} > e.{LAST_PANE} - {table.panes_per_window} "
        f"AND {alias}.{PANE} <= e.{LAST_PANE}", dialect=DUCKDB)


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
                select.append(exp.alias_(_typed(a, exp.func(a.func, arg)), c))
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

