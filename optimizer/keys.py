"""What a query's result rows are keyed by, derived from its logical plan: the columns that
identify one row per window_end, and the columns that hold counts. The results suite of
Great Expectations (``rowstream/expectations.py``) checks them on every result table."""

from __future__ import annotations

from sqlglot import exp

from optimizer.logical import Aggregate, Join, Node, Project, Window


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
