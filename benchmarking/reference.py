"""The reference evaluator: the semantics of docs/design.md over a finite stream, in polars.

It shares the logical plan with the engines (what to compute) but none of their evaluation
code (how): tests and `tandem verify` compare every engine's rows with these.

* Every row of a stream belongs to the window instances with ``window_end - W <= ts <
  window_end``, ``window_end`` a multiple of the slide.
* Over a finite stream, the window_ends evaluated run from the first one after the first row to
  the first one at or after the last row.
* R2R operators act on the rows of one window_end; groups without rows produce nothing.
"""

from __future__ import annotations

import polars as pl

from optimizer.logical import (
    Aggregate,
    Join,
    Node,
    Project,
    Select,
    Window,
    signature,
    windows,
)

US = 1_000_000


def window_ends(streams: dict[str, pl.DataFrame], slide: float,
                time_columns: dict[str, str] | None = None) -> tuple[int, int]:
    """First and last window_end (microseconds since the epoch) over the finite streams, whose
    event times are their ``time_columns`` (``ts`` where it names none)."""
    times = [df[(time_columns or {}).get(name, "ts")].cast(pl.Datetime("us")).cast(pl.Int64)
             for name, df in streams.items() if df.height]
    first = min(int(t.min()) for t in times)
    last = max(int(t.max()) for t in times)
    step = int(round(slide * US))
    return (first // step + 1) * step, -(-last // step) * step


def evaluate(root: Node, streams: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The rows of ``root`` for every window_end, sorted; ``streams`` maps a stream name to its
    rows (its time column, the windows', of datetimes in UTC)."""
    return Evaluator(streams).result(root)


class Evaluator:
    """Evaluates plans over finite streams, remembering the relation of every subplan."""

    def __init__(self, streams: dict[str, pl.DataFrame]):
        self.streams = streams
        self._memo: dict[str, pl.DataFrame] = {}
        self.time_columns: dict[str, str] = {}  # of the streams, as the windows name them

    def result(self, root: Node) -> pl.DataFrame:
        self.time_columns.update({w.stream: w.time_column for w in windows(root)})
        rows = self.relation(root)
        return rows.select(root.columns).sort(root.columns)

    def relation(self, node: Node) -> pl.DataFrame:
        key = signature(node)
        if key not in self._memo:
            self._memo[key] = self._evaluate(node)
        return self._memo[key]

    def _evaluate(self, node: Node) -> pl.DataFrame:
        if isinstance(node, Window):
            return _instances(node, self.streams[node.stream],
                              window_ends(self.streams, node.slide, self.time_columns))
        if isinstance(node, Select):
            return self.relation(node.input).filter(pl.sql_expr(node.predicate.sql()))
        if isinstance(node, Project):
            return self.relation(node.input).select(
                [pl.sql_expr(e.sql()).alias(name) for name, e in node.expressions])
        if isinstance(node, Aggregate):
            rows = self.relation(node.input)
            return rows.group_by(list(node.group_by)).agg(
                [_aggregate(a.func, a.arg, rows).alias(a.name) for a in node.aggregates]
            ).select(node.columns)
        if isinstance(node, Join):
            left, right = self.relation(node.left), self.relation(node.right)
            keys_l = [l for l, _ in node.keys] + ["window_end"]
            keys_r = [r for _, r in node.keys] + ["window_end"]
            # The join keeps the left's columns and adds those of the right the left lacks.
            renamed = {c: f"__right_{c}" for c in right.columns}
            joined = left.join(right.rename(renamed), left_on=keys_l,
                               right_on=[renamed[r] for r in keys_r], how="inner", coalesce=False)
            joined = joined.select([pl.col(c) if c in left.columns else pl.col(renamed[c]).alias(c)
                                    for c in node.columns])
            if node.condition is not None:
                joined = joined.filter(pl.sql_expr(node.condition.sql()))
            return joined
        raise TypeError(f"cannot evaluate {node!r}")


def _instances(window: Window, rows: pl.DataFrame, bounds: tuple[int, int]) -> pl.DataFrame:
    """Every (row, window instance) pair: window_end in (ts, ts + W], a multiple of the slide."""
    step, size = int(round(window.slide * US)), int(round(window.size * US))
    first, last = bounds
    ts = pl.col(window.time_column).cast(pl.Datetime("us")).cast(pl.Int64)
    k_first = pl.max_horizontal(ts // step + 1, pl.lit(first // step))
    k_last = pl.min_horizontal((ts + size) // step, pl.lit(last // step))
    stored = [c for c in window.columns if c not in ("window_start", "window_end")]
    expanded = (rows.select(stored)
                .with_columns(pl.int_ranges(k_first, k_last + 1).alias("__k"))
                .explode("__k")
                .drop_nulls("__k")
                .with_columns((pl.col("__k") * step).cast(pl.Datetime("us")).alias("window_end"))
                .drop("__k"))
    return expanded.with_columns(
        (pl.col("window_end") - pl.duration(microseconds=size)).alias("window_start"))


def _aggregate(func: str, arg, rows: pl.DataFrame) -> pl.Expr:
    if func == "COUNT":
        return pl.len().cast(pl.Int64) if arg is None else pl.sql_expr(arg.sql()).count().cast(pl.Int64)
    value = pl.sql_expr(arg.sql())
    # SQL's AVG is a DOUBLE, and so is the SUM of REALs (DuckDB's and Spark's): polars would
    # keep a REAL's 32 bits.
    kind = rows.select(value).dtypes[0]
    if func == "AVG" or kind == pl.Float32 and func == "SUM":
        value = value.cast(pl.Float64)
    elif func == "SUM" and kind.is_integer():  # a BIGINT in both engines
        value = value.cast(pl.Int64)
    return {
        "SUM": value.sum(),
        "AVG": value.mean(),
        "MIN": value.min(),
        "MAX": value.max(),
        "MEDIAN": value.median(),  # the continuous median, as DuckDB's
    }[func]
