"""SQL front-end: a continuous query in SQL becomes a logical plan (``optimizer.logical``).

Windows are RisingWave-style windowing table functions in FROM:
``HOP(stream, ts, slide, size)`` and ``TUMBLE(stream, ts, size)``; both add ``window_start`` and
``window_end``. R2R operators apply per instantaneous relation, so ``window_end`` is an implicit
grouping key and an implicit join key; writing it out, as RisingWave and Flink users do, is allowed.

Anything outside the supported SPJA subset raises ``QueryError`` with the position of the
construct; the CLI prints it on one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from optimizer.catalog import Catalog
from optimizer.errors import QueryError
from optimizer.expressions import conjunction, conjuncts
from optimizer.logical import (
    AGGREGATES,
    WINDOW_COLUMNS,
    AggCall,
    Aggregate,
    Join,
    Node,
    Project,
    Select,
    Window,
    source_window,
)


def sql_type(expression: exp.Expression, types: dict[str, exp.DataType]) -> exp.DataType:
    """The SQL type of ``expression`` over columns of ``types`` (UNKNOWN where it cannot tell)."""
    typed = expression.transform(lambda n: exp.cast(exp.null(), types[n.name])
                                 if isinstance(n, exp.Column) and n.name in types else n)
    return annotate_types(typed).type


def column_types(node: Node, catalog: Catalog) -> dict[str, exp.DataType]:
    """The SQL types of ``node``'s columns: its streams' declared types, carried through
    projections, aggregates (as both engines type them: COUNT and an integer SUM are BIGINT,
    AVG is DOUBLE) and joins."""
    if isinstance(node, Window):
        declared = catalog.stream(node.stream).columns
        return {c: exp.DataType.build("TIMESTAMP") if c in WINDOW_COLUMNS
                else exp.DataType.build(declared[c]) for c in node.columns}
    if isinstance(node, Join):
        return {**column_types(node.right, catalog), **column_types(node.left, catalog)}
    inner = column_types(node.inputs[0], catalog)
    if isinstance(node, Project):
        return {name: sql_type(e, inner) for name, e in node.expressions}
    if isinstance(node, Aggregate):
        types = {k: inner[k] for k in node.group_by}
        for a in node.aggregates:
            kind = "DOUBLE" if a.func in ("AVG", "MEDIAN") else None
            if a.func == "COUNT" or a.func == "SUM" and a.integer:
                kind = "BIGINT"
            types[a.name] = exp.DataType.build(kind) if kind else sql_type(a.arg, inner)
        return types
    return inner


# Scalar expression nodes a predicate or projection may use. Everything else is refused by name.
_SCALAR = (
    exp.Column, exp.Literal, exp.Paren, exp.Boolean, exp.Null, exp.Neg,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.And, exp.Or, exp.Not, exp.Between, exp.In, exp.Is,
    exp.Case, exp.If, exp.Cast, exp.DataType, exp.Abs, exp.Round, exp.Coalesce,
    exp.Greatest, exp.Least, exp.Identifier, exp.Star, exp.Alias,
)
_AGG_TYPES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX",
              exp.Median: "MEDIAN"}
_UNITS = {"MILLISECOND": 0.001, "SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}


class _Unsupported(Exception):
    """Raised while planning; ``parse_query`` turns it into a ``QueryError`` with a position.

    sqlglot records the offsets of identifiers and literals but not of keywords, so a construct
    that is a keyword (LEFT JOIN, ORDER BY, DISTINCT, a function name) is found in the text: the
    last match of ``keyword`` before the node's first recorded token, or with ``after`` the
    first match behind it."""

    def __init__(self, message: str, node: exp.Expression | None = None,
                 keyword: str | None = None, after: bool = False):
        super().__init__(message)
        self.message, self.node, self.keyword, self.after = message, node, keyword, after

    def locate(self, sql: str) -> QueryError:
        start = _first_offset(self.node)
        offset = start
        if self.keyword:
            found = [m.start() for m in re.finditer(rf"\b(?:{self.keyword})\b", sql, re.IGNORECASE)]
            if start is None:
                before, behind = [], found
            else:
                before = [f for f in found if f <= start]
                behind = [f for f in found if f >= start]
            ordered = (behind + before[::-1]) if self.after else (before[::-1] + behind)
            offset = ordered[0] if ordered else start
        message = self.message
        if "{}" in message:  # the construct as the user wrote it
            word = re.match(r"\w+", sql[offset:]) if offset is not None else None
            message = message.format(word.group(0).upper() if word else self.keyword)
        if offset is None:
            return QueryError(message)
        line = sql.count("\n", 0, offset) + 1
        col = offset - (sql.rfind("\n", 0, offset) + 1) + 1
        return QueryError(message, line, col)


def _first_offset(node: exp.Expression | None) -> int | None:
    """Character offset of the first token of ``node`` whose position sqlglot recorded."""
    if node is None:
        return None
    offsets = [n.meta["start"] for n in node.walk() if "start" in (n.meta or {})]
    return min(offsets) if offsets else None


fail = _Unsupported


@dataclass
class _Item:
    """One FROM item as seen by the enclosing SELECT."""

    qualifier: str
    node: Node
    # column name -> flat name in the combined relation; None marks a clash that needs a rename
    columns: dict[str, str | None] = field(default_factory=dict)
    source: exp.Expression | None = None  # the FROM item as written, for error positions


class _Scope:
    def __init__(self, items: list[_Item], using: set[str] | None = None):
        self.items = items
        self.using = using or set()

    def resolve(self, column: exp.Column) -> str:
        name, qualifier = column.name.lower(), column.table.lower()
        if qualifier:
            item = next((i for i in self.items if i.qualifier == qualifier), None)
            if item is None:
                raise fail(f"unknown table or alias {qualifier!r}", column)
            candidates = [item] if name in item.columns else []
        else:
            candidates = [i for i in self.items if name in i.columns]
            if len(candidates) > 1 and name not in self.using and name != "window_end":
                raise fail(f"column {name!r} is ambiguous: qualify it with a table alias", column)
        if not candidates:
            raise fail(f"unknown column {column.sql()!r}", column)
        flat = candidates[0].columns[name]
        if flat is None:
            raise fail(
                f"column {column.sql()!r} clashes with a column of the other join input: "
                "rename it in a subquery", column)
        return flat

    def item_of(self, column: exp.Column) -> _Item:
        qualifier = column.table.lower()
        if qualifier:
            return next(i for i in self.items if i.qualifier == qualifier)
        return next(i for i in self.items if column.name.lower() in i.columns)

    def rewrite(self, expression: exp.Expression) -> exp.Expression:
        """Check a scalar expression and replace its columns by flat, unqualified names."""
        for node in expression.walk():
            _check_scalar(node)
        return expression.copy().transform(
            lambda n: exp.column(self.resolve(n)) if isinstance(n, exp.Column) else n)


def _check_scalar(node: exp.Expression) -> None:
    if isinstance(node, exp.Window):
        raise fail("window functions (OVER ...) are not supported: use HOP or TUMBLE in FROM",
                   node, "OVER", after=True)
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        raise fail("subqueries inside expressions are not supported: write them as a JOIN", node,
                   "SELECT|EXISTS")
    if isinstance(node, tuple(_AGG_TYPES)):
        return
    if isinstance(node, exp.Distinct) and node.parent is not None:
        func = node.parent.sql_name()
        raise fail(f"{func}(DISTINCT ...) is not supported", node.parent, func)
    if isinstance(node, exp.AggFunc):
        raise fail(f"aggregate {node.sql_name()} is not supported (use {', '.join(AGGREGATES)})",
                   node, node.sql_name())
    if isinstance(node, exp.In) and node.args.get("query"):
        raise fail("IN (subquery) is not supported: write it as a JOIN", node, "IN", after=True)
    if not isinstance(node, _SCALAR):
        name = node.sql_name() if isinstance(node, exp.Func) else type(node).__name__
        if isinstance(node, exp.Func):  # name it as written: sqlglot renames RANDOM to RAND
            raise fail("{} is not supported in a continuous query", node, rf"{name}\w*")
        raise fail(f"{name} is not supported in a continuous query", node)


def parse_query(sql: str, catalog: Catalog) -> Node:
    """Parse one SELECT statement into a logical plan rooted at its last R2R operator."""
    try:
        statements = [s for s in sqlglot.parse(sql) if s is not None]
    except sqlglot.ParseError as err:
        first = err.errors[0] if err.errors else {}
        line, col = first.get("line"), first.get("col")
        if col is not None:  # sqlglot points at the end of the offending token
            col = max(1, col - len(first.get("highlight") or "x") + 1)
        raise QueryError(f"malformed SQL: {first.get('description', err)}", line, col) from None
    except sqlglot.TokenError as err:
        # The message quotes the SQL around the bad token, its newlines too: keep one line.
        raise QueryError(f"malformed SQL: {' '.join(str(err).split())}") from None
    if not statements:
        raise QueryError("empty query: write one SELECT statement")
    try:
        if len(statements) > 1:
            raise fail("one statement per query: found more than one", statements[1], "SELECT")
        return _Planner(catalog).query(statements[0], {})
    except _Unsupported as err:
        raise err.locate(sql) from None


class _Planner:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    # -- statements -------------------------------------------------------------------------

    def query(self, statement: exp.Expression, ctes: dict[str, exp.Expression]) -> Node:
        if isinstance(statement, (exp.Union, exp.Intersect, exp.Except)):
            raise fail(f"{statement.key.upper()} is not supported: one SELECT per query", statement,
                       statement.key, after=True)
        if isinstance(statement, exp.Subquery):
            return self.query(statement.this, ctes)
        if not isinstance(statement, exp.Select):
            raise fail(f"only SELECT queries can run continuously, not {statement.key.upper()}",
                       statement, statement.key)
        for key, what in (("order", "ORDER BY"), ("limit", "LIMIT"), ("offset", "OFFSET"),
                          ("qualify", "QUALIFY")):
            if statement.args.get(key):
                raise fail(f"{what} is not supported: a continuous query emits every window",
                           statement.args[key], what.replace(" ", r"\s+"))
        if statement.args.get("distinct"):
            raise fail("SELECT DISTINCT is not supported: use GROUP BY", statement, "DISTINCT")
        with_ = statement.args.get("with_")
        if with_ is not None:
            if with_.args.get("recursive"):
                raise fail("WITH RECURSIVE is not supported", with_, "RECURSIVE")
            ctes = dict(ctes)
            for cte in with_.expressions:
                ctes[cte.alias_or_name.lower()] = cte.this
        return self.select(statement, ctes)

    def select(self, select: exp.Select, ctes: dict[str, exp.Expression]) -> Node:
        from_ = select.args.get("from_")
        if from_ is None:
            raise fail("a continuous query needs FROM HOP(...) or TUMBLE(...)", select)
        items = [self.from_item(from_.this, ctes)]
        on_parts: list[tuple[exp.Expression, int]] = []  # (conjunct, index of the join it is in)
        using: set[str] = set()
        for join in select.args.get("joins") or []:
            side, kind = join.side.upper(), join.kind.upper()
            if side:
                raise fail(f"{side} OUTER JOIN is not supported: Tandem joins are inner joins",
                           join, side)
            if kind in ("CROSS", "SEMI", "ANTI", "NATURAL") or join.args.get("method"):
                what = kind or join.args["method"].upper()
                raise fail(f"{what} JOIN is not supported", join, what)
            if not join.args.get("on") and not join.args.get("using"):
                raise fail("a join needs ON or USING: cross products are not supported", join,
                           "JOIN")
            items.append(self.from_item(join.this, ctes))
            for ident in join.args.get("using") or []:
                name = ident.name.lower()
                using.add(name)
                left = exp.column(name, table=_owner(items[:-1], name, ident))
                on_parts.append((exp.EQ(this=left, expression=exp.column(name, table=items[-1].qualifier)),
                                 len(items) - 1))
            on_parts += [(c, len(items) - 1) for c in conjuncts(join.args.get("on"))]
        for item in items[1:]:
            if item.node.slide != items[0].node.slide:
                raise fail("joined windows must share one slide (their window_end values must "
                           "align)", item.source)
        scope = _Scope(items, using)
        where = conjuncts(select.args["where"].this) if select.args.get("where") else []
        node = self.joins(items, scope, on_parts, where)
        return self.aggregate_and_project(select, node, scope)

    # -- FROM -------------------------------------------------------------------------------

    def from_item(self, table: exp.Expression, ctes) -> _Item:
        if isinstance(table, exp.Subquery):
            if not table.alias:
                raise fail("a subquery in FROM needs an alias", table)
            node = self.query(table.this, ctes)
            return _Item(table.alias.lower(), node, {c: c for c in node.columns}, table)
        if not isinstance(table, exp.Table):
            raise fail(f"{type(table).__name__} in FROM is not supported", table)
        if isinstance(table.this, exp.Func):  # a table function: HOP or TUMBLE
            node = self.window(table.this)
            return _Item((table.alias or node.stream).lower(), node, {c: c for c in node.columns},
                         table)
        name = table.name.lower()
        if name in ctes:
            node = self.query(ctes[name], {k: v for k, v in ctes.items() if k != name})
            return _Item((table.alias or name).lower(), node, {c: c for c in node.columns}, table)
        if self.catalog.stream(name):
            raise fail(f"stream {name!r} must be windowed: FROM HOP({name}, ts, slide, size) or "
                       f"TUMBLE({name}, ts, size)", table)
        raise fail(f"unknown stream or table {name!r} (not in the catalog or a WITH clause)", table)

    def window(self, call: exp.Expression) -> Window:
        fname = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).upper()
        args = list(call.expressions) if isinstance(call, exp.Anonymous) else list(call.args.values())
        if fname not in ("HOP", "TUMBLE"):
            raise fail(f"table function {fname} is not supported: use HOP or TUMBLE", call)
        want = 4 if fname == "HOP" else 3
        if len(args) != want:
            usage = "HOP(stream, ts, slide, size)" if fname == "HOP" else "TUMBLE(stream, ts, size)"
            raise fail(f"{fname} takes {want} arguments: {usage}", call)
        if not isinstance(args[0], exp.Column):
            raise fail(f"the first argument of {fname} must name a stream", args[0])
        stream = self.catalog.stream(args[0].name)
        if stream is None:
            raise fail(f"unknown stream {args[0].name!r} (not in the catalog)", args[0])
        if not isinstance(args[1], exp.Column) or args[1].name.lower() != stream.time_column:
            raise fail(f"{fname} must use the time column {stream.time_column!r} of {stream.name}",
                       args[1])
        slide = _seconds(args[2])
        size = _seconds(args[3]) if fname == "HOP" else slide
        if size < slide or abs(size / slide - round(size / slide)) > 1e-9:
            raise fail(f"window size must be a positive multiple of the slide ({size:g} s, "
                       f"{slide:g} s)", call)
        columns = tuple(stream.columns) + WINDOW_COLUMNS
        return Window(columns, stream=stream.name, time_column=stream.time_column, size=size,
                      slide_seconds=slide)

    # -- joins and selections ---------------------------------------------------------------

    def joins(self, items: list[_Item], scope: _Scope, on_parts, where) -> Node:
        """Build the joins as written; conjuncts over one input are pushed down to it, the other
        ON conjuncts become equi-keys or the theta condition of their join, and the other WHERE
        conjuncts stay as a selection above the joins (Ji's relational form of Q1)."""
        local: list[list[exp.Expression]] = [[] for _ in items]
        keys: list[list[tuple[exp.Column, exp.Column]]] = [[] for _ in items]
        theta: list[list[exp.Expression]] = [[] for _ in items]
        above: list[exp.Expression] = []
        for part, join_index in on_parts + [(w, None) for w in where]:
            for node in part.walk():
                _check_scalar(node)
                if isinstance(node, exp.AggFunc):
                    raise fail("aggregates are not allowed in WHERE or ON: use HAVING", node,
                               node.sql_name())
            cols = list(part.find_all(exp.Column))
            for c in cols:
                scope.resolve(c)  # unknown or ambiguous columns fail here, with their position
            owners = sorted({items.index(scope.item_of(c)) for c in cols})
            names = {c.name.lower() for c in cols}
            if names & set(WINDOW_COLUMNS):
                if isinstance(part, exp.EQ) and names == {"window_end"} and len(owners) == 2:
                    continue  # R2R joins pair equal window_end anyway
                raise fail("window_start and window_end may only be equated in a join condition",
                           part)
            if len(owners) <= 1:
                local[owners[0] if owners else 0].append(part)
            elif join_index is None:
                above.append(part)
            elif max(owners) > join_index:
                raise fail("a join condition refers to a table joined later", part)
            elif (isinstance(part, exp.EQ) and len(owners) == 2
                  and isinstance(part.this, exp.Column) and isinstance(part.expression, exp.Column)):
                a, b = part.this, part.expression
                if items.index(scope.item_of(a)) == join_index:
                    a, b = b, a
                keys[join_index].append((a, b))
            else:
                theta[join_index].append(part)

        for i in range(1, len(items)):
            if not keys[i] and not theta[i]:
                raise fail("the join condition must relate both inputs: cross products are not "
                           "supported", items[i].source, "JOIN")

        def pushed(i: int) -> Node:
            return _selected(items[i].node, [_Scope([items[i]]).rewrite(p) for p in local[i]])

        node = pushed(0)
        for i in range(1, len(items)):
            right = pushed(i)
            pairs = tuple(dict.fromkeys((scope.resolve(a), b.name.lower()) for a, b in keys[i]))
            # The joined relation keeps the left's columns and adds the right's new ones. A right
            # column whose name is taken and that is not equated to it is renamed
            # <alias>_<column> by a projection below the join (a self-join of a CTE:
            # x.plug_id < y.plug_id); window bounds and the time column stay the left's.
            equated = {r for l, r in pairs if l == r} | {"window_end"}
            fixed = set(WINDOW_COLUMNS) | ({source_window(right).time_column}
                                           if not right.instantiated else set())
            rename = _renames(items[i].qualifier, right.columns, node.columns, equated | fixed)
            if rename:
                right = Project(tuple(rename.get(c, c) for c in right.columns), input=right,
                                expressions=tuple((rename.get(c, c), exp.column(c))
                                                  for c in right.columns))
                pairs = tuple((l, rename.get(r, r)) for l, r in pairs)
            items[i].columns = {c: rename.get(c, c if c not in node.columns or c in equated
                                               else None) for c in items[i].columns}
            columns = node.columns + tuple(c for c in right.columns if c not in node.columns)
            condition = conjunction([scope.rewrite(t) for t in theta[i]])
            node = Join(columns, left=node, right=right, keys=pairs, condition=condition)
        return _selected(node, [scope.rewrite(p) for p in above])

    # -- aggregation and projection ---------------------------------------------------------

    def _integer(self, arg: exp.Expression, node: Node) -> bool:
        """Whether ``arg``, over the rows of ``node``, is an integer (``column_types``)."""
        return sql_type(arg, column_types(node, self.catalog)).is_type(
            *exp.DataType.INTEGER_TYPES)

    def aggregate_and_project(self, select: exp.Select, node: Node, scope: _Scope) -> Node:
        group, having = select.args.get("group"), select.args.get("having")
        outputs = select.expressions
        for output in outputs:
            for n in output.walk():
                _check_scalar(n)
        if not group and not any(isinstance(n, tuple(_AGG_TYPES)) for o in outputs for n in o.walk()):
            if having:
                raise fail("HAVING needs GROUP BY or an aggregate", having)
            return self.project(outputs, node, scope)
        keys: list[str] = []
        for g in group.expressions if group else []:
            if not isinstance(g, exp.Column):
                raise fail("GROUP BY supports plain columns only", g)
            keys.append(scope.resolve(g))
        if "window_end" not in keys:
            keys.append("window_end")  # aggregates are per instantaneous relation
        calls: list[AggCall] = []

        def call_name(call: exp.Expression, alias: str | None) -> str:
            func, arg = _AGG_TYPES[type(call)], call.this
            if isinstance(arg, exp.Distinct):
                raise fail(f"{func}(DISTINCT ...) is not supported", call, func)
            # sqlglot parses COUNT() and COUNT(a, b) (and refuses the others' wrong arities).
            if arg is None or call.args.get("expressions"):
                raise fail("COUNT takes one argument: COUNT(*) or COUNT(column)", call, func)
            if isinstance(arg, exp.Star):
                if func != "COUNT":
                    raise fail(f"{func}(*) is not valid: name a column", call, func)
                arg = None
            else:
                inner = next((n for n in arg.walk() if isinstance(n, exp.AggFunc)), None)
                if inner is not None:
                    raise fail("nested aggregates are not supported: aggregate in a subquery",
                               inner, inner.sql_name())
                arg = scope.rewrite(arg)
            for existing in calls:
                if existing.func == func and existing.arg == arg:
                    return existing.name
            calls.append(AggCall(alias or f"_agg{len(calls) + 1}", func, arg,
                                 arg is not None and self._integer(arg, node)))
            return calls[-1].name

        def rewrite(expression: exp.Expression, alias: str | None = None) -> exp.Expression:
            if isinstance(expression, tuple(_AGG_TYPES)):
                return exp.column(call_name(expression, alias))
            for n in expression.walk():
                _check_scalar(n)
            replaced = expression.copy().transform(
                lambda n: exp.column(call_name(n, None)) if isinstance(n, tuple(_AGG_TYPES)) else n)
            agg_names = {c.name for c in calls}
            for col in replaced.find_all(exp.Column):
                if col.name.lower() not in agg_names and scope.resolve(col) not in keys:
                    raise fail(f"column {col.sql()!r} must appear in GROUP BY or in an aggregate",
                               col)
            return replaced.transform(
                lambda n: exp.column(scope.resolve(n))
                if isinstance(n, exp.Column) and n.name.lower() not in agg_names else n)

        projected: list[tuple[str, exp.Expression]] = []
        for output in outputs:
            if isinstance(output, exp.Star):
                raise fail("SELECT * cannot be combined with GROUP BY", output)
            alias = output.alias.lower() if isinstance(output, exp.Alias) else None
            inner = output.this if isinstance(output, exp.Alias) else output
            name = alias or (inner.name.lower() if isinstance(inner, exp.Column) else None)
            if name is None:
                raise fail("a computed column needs a name: add AS <name>", output)
            projected.append((name, rewrite(inner, alias)))
        having_expr = rewrite(having.this) if having else None
        names = [n for n, _ in projected]
        if len(set(names)) != len(names):
            raise fail("two output columns have the same name", select)
        # When the SELECT list only names keys and aggregates, the aggregate emits them in that
        # order and needs no projection above it.
        bare = all(isinstance(e, exp.Column) and e.name == n for n, e in projected)
        if bare and having_expr is None:
            order = names + [k for k in keys if k not in names]
            return Aggregate(tuple(order), input=node, group_by=tuple(keys),
                             aggregates=tuple(calls))
        result: Node = Aggregate(tuple(keys) + tuple(c.name for c in calls), input=node,
                                 group_by=tuple(keys), aggregates=tuple(calls))
        if having_expr is not None:
            result = Select(result.columns, input=result, predicate=having_expr)
        return _projected(result, projected)

    def project(self, outputs, node: Node, scope: _Scope) -> Node:
        if len(outputs) == 1 and isinstance(outputs[0], exp.Star):
            return node
        projected = []
        for output in outputs:
            if isinstance(output, exp.Star):
                projected += [(c, exp.column(c)) for c in node.columns]
                continue
            alias = output.alias.lower() if isinstance(output, exp.Alias) else None
            inner = output.this if isinstance(output, exp.Alias) else output
            if isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star):
                raise fail("qualified * is not supported: list the columns", output)
            name = alias or (inner.name.lower() if isinstance(inner, exp.Column) else None)
            if name is None:
                raise fail("a computed column needs a name: add AS <name>", output)
            projected.append((name, scope.rewrite(inner)))
        names = [n for n, _ in projected]
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice:
            at = next(o for o in outputs[1:] if (o.alias or o.name).lower() == twice)
            raise fail(f"two output columns are named {twice!r}: name one with AS", at)
        return _projected(node, projected)


