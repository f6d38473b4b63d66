"""DSPS-ops: the R2R operators of a plan as Spark Structured Streaming operators.

A relation is a streaming DataFrame. Rows of a windowed stream keep their timestamp; once a
join or an aggregate has tagged rows with their window instance, they carry Spark's ``window``
struct (and ``window_end``, ``window_start`` where the plan names them). Every stateful operator
is one of Spark's built-ins, exact for these semantics:

* an aggregate over a windowed stream is ``groupBy(window(ts, W, beta), keys)`` in append mode:
  a window's groups are emitted once the watermark passes its end, and MEDIAN is Spark's exact
  ``median``;
* an aggregate over tagged rows groups by their ``window`` struct (chained window aggregation);
* a join pairs rows of equal ``window`` (a time-window stream-stream join); rows of a windowed
  stream are first expanded to each window instance that holds them, as ``window()`` does.

State lives in Spark's state store (RocksDB) and is evicted by the event-time watermark.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from optimizer.errors import TandemError
from optimizer.logical import Aggregate, Join, Node, Project, Select, Window, source_window

WINDOW_COLUMNS = ("window_start", "window_end")


def relation(node: Node, stream: DataFrame) -> DataFrame:
    """The streaming DataFrame of ``node`` over ``stream`` (data rows with a watermark on ts)."""
    if isinstance(node, Window):
        return stream.select(*[c for c in node.columns if c not in WINDOW_COLUMNS])
    if isinstance(node, Select):
        predicate = F.expr(node.predicate.sql(dialect="spark"))
        if not node.input.instantiated:
            # Spark pushes predicates that do not name the event-time column below the
            # watermark; one that names it stays above, where the heartbeat moves the watermark.
            predicate = F.when(F.col(source_window(node).time_column).isNotNull(), predicate).otherwise(False)
        return relation(node.input, stream).where(predicate)
    if isinstance(node, Project):
        child = relation(node.input, stream)
        kept = [F.expr(e.sql(dialect="spark")).alias(n) for n, e in node.expressions
                if node.input.instantiated or n not in WINDOW_COLUMNS]
        return child.select(*kept, *(["window"] if node.input.instantiated else []))
    if isinstance(node, Aggregate):
        child = relation(node.input, stream)
        keys = [k for k in node.group_by if k not in WINDOW_COLUMNS]
        group = (F.col("window") if node.input.instantiated
                 else _window(node.input)).alias("window")
        out = child.groupBy(group, *keys).agg(*[_aggregate(a.func, a.arg).alias(a.name)
                                                 for a in node.aggregates])
        return _with_window_columns(out, node.columns)
    if isinstance(node, Join):
        left = _instantiated(node.left, stream).alias("l")
        right = _instantiated(node.right, stream).alias("r")
        condition = F.col("l.window") == F.col("r.window")
        for l, r in node.keys:
            condition = condition & (F.col(f"l.{l}") == F.col(f"r.{r}"))
        left_columns = set(node.left.columns) | {"window"}
        joined = left.join(right, condition, "inner")
        columns = [F.col(f"l.{c}" if c in left_columns else f"r.{c}").alias(c)
                   for c in node.columns] + [F.col("l.window").alias("window")]
        joined = joined.select(*columns)
        if node.condition is not None:
            joined = joined.where(F.expr(node.condition.sql(dialect="spark")))
        return joined
    raise TandemError(f"{node.kind} cannot run in Spark")


def _window(node: Node) -> Column:
    window = source_window(node)
    return F.window(window.time_column, f"{_micros(window.size)} microseconds",
                    f"{_micros(window.slide)} microseconds")


def _instantiated(node: Node, stream: DataFrame) -> DataFrame:
    """Rows tagged with their window instance: a windowed stream's rows are expanded to every
    window that holds them."""
    rows = relation(node, stream)
    if node.instantiated:
        return rows
    expanded = rows.select(_window(node).alias("window"), *rows.columns)
    return _with_window_columns(expanded, node.columns)


def _with_window_columns(frame: DataFrame, columns) -> DataFrame:
    for name, field in (("window_start", "start"), ("window_end", "end")):
        if name in columns:
            frame = frame.withColumn(name, F.col(f"window.{field}"))
    return frame


def _aggregate(func: str, arg) -> Column:
    if func == "COUNT":
        return F.count(F.lit(1)) if arg is None else F.count(F.expr(arg.sql(dialect="spark")))
    value = F.expr(arg.sql(dialect="spark"))
    return {"SUM": F.sum, "AVG": F.avg, "MIN": F.min, "MAX": F.max, "MEDIAN": F.median}[func](value)


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)
