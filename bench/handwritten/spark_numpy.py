"""Q1 and Q2 in pure Spark as an expert writes them by hand, to measure the product's pure-Spark
designs against (issue 15: "an applyInPandasWithState design with 16 key buckets, window state
as numpy arrays and a vectorised sliding maximum").

* The load readings are hashed to 16 buckets by plug; heartbeats go to every bucket.
* ``applyInPandasWithState`` keeps each bucket's window as three numpy arrays (timestamp, plug,
  value), sorted by time, in Spark's state store (RocksDB, checkpointed).
* For the window_ends a micro-batch completes, it builds one matrix of per-second partials
  (plug × second: the maximum for Q1, sum and count for Q2), slides it over the window's
  seconds (a sliding maximum, or a difference of prefix sums), and counts each window's readings
  above the threshold with one ``bincount`` per window_end.

Importing this module registers the design as "expert-numpy" (``rowstream.buckets.WHOLE_PLAN``);
it answers Q1 and Q2 only, and evaluates window_ends as the product's designs do.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.state import GroupStateTimeout

from optimizer.logical import Aggregate, Node, post_order, windows
from rowstream.buckets import WHOLE_PLAN, _micros
from rowstream.dsps import HEARTBEAT
from rowstream.eventtime import watermark

BUCKETS = 16
NAME = "expert-numpy"
STATE = "ts BINARY, plug BINARY, value BINARY, evaluated LONG"
KEYS = ["house_id", "household_id", "plug_id"]


def evaluate(stream: DataFrame, root: Node, schema: T.StructType, buckets: int,
             last_end: datetime | None, lateness: float) -> DataFrame:
    """Q1's or Q2's rows (``schema``) from the stream, as ``rowstream.buckets`` delivers them."""
    peak = next(a.func for n in post_order(root) if isinstance(n, Aggregate)
                for a in n.aggregates if a.func in ("MAX", "AVG"))
    factor = 0.9 if peak == "MAX" else 1.0  # Q1: above 90 % of the maximum; Q2: the average
    window = windows(root)[0]
    span, step = round(window.size * 1e6), round(window.slide * 1e6)
    final = None if last_end is None else _micros(last_end)
    count, = (n for n in schema.names if n not in (*KEYS, "window_end", HEARTBEAT))

    def bucket(key, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        batch = pd.concat(list(frames), ignore_index=True)
        marks = batch[batch[HEARTBEAT]]
        rows = batch[~batch[HEARTBEAT]]
        ts = rows["ts"].to_numpy("datetime64[us]").astype(np.int64)
        plug = ((rows["house_id"].to_numpy(np.int64) << 42)
                | (rows["household_id"].to_numpy(np.int64) << 21) | rows["plug_id"].to_numpy(np.int64))
        value = rows["value"].to_numpy(np.float64)
        evaluated = -1
        if state.exists:
            old_ts, old_plug, old_value, evaluated = state.get
            ts = np.concatenate([np.frombuffer(old_ts, np.int64), ts])
            plug = np.concatenate([np.frombuffer(old_plug, np.int64), plug])
            value = np.concatenate([np.frombuffer(old_value, np.float64), value])
        order = np.argsort(ts, kind="stable")
        ts, plug, value = ts[order], plug[order], value[order]
        ends = []
        if len(marks) and (len(ts) or evaluated >= 0):
            bound = watermark(int(marks["ts"].to_numpy("datetime64[us]").astype(np.int64).max()),
                              lateness)
            if final is not None:
                bound = min(bound, final)
            first = evaluated if evaluated >= 0 else int(ts[0]) // step * step
            ends = list(range(first + step, bound // step * step + 1, step))
        out = [_counts(ts, plug, value, np.array(ends, np.int64), span, step, factor, peak)
               ] if ends and len(ts) else []
        if ends:
            evaluated = ends[-1]
            keep = ts >= evaluated + step - span  # the rows a later window can still hold
            ts, plug, value = ts[keep], plug[keep], value[keep]
        state.update((ts.tobytes(), plug.tobytes(), value.tobytes(), evaluated))
        if ends:
            yield _frame(out, evaluated, schema, count)

    loads = stream.where(F.col(HEARTBEAT) | (F.col("property") == 1))
    mine = F.array(F.pmod(F.hash(*KEYS), F.lit(BUCKETS)))
    everyone = F.sequence(F.lit(0), F.lit(BUCKETS - 1))
    rows = loads.select("ts", *KEYS, "value", HEARTBEAT, F.explode(
        F.when(F.col(HEARTBEAT), everyone).otherwise(mine)).alias("_bucket"))
    return rows.groupBy("_bucket").applyInPandasWithState(
        bucket, outputStructType=schema, stateStructType=STATE, outputMode="append",
        timeoutConf=GroupStateTimeout.NoTimeout)


def _counts(ts, plug, value, ends, span, step, factor, peak) -> pd.DataFrame:
    """Per window_end, each plug's readings above ``factor`` × its window's MAX or AVG."""
    plugs, index = np.unique(plug, return_inverse=True)
    n = span // step  # seconds per window
    first = int(ends[0]) // step - n  # the first second of the first window
    second = ts // step - first  # column of each reading in the matrix
    width = len(ends) + n - 1
    inside = (second >= 0) & (second < width)
    cells = (index[inside], second[inside])
    if peak == "MAX":
        partial = np.full((len(plugs), width), -np.inf)
        np.maximum.at(partial, cells, value[inside])
        level = sliding_window_view(partial, n, axis=1).max(axis=2)  # plug × window_end
    else:
        sums, counts = np.zeros((len(plugs), width)), np.zeros((len(plugs), width))
        np.add.at(sums, cells, value[inside])
        np.add.at(counts, cells, 1)
        # Window sums, not differences of prefix sums: those drift by an ulp, and a reading
        # equal to its window's average must not count.
        with np.errstate(invalid="ignore", divide="ignore"):
            level = (sliding_window_view(sums, n, axis=1).sum(axis=2)
                     / sliding_window_view(counts, n, axis=1).sum(axis=2))
    parts = []
    for k, end in enumerate(ends):
        lo, hi = np.searchsorted(ts, [end - span, end])  # end - W <= ts < end
        above = value[lo:hi] > factor * level[index[lo:hi], k]
        high = np.bincount(index[lo:hi][above], minlength=len(plugs))
        hit = np.flatnonzero(high)
        parts.append(pd.DataFrame({"plug": plugs[hit], "window_end": end, "n": high[hit]}))
    return pd.concat(parts, ignore_index=True)


def _frame(out: list[pd.DataFrame], evaluated: int, schema: T.StructType,
           count: str) -> pd.DataFrame:
    """The result rows in ``schema``, then the heartbeat row that says the bucket is done up to
    ``evaluated`` (rowstream/buckets.py's contract)."""
    rows = out[0] if out else pd.DataFrame({"plug": [], "window_end": [], "n": []})
    plug = rows["plug"].to_numpy(np.int64)
    frame = pd.DataFrame({
        "house_id": (plug >> 42).astype(np.int32),
        "household_id": ((plug >> 21) & ((1 << 21) - 1)).astype(np.int32),
        "plug_id": (plug & ((1 << 21) - 1)).astype(np.int32),
        "window_end": pd.to_datetime(rows["window_end"].to_numpy(np.int64), unit="us"),
        count: rows["n"].to_numpy(np.int64), HEARTBEAT: False})
    mark = pd.DataFrame({"window_end": [pd.to_datetime(evaluated, unit="us")], HEARTBEAT: [True]})
    return pd.concat([frame, mark], ignore_index=True)[schema.names]


WHOLE_PLAN[NAME] = evaluate
# Spark's Python workers cannot import this file by name: ship its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
