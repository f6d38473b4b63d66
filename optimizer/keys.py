"""Keys derived from a query's logical plan: the columns that identify one result row per
window_end and the columns that hold counts (the results suite of Great Expectations,
``rowstream/expectations.py``, checks them on every result table), and the columns a subplan
can be hash-partitioned by (the pure-Spark "buckets" design, ``rowstream/buckets.py``)."""

from __future__ import annotations

from sqlglot import exp

from optimizer.logical import (
    WINDOW_COLUMNS,
    Aggregate,
    Join,
    Node,
    Project,
    Window,
    post_order,
    windows,
)


def result_keys(node: Node) -> tuple[str, ...] | None:
    """Columns that are unique together in every result relation of ``node`` (window_end among
    them), or None when nothing is (rows of a window that no aggregate has grouped)."""
    if isinstance(node, Window):
        return None
    if isinstance(node, Aggregate):
        return tuple(dict.fromkeys((*node.group_by, "window_end")))
    if isinstance(node, Join):
        left, right = result_keys(node.left), result_keys(node.right)
        if left is None or right is None:
            return None
        # A right key equated with a left column is that column in the output (USING merges
        # them); a pair of rows unique on each side is unique on both sides' keys together.
        equal = {r: l for l, r in node.keys} | {"window_end": "window_end"}
        mapped = [equal.get(k, k) for k in right]
        if any(k not in node.columns for k in mapped):
            return None
        return tuple(dict.fromkeys((*left, *mapped)))
    if isinstance(node, Project):
        keys = result_keys(node.input)
        names = _passed_through(node)
        if keys is None or any(k not in names for k in keys):
            return None
        return tuple(names[k] for k in keys)
    return result_keys(node.inputs[0])  # a selection keeps its input's keys


def partition_keys(node: Node) -> tuple[str, ...]:
    """The stream columns every aggregate of ``node``'s subplan groups by and every join pairs
    on, unrenamed on the way up: rows that agree on them meet in every group and every join
    pair, so the subplan over a hash partition of the stream by them gives that partition's
    share of the result. Empty when no column is common to all."""
    keys = set(windows(node)[0].columns) - set(WINDOW_COLUMNS)
    for op in post_order(node):
        if isinstance(op, Aggregate):
            keys &= set(op.group_by)
        elif isinstance(op, Join):
            keys &= {l for l, r in op.keys if l == r}
        elif isinstance(op, Project):
            keys &= {n for n, e in op.expressions if isinstance(e, exp.Column) and e.name == n}
    return tuple(sorted(keys))


def count_columns(node: Node) -> tuple[str, ...]:
    """Output columns that hold a COUNT (never negative)."""
    if isinstance(node, Window):
        return ()
    if isinstance(node, Aggregate):
        return tuple(a.name for a in node.aggregates if a.func == "COUNT")
    if isinstance(node, Project):
        names = _passed_through(node)
        return tuple(names[c] for c in count_columns(node.input) if c in names)
    counts = (c for child in node.inputs for c in count_columns(child))
    return tuple(c for c in dict.fromkeys(counts) if c in node.columns)


def _passed_through(project: Project) -> dict[str, str]:
    """Input column -> output name, for the columns a projection passes on unchanged."""
    return {e.name: name for name, e in project.expressions if isinstance(e, exp.Column)}
