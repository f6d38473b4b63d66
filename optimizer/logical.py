"""The logical plan: an S2R window per stream input, R2R operators above it, R2S at the root.

Nodes are immutable and compared by identity, so a subquery that SQL references twice becomes
two distinct subtrees (a CTE is an inline view). Every plan is therefore a tree, which is what
the principle-of-optimality arguments of Ji Sec. 6.3.3 and 6.3.4 assume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

WINDOW_COLUMNS = ("window_start", "window_end")  # what HOP and TUMBLE add

AGGREGATES = ("COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN")
INCREMENTAL = frozenset({"COUNT", "SUM", "AVG"})  # Ji Sec. 6.3.2: computable incrementally
# Combinable from partial aggregates per pane (Li et al. 2005): DuckDB's fragments and Spark's
# "panes" design aggregate these per slide first.
DECOMPOSABLE = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})


@dataclass(frozen=True, eq=False)
class Node:
    columns: tuple[str, ...]
    kind: ClassVar[str] = "node"

    @property
    def inputs(self) -> tuple[Node, ...]:
        return ()

    @property
    def slide(self) -> float:
        return self.inputs[0].slide

    @property
    def instantiated(self) -> bool:
        """True once rows are tagged with one window_end each (after a join or aggregate).

        Before that, a row belongs to every window instance that covers its timestamp."""
        return self.inputs[0].instantiated

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True, eq=False)
class Window(Node):
    """S2R: a time-based sliding window (HOP) or tumbling window (TUMBLE) over a stream."""

    stream: str = ""
    time_column: str = "ts"
    size: float = 0.0  # seconds
    slide_seconds: float = 0.0
    kind: ClassVar[str] = "window"

    @property
    def slide(self) -> float:
        return self.slide_seconds

    @property
    def instantiated(self) -> bool:
        return False

    @property
    def windows_per_tuple(self) -> float:
        return self.size / self.slide_seconds

    def describe(self) -> str:
        return f"window {self.stream} [size {_duration(self.size)}, slide {_duration(self.slide_seconds)}]"


@dataclass(frozen=True, eq=False)
class Select(Node):
    input: Node = None
    predicate: exp.Expression = None
    kind: ClassVar[str] = "select"

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return f"select {self.predicate.sql()}"


@dataclass(frozen=True, eq=False)
class Project(Node):
    input: Node = None
    expressions: tuple[tuple[str, exp.Expression], ...] = ()
    kind: ClassVar[str] = "project"

    @property
    def inputs(self):
        return (self.input,)

    def describe(self) -> str:
        return "project " + ", ".join(
            name if isinstance(e, exp.Column) and e.name == name else f"{e.sql()} AS {name}"
            for name, e in self.expressions
        )


@dataclass(frozen=True, eq=False)
class Join(Node):
    """Inner join of two relations at equal window_end: equi-keys plus an optional theta part."""

    left: Node = None
    right: Node = None
    keys: tuple[tuple[str, str], ...] = ()  # (left column, right column)
    condition: exp.Expression | None = None  # residual theta predicate over the joined columns
    kind: ClassVar[str] = "join"

    @property
    def inputs(self):
        return (self.left, self.right)

    @property
    def slide(self) -> float:
        return self.left.slide

    @property
    def instantiated(self) -> bool:
        return True

    def describe(self) -> str:
        parts = [f"{a} = {b}" if a != b else a for a, b in self.keys]
        if self.condition is not None:
            parts.append(self.condition.sql())
        return "join on " + (" AND ".join(parts) if parts else "window_end")


@dataclass(frozen=True)
class AggCall:
    name: str  # output column
    func: str  # one of AGGREGATES
    arg: exp.Expression | None  # None for COUNT(*)
    # The argument is an integer: its SUM is a BIGINT, as Spark's (DuckDB's would be a HUGEINT).
    integer: bool = False

    @property
    def incremental(self) -> bool:
        return self.func in INCREMENTAL

    def sql(self) -> str:
        return f"{self.func}({'*' if self.arg is None else self.arg.sql()})"


@dataclass(frozen=True, eq=False)
class Aggregate(Node):
    """Grouped aggregation of each instantaneous relation; window_end is always a grouping key."""

    input: Node = None
    group_by: tuple[str, ...] = ()
    aggregates: tuple[AggCall, ...] = ()
    kind: ClassVar[str] = "aggregate"

    @property
    def inputs(self):
        return (self.input,)

    @property
    def instantiated(self) -> bool:
        return True

    @property
    def incremental(self) -> bool:
        return all(a.incremental for a in self.aggregates)

    def describe(self) -> str:
        keys = [k for k in self.group_by if k != "window_end"]
        aggs = ", ".join(f"{a.sql()} AS {a.name}" for a in self.aggregates)
        return f"aggregate {aggs}" + (f" by {', '.join(keys)}" if keys else "")


R2R = (Select, Project, Join, Aggregate)


def is_r2r(node: Node) -> bool:
    return isinstance(node, R2R)


def post_order(root: Node) -> list[Node]:
    out: list[Node] = []

    def visit(n: Node) -> None:
        for child in n.inputs:
            visit(child)
        out.append(n)

    visit(root)
    return out


def r2r_operators(root: Node) -> list[Node]:
    return [n for n in post_order(root) if is_r2r(n)]


def source_window(node: Node) -> Window:
    """The window a row of a windowed stream (not yet tagged with a window_end) comes from:
    only selections and projections lie between them."""
    while not isinstance(node, Window):
        node = node.inputs[0]
    return node


def windows(root: Node) -> list[Window]:
    return [n for n in post_order(root) if isinstance(n, Window)]


def signature(node: Node) -> str:
    """A structural key: equal for subtrees that compute the same relation (e.g. both copies
    of a CTE that SQL references twice), so the same input is moved into DuckDB only once."""
    inner = ",".join(signature(c) for c in node.inputs)
    return f"{node.describe()}({inner})"


def assign_ids(root: Node) -> dict[Node, str]:
    """Readable, stable operator ids in post-order: select_1, aggregate_1, join_1, ..."""
    counters: dict[str, int] = {}
    ids: dict[Node, str] = {}
    for node in post_order(root):
        counters[node.kind] = counters.get(node.kind, 0) + 1
        ids[node] = f"{node.kind}_{counters[node.kind]}"
    return ids


def stateless_rows(node: Node, base: Node | None = None
                   ) -> tuple[list[exp.Expression], dict[str, exp.Expression]]:
    """The predicates and columns of a chain of selections and projections over a windowed
    stream, as expressions over the columns of ``base`` (default: the stream itself), each
    projection substituted into what reads it."""
    if node is base or isinstance(node, Window):
        return [], {c: exp.column(c) for c in node.columns if c not in WINDOW_COLUMNS}
    predicates, columns = stateless_rows(node.input, base)
    if isinstance(node, Select):
        return [*predicates, substitute(node.predicate, columns)], columns
    if isinstance(node, Project):
        return predicates, {n: substitute(e, columns) for n, e in node.expressions
                            if n not in WINDOW_COLUMNS}
    raise TypeError(f"{node.kind} is not a stateless operator")


def substitute(e: exp.Expression, columns: dict[str, exp.Expression]) -> exp.Expression:
    """``e`` with each column that ``columns`` defines replaced by its definition."""
    return e.transform(lambda n: columns[n.name].copy()
                       if isinstance(n, exp.Column) and n.name in columns else n)


def _duration(seconds: float) -> str:
    for unit, size in (("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


class LogicalPlan:
    """A logical plan with its operators indexed: ids, post-order of the R2R operators (the
    order phase two enumerates in) and the streams it reads."""

    def __init__(self, root: Node):
        self.root = root
        self.ids = assign_ids(root)
        self.by_id = {v: k for k, v in self.ids.items()}
        self.operators = r2r_operators(root)  # post-order
        self.index = {op: i for i, op in enumerate(self.operators)}
        self.streams = sorted({w.stream for w in windows(root)})
        # Subtrees computing the same relation (both copies of a CTE) share one relation id.
        first: dict[str, str] = {}
        for node in post_order(root):
            first.setdefault(signature(node), self.ids[node])
        self.relation_ids = {node: first[signature(node)] for node in self.ids}

    def __len__(self) -> int:
        return len(self.operators)
