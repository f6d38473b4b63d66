"""DSPS-ops: the R2R operators of a plan as Spark operators.

**Streaming operators** (``Streaming.relation``) run where only the stream lies below an operator. A
relation is a streaming DataFrame. Rows of a windowed stream keep their timestamp; once a join
or an aggregate has tagged rows with their window instance, they carry Spark's ``window`` struct
(and ``window_end``, ``window_start`` where the plan names them). Every stateful operator is one
of Spark's built-ins, exact for these semantics, with its state in Spark's state store (RocksDB)
evicted by the event-time watermark:

* an aggregate over a windowed stream is ``groupBy(window(ts, W, beta), keys)`` in append mode:
  a window's groups are emitted once the watermark passes its end, and MEDIAN is Spark's exact
  ``median``;
* an aggregate over tagged rows groups by their ``window`` struct (chained window aggregation);
* a join pairs rows of equal window end (``window_time``, so that Spark evicts the join state
  by the watermark; windows of different sizes have different starts). Rows of a windowed
  stream join the other side's rows whose window holds them (a time-interval join), so the
  state keeps each row once. A stream-stream join allows one event-time column per side, so
  the ``window`` struct gives way to ``window_time`` and is rebuilt after the join.

The source's heartbeat rows flow through every operator as punctuation: selections pass them,
aggregates group them apart, joins pair them only with each other. Spark emits all of a window's
groups at once, in end order, so a heartbeat row for window end e means that every row of every
window ending at or before e has been emitted. The MIG relies on it to know what is complete.

**Operators after a DB-op** (``apply``) run on the instantaneous relations of the window_ends
a micro-batch completes, which are finite and complete: plain DataFrame operations on rows
tagged with ``window_end``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from optimizer.errors import TandemError
from optimizer.logical import (
    DECOMPOSABLE,
    WINDOW_COLUMNS,
    Aggregate,
    Join,
    Node,
    Project,
    Select,
    Window,
    source_window,
    stateless_rows,
)

HEARTBEAT = "heartbeat"
# How Spark evaluates a plan's windows: "built-in" expands each tuple into its W/beta windows
# (Spark's sliding window), "panes" aggregates per slide first (_pane_aggregate), "buckets"
# runs a whole plan as one stateful operator over buckets of keys (rowstream/buckets.py).
SPARK_DESIGNS = ("built-in", "panes", "buckets")


@dataclass(frozen=True)
class Streaming:
    """The streaming operators over one source stream (rows and heartbeats, with a watermark on
    ts). A finite stream's last window_end bounds the windows its aggregates emit: Spark would
    otherwise compute, when the last heartbeat moves the watermark, every window that still
    holds an event, none of which is a result."""

    stream: DataFrame
    last_end: datetime | None = None
    panes: bool = False  # aggregate windows from per-slide partial aggregates (SPARK_DESIGNS)

    def relation(self, node: Node) -> DataFrame:
        """The streaming DataFrame of ``node``."""
        if isinstance(node, Window):
            return self.stream.select(*[c for c in node.columns if c not in WINDOW_COLUMNS],
                                      HEARTBEAT)
        if isinstance(node, Select):
            return self.relation(node.input).where(F.col(HEARTBEAT) | predicate(node.predicate))
        if isinstance(node, Project):
            child = self.relation(node.input)
            kept = [_expr(e).alias(n) for n, e in node.expressions
                    if node.input.instantiated or n not in WINDOW_COLUMNS]
            return child.select(*kept, *(["window"] if node.input.instantiated else []), HEARTBEAT)
        if isinstance(node, Aggregate):
            child = self.relation(node.input)
            keys = [k for k in node.group_by if k not in WINDOW_COLUMNS]
            if self.panes and not node.input.instantiated and all(
                    a.func in DECOMPOSABLE for a in node.aggregates):
                out = _pane_aggregate(node, child, keys)
            else:
                group = (F.col("window") if node.input.instantiated
                         else _window(node.input)).alias("window")
                out = child.groupBy(group, *keys, HEARTBEAT).agg(*_aggregates(node))
            if self.last_end is not None:
                # As microseconds: PySpark would read a datetime in the local time zone.
                last_us = (self.last_end - datetime(1970, 1, 1)) // timedelta(microseconds=1)
                out = out.where(F.col("window.end") <= F.timestamp_micros(F.lit(last_us)))
            return _with_window_columns(out, node.columns)
        if isinstance(node, Join):
            return self._join(node)
        raise TandemError(f"{node.kind} cannot run in Spark")

    def _join(self, node: Join) -> DataFrame:
        """A stream-stream join at equal window end. Tagged rows pair on ``window_time``. A
        side of rows of a windowed stream (Q1 joins its loads with their plug's peak) is not
        expanded to its W/beta windows: its rows pair, by a time-interval join, with the other
        side's rows whose window holds them, so Spark's join state keeps each row once (and
        drops it by the watermark). If both sides are such rows, the right one is expanded."""
        sides = {"l": node.left, "r": node.right}
        raw = next((k for k, side in sides.items() if not side.instantiated), None)
        other = "l" if raw == "r" else "r"  # it gives a raw side's rows their window
        frames = {k: self.relation(side) if k == raw else self._instantiated(side)
                  for k, side in sides.items()}
        left, right = frames["l"].alias("l"), frames["r"].alias("r")
        window_time = F.col(f"{other}._window_time")
        if raw:
            window = source_window(sides[raw])
            ts = F.col(f"{raw}.{window.time_column}")
            size = _interval(window.size)
            in_window = (ts > window_time - size) & (ts <= window_time)  # end - W <= ts < end
        else:
            in_window = F.col("l._window_time") == window_time
        left_hb, right_hb = F.col(f"l.{HEARTBEAT}"), F.col(f"r.{HEARTBEAT}")
        condition = in_window & (left_hb == right_hb)
        equal = F.lit(True)
        for l, r in node.keys:
            # Null-safe equality is the equi-join key that pairs heartbeats (null keys); data rows
            # keep SQL's equality, under which null keys match nothing.
            condition = condition & F.col(f"l.{l}").eqNullSafe(F.col(f"r.{r}"))
            equal = equal & (F.col(f"l.{l}") == F.col(f"r.{r}"))
        joined = left.join(right, condition & (left_hb | F.coalesce(equal, F.lit(False))), "inner")

        def column(name: str) -> Column:
            side = "l" if name in node.left.columns else "r"
            if side == raw and name in WINDOW_COLUMNS:  # the raw rows' window is the other side's
                end = window_time + _interval(1e-6)
                return (end if name == "window_end" else end - size).alias(name)
            return F.col(f"{side}.{name}").alias(name)

        joined = joined.select(*[column(c) for c in node.columns], left_hb.alias(HEARTBEAT),
                               window_time.alias("_window_time"))
        # The window struct again, for the operators above: the one-slide window that holds the
        # end's last microsecond ends where the joined windows end.
        joined = joined.select(*node.columns, HEARTBEAT, F.window(
            "_window_time", f"{_micros(node.slide)} microseconds").alias("window"))
        if node.condition is not None:
            joined = joined.where(F.col(HEARTBEAT) | predicate(node.condition))
        return joined

    def row_struct(self, node: Node) -> Column:
        """A stateless relation of the stream (selections and projections of its rows) as one
        column of the stream's own rows: the relation's row as a struct, or null for a row it
        does not hold and for heartbeats. The MIG moves every such relation in the one scan of
        the source instead of scanning it once per relation."""
        predicates, columns = stateless_rows(node)
        keep = ~F.col(HEARTBEAT)
        for p in predicates:
            keep = keep & predicate(p)
        return F.when(keep, F.struct(*[_expr(e).alias(n) for n, e in columns.items()]))

    def tagged(self, node: Node) -> DataFrame:
        """A relation as it leaves the streaming part: its columns, ``window_end`` for rows
        tagged with a window instance, and the heartbeat flag."""
        rows = self.relation(node)
        if not node.instantiated:
            return rows
        extra = [] if "window_end" in node.columns else [F.col("window.end").alias("window_end")]
        return rows.select(*node.columns, *extra, HEARTBEAT)

    def _instantiated(self, node: Node) -> DataFrame:
        """Rows tagged with their window instance, whose end (``window_time``, its last
        microsecond) is the only event time, as a join needs: a windowed stream's rows are
        expanded to every window that holds them."""
        rows = self.relation(node)
        if not node.instantiated:
            rows = _with_window_columns(rows.select(_window(node).alias("window"), *rows.columns),
                                        node.columns)
        return rows.select(*node.columns, HEARTBEAT, F.window_time("window").alias("_window_time"))


def _pane_aggregate(node: Aggregate, rows: DataFrame, keys: list[str]) -> DataFrame:
    """A sliding-window aggregate from panes: partial aggregates per slide (a tumbling window
    of beta), then each window of W combines its W/beta panes. Spark expands each pane, not
    each tuple, into the windows that hold it: groups x W/beta rows per slide whatever the
    rate (Li et al.'s panes, "No pane, no gain", 2005)."""
    window = source_window(node.input)
    pane = F.window(window.time_column, f"{_micros(window.slide)} microseconds").alias("pane")
    partial, combined = [], []
    for i, a in enumerate(node.aggregates):
        arg = F.lit(1) if a.arg is None else _expr(a.arg)
        s, c, m = f"_s{i}", f"_c{i}", f"_m{i}"
        if a.func in ("SUM", "AVG"):
            partial.append(F.sum(arg).alias(s))
        if a.func in ("COUNT", "AVG"):
            partial.append(F.count(arg).alias(c))
        if a.func in ("MIN", "MAX"):
            partial.append((F.min if a.func == "MIN" else F.max)(arg).alias(m))
        combined.append({
            "SUM": F.sum(s), "COUNT": F.sum(c),
            "AVG": F.try_divide(F.sum(s), F.sum(c)),  # null, as AVG, when no value is set
            "MIN": F.min(m), "MAX": F.max(m)}[a.func].alias(a.name))
    panes = rows.groupBy(pane, *keys, HEARTBEAT).agg(*partial)
    sliding = F.window(F.window_time("pane"), f"{_micros(window.size)} microseconds",
                       f"{_micros(window.slide)} microseconds").alias("window")
    return panes.groupBy(sliding, *keys, HEARTBEAT).agg(*combined)


def _interval(seconds: float) -> Column:
    return F.expr(f"INTERVAL '{seconds:.6f}' SECOND")


def apply(node: Node, inputs: list[DataFrame]) -> DataFrame:
    """One operator over the instantaneous relations of complete window_ends (rows tagged with
    ``window_end``): the Spark operators that run after a DB-op."""
    if isinstance(node, Select):
        return inputs[0].where(predicate(node.predicate))
    if isinstance(node, Project):
        names = [n for n, _ in node.expressions]
        return inputs[0].select(*[_expr(e).alias(n) for n, e in node.expressions],
                                *([] if "window_end" in names else ["window_end"]))
    if isinstance(node, Aggregate):
        return inputs[0].groupBy(*node.group_by).agg(*_aggregates(node))
    if isinstance(node, Join):
        left, right = inputs[0].alias("l"), inputs[1].alias("r")
        condition = F.col("l.window_end") == F.col("r.window_end")
        for l, r in node.keys:
            condition = condition & (F.col(f"l.{l}") == F.col(f"r.{r}"))
        left_columns = set(node.left.columns)
        joined = left.join(right, condition, "inner").select(
            *[F.col(f"l.{c}" if c in left_columns else f"r.{c}").alias(c) for c in node.columns])
        return joined if node.condition is None else joined.where(predicate(node.condition))
    raise TandemError(f"{node.kind} cannot run in Spark")


def _expr(e) -> Column:
    return F.expr(e.sql(dialect="spark"))


def predicate(e) -> Column:
    """A WHERE clause keeps the rows whose predicate is true (not null)."""
    return F.coalesce(_expr(e), F.lit(False))


def _window(node: Node) -> Column:
    window = source_window(node)
    return F.window(window.time_column, f"{_micros(window.size)} microseconds",
                    f"{_micros(window.slide)} microseconds")


def _with_window_columns(frame: DataFrame, columns) -> DataFrame:
    for name, field in (("window_start", "start"), ("window_end", "end")):
        if name in columns:
            frame = frame.withColumn(name, F.col(f"window.{field}"))
    return frame


def _aggregates(node: Aggregate) -> list[Column]:
    return [_aggregate(a.func, a.arg).alias(a.name) for a in node.aggregates]


def _aggregate(func: str, arg) -> Column:
    if func == "COUNT":
        return F.count(F.lit(1)) if arg is None else F.count(_expr(arg))
    value = _expr(arg)
    return {"SUM": F.sum, "AVG": F.avg, "MIN": F.min, "MAX": F.max, "MEDIAN": F.median}[func](value)


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)