def _renames(qualifier: str, columns, taken, kept) -> dict[str, str]:
    """New names for the columns of a join's right input that the left input has already."""
    renamed: dict[str, str] = {}
    used = set(taken) | set(columns)
    for column in columns:
        if column in taken and column not in kept:
            name, k = f"{qualifier}_{column}", 2
            while name in used:
                name, k = f"{qualifier}_{column}_{k}", k + 1
            renamed[column] = name
            used.add(name)
    return renamed


def _projected(node: Node, projected: list[tuple[str, exp.Expression]]) -> Node:
    """A projection that keeps what later operators need: window_end, which every relation
    carries, and for rows of a windowed stream their timestamp and window_start."""
    names = [n for n, _ in projected]
    carried = WINDOW_COLUMNS if node.instantiated else (source_window(node).time_column, *WINDOW_COLUMNS)
    for column in carried:
        if column not in names and column in node.columns:
            projected.append((column, exp.column(column)))
            names.append(column)
    return Project(tuple(names), input=node, expressions=tuple(projected))


def _selected(node: Node, predicates: list[exp.Expression]) -> Node:
    for p in predicates:
        node = Select(node.columns, input=node, predicate=p)
    return node


def _owner(items: list[_Item], name: str, ident: exp.Expression) -> str:
    owners = [i.qualifier for i in items if name in i.columns]
    if not owners:
        raise fail(f"USING column {name!r} is not in the left input", ident)
    return owners[0]


def _seconds(interval: exp.Expression) -> float:
    if not isinstance(interval, exp.Interval):
        raise fail("window slide and size must be INTERVAL literals, e.g. INTERVAL '1' MINUTE",
                   interval)
    text = interval.this.name if interval.this is not None else ""
    unit = interval.args.get("unit")
    unit_text = unit.name if unit is not None else ""
    if not unit_text and " " in text.strip():
        text, unit_text = text.strip().split(None, 1)
    unit_text = unit_text.upper().rstrip("S") if unit_text.upper() != "S" else "SECOND"
    try:
        value = float(text)
    except ValueError:
        raise fail(f"interval {interval.sql()!r} needs a number", interval) from None
    if unit_text not in _UNITS:
        raise fail(f"interval unit {unit_text or '(none)'} is not supported "
                   f"(use {', '.join(u.lower() for u in _UNITS)})", interval)
    if value <= 0:
        raise fail("window slide and size must be positive", interval)
    return value * _UNITS[unit_text]


__all__ = ["parse_query"]
