"""Where the ``duckdb-partitioned`` placement is allowed: a DB-op run inside Spark's executors,
one DuckDB per hash partition of the stream by a key (``rowstream/partitioned.py``).

Each partition's DuckDB sees only its share of the stream. That gives its share of the result
when every aggregate of the fragment's subplan groups by the key and every join pairs on it
(``keys.partition_keys``). The partitions read the stream's rows where Spark's streaming part
hands them over: a partitioned operator's inputs are windows, selections and projections of the
stream that Spark evaluates before the MIG (stateless crossings), or other partitioned operators
of its fragment. Rows of Spark's stateful operators, and rows a central DB-op produced, are on
the driver's side of the MIG already. A central DB-op reads a partitioned one's rows only when
they are tagged with their window (``reads_partitions``): it keeps a windowed stream's rows, and
their pane partials, as they arrive, and the partitions hand over rows per window_end evaluated.
"""

from __future__ import annotations

from optimizer.cost import DUCKDB, PARTITIONED, SPARK, SPLIT, by_panes
from optimizer.keys import partition_keys
from optimizer.logical import Aggregate, LogicalPlan, Node, is_r2r, post_order


def partitionable(node: Node) -> bool:
    """Can ``node``'s subplan be evaluated per hash partition of its stream?"""
    return bool(partition_keys(node))


def splittable(node: Node) -> bool:
    """Can ``node`` be split, its partials per pane in Spark and their merge in DuckDB?"""
    return isinstance(node, Aggregate) and by_panes(node)


def feeds_partitions(child: Node, placement: dict[str, str], plan: LogicalPlan) -> bool:
    """Can ``child`` be read by a partitioned operator above it (module docstring)?"""
    if not is_r2r(child):
        return True  # a window of the stream
    return placement[plan.ids[child]] == PARTITIONED or stream_rows(child, placement, plan)


def stream_rows(child: Node, placement: dict[str, str], plan: LogicalPlan) -> bool:
    """Is ``child`` the stream's rows as Spark's streaming part hands them over: its window,
    or selections and projections of it in Spark with nothing else below? A split
    aggregate's partials are computed from those in the executors."""
    return not is_r2r(child) or (
        not child.instantiated
        and all(placement[plan.ids[n]] == SPARK for n in post_order(child) if is_r2r(n)))


def windows_rows_in_spark(child: Node, placement: dict[str, str], plan: LogicalPlan) -> bool:
    """Is ``child`` in Spark, over a window's rows that a DB-op below it handed over, once per
    window they belong to? A DB-op above cannot read it: it keeps a window's rows (not yet
    aggregated or joined) once each, by pane, and makes their windows itself."""
    return (is_r2r(child) and placement[plan.ids[child]] == SPARK and not child.instantiated
            and not stream_rows(child, placement, plan))


def reads_partitions(child: Node, placement: dict[str, str], plan: LogicalPlan) -> bool:
    """Can a central DB-op read ``child`` (module docstring)?"""
    return (not is_r2r(child) or placement[plan.ids[child]] != PARTITIONED
            or child.instantiated)


def problem(plan: LogicalPlan, placement: dict[str, str]) -> str | None:
    """Why a placement cannot run duckdb-partitioned where it puts it, or a DB-op cannot read
    what Spark hands it, in one line; None if it can."""
    for op in plan.operators:
        op_id, engine = plan.ids[op], placement.get(plan.ids[op])
        for child in op.inputs:
            if engine == DUCKDB and windows_rows_in_spark(child, placement, plan):
                return (f"--placement: {op_id} on duckdb cannot read {plan.ids[child]} on spark:"
                        " a DB-op below handed Spark a window's rows once per window, and "
                        f"DuckDB keeps a window's rows once (place {plan.ids[child]} on duckdb)")
            if engine == DUCKDB and not reads_partitions(child, placement, plan):
                return (f"--placement: {op_id} on duckdb cannot read {plan.ids[child]} on "
                        f"{PARTITIONED}: the stream's rows it passes on are not tagged with "
                        "their window yet")
            if engine == PARTITIONED and not feeds_partitions(child, placement, plan):
                return (f"--placement: {op_id} cannot run on {PARTITIONED}: its input "
                        f"{plan.ids[child]} is not the stream's rows as Spark hands them over "
                        f"(place it and what is below it on spark, stateless, or on "
                        f"{PARTITIONED} too)")
            if engine == SPLIT and not stream_rows(child, placement, plan):
                return (f"--placement: {op_id} cannot be {SPLIT}: Spark computes its partials "
                        f"from the stream's rows, and its input {plan.ids[child]} is not those "
                        "(place it and what is below it on spark)")
        if engine == PARTITIONED and not partitionable(op):
            return (f"--placement: {op_id} cannot run on {PARTITIONED}: no stream column is a "
                    "key of every aggregate and join at or below it")
    return None
