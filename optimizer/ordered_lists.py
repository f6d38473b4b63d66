"""Ordered lists: which correlated counts DuckDB finds by order, and what that reads.

A correlated aggregate reads a windowed stream's rows as lists per (group, pane)
(``cost.CostModel._listed``). Where every aggregate is COUNT(*) of the rows that pass one
comparison ``v OP t``, v a value of the row alone and t one of the other relation's row (or of
the window), the rows that pass are a prefix or a suffix of the list sorted by v. DuckDB keeps
each list sorted, beside the first value of each chunk of about sqrt(n) values, and a count
reads the chunks' minima and the one chunk where the comparison turns
(``columnar/fragment_sql.py``, ``_ordered_count``, which writes that SQL). Q1 and Q2 are such
counts. This module is the same rule over the logical plan, for the cost model.
"""

from __future__ import annotations

import math

from sqlglot import exp

from optimizer.expressions import conjuncts
from optimizer.logical import WINDOW_COLUMNS, Aggregate, Join, Node, Select, post_order

SMALLEST_CHUNK = 8  # values of a chunk, at the least (fragment_sql.CHUNK)
COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE)


def counted_by_order(root: Node) -> frozenset[Join]:
    """The joins below a count that DuckDB finds by order (module docstring)."""
    return frozenset(join for node in post_order(root)
                     if (join := _ordered_join(node)) is not None)


def values_read(values: float, lists: float) -> float:
    """Values an ordered count reads of ``lists`` lists holding ``values`` in all: per list of
    n, its ceil(n / chunk) minima and one chunk, chunk = max(SMALLEST_CHUNK, ceil(sqrt(n)))."""
    if lists <= 0:
        return 0.0
    n = values / lists
    chunk = max(SMALLEST_CHUNK, math.ceil(math.sqrt(n)))
    return lists * (math.ceil(n / chunk) + min(chunk, n))


def _ordered_join(node: Node) -> Join | None:
    if not isinstance(node, Aggregate) or not node.aggregates or any(
            a.func != "COUNT" or a.arg is not None for a in node.aggregates):
        return None
    terms, below = [], node.input
    while isinstance(below, Select):
        terms += conjuncts(below.predicate)
        below = below.input
    # A projection between renames what the comparison reads: the rule is not applied there.
    if not isinstance(below, Join):
        return None
    terms += conjuncts(below.condition)
    sides = [s for s in (below.left, below.right) if not s.instantiated]
    if len(terms) != 1 or not isinstance(terms[0], COMPARISONS) or len(sides) != 1:
        return None
    rows = sides[0]
    other = below.right if rows is below.left else below.left
    mine = set(rows.columns) - set(WINDOW_COLUMNS)  # the keys too: they are the row's
    theirs = (set(other.columns) - set(rows.columns)) | set(WINDOW_COLUMNS)
    term = terms[0]
    for value, threshold in ((term.this, term.expression), (term.expression, term.this)):
        read = {c.name for c in value.find_all(exp.Column)}
        against = {c.name for c in threshold.find_all(exp.Column)}
        if read and read <= mine and against <= theirs:
            return below
    return None
