"""Source-driven sizes (Ji Eq. 6.1-6.3) and instantaneous-window cardinalities, cascaded from
the sources (Ayad and Naughton's method, as Ji adapts it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from optimizer.catalog import Catalog, column_set_key
from optimizer.expressions import column_names, predicate_key
from optimizer.logical import Aggregate, Join, Node, Project, Select, Window

# System R's default selectivities (Selinger et al. 1979) for predicates the catalog lacks.
DEFAULT_EQUALITY = 0.1
DEFAULT_RANGE = 1 / 3
DEFAULT_BETWEEN = 1 / 4
DEFAULT_OTHER = 1 / 3


@dataclass(frozen=True)
class Estimate:
    lambda_out: float  # tuples produced per unit-time source arrivals
    cardinality: float  # |w|: tuples in one instantaneous relation
    n_slide: float  # window_ends per second


class Statistics:
    """Estimates for the nodes of one plan, memoised by node identity."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._memo: dict[Node, Estimate] = {}
        self._selectivity: dict[Node, float] = {}

    def __getitem__(self, node: Node) -> Estimate:
        found = self._memo.get(node)
        if found is None:
            found = self._memo[node] = self._estimate(node)
        return found

    def _estimate(self, node: Node) -> Estimate:
        if isinstance(node, Window):
            rate = self.catalog.streams[node.stream].rate
            return Estimate(rate, rate * node.size, 1 / node.slide)
        if isinstance(node, (Select, Project)):
            child = self[node.input]
            f = self.selectivity(node)
            return Estimate(f * child.lambda_out, f * child.cardinality, child.n_slide)  # Eq. 6.1
        if isinstance(node, Join):
            left, right = self[node.left], self[node.right]
            f = self.selectivity(node)  # relative to either input: f_L = f_R (System R, 1/max d)
            lam = left.lambda_out * f * right.cardinality + right.lambda_out * f * left.cardinality
            return Estimate(lam, f * left.cardinality * right.cardinality, left.n_slide)  # Eq. 6.2
        if isinstance(node, Aggregate):
            child = self[node.input]
            groups = self.groups(node)
            return Estimate(child.n_slide * groups, groups, child.n_slide)  # Eq. 6.3
        raise TypeError(f"no estimate for {node!r}")

    def groups(self, node: Aggregate) -> float:
        """n_group: distinct values of the grouping keys in one instantaneous relation."""
        keys = [k for k in node.group_by if k not in ("window_end", "window_start")]
        child = self[node.input].cardinality
        if not keys:
            return min(1.0, child)
        return min(self.distinct(node.input, keys), child)

    def distinct(self, node: Node, columns) -> float:
        """Distinct values of ``columns`` in an instantaneous relation of ``node``."""
        cols = column_set_key(columns) - {"window_end", "window_start"}
        card = self[node].cardinality
        if not cols:
            return min(1.0, card)
        if isinstance(node, Window):
            stream = self.catalog.streams[node.stream]
            found = stream.distinct.get(cols)
            if found is None:
                singles = [stream.distinct.get(frozenset([c])) for c in cols]
                # Independent columns multiply; a column without statistics is taken as a key.
                found = card if None in singles else math.prod(singles)
            return min(found, card)
        if isinstance(node, Aggregate):
            keys = set(node.group_by) - {"window_end", "window_start"}
            inner = cols & keys
            return min(self.distinct(node.input, inner) if inner else 1.0, card)
        if isinstance(node, Join):
            # Columns equated by the join carry the same values: count them on one side only,
            # whichever side knows them better.
            left_cols, right_cols = set(node.left.columns), set(node.right.columns)
            options = []
            for keep_left in (True, False):
                left = {c for c in cols if c in left_cols and (keep_left or not any(
                    l == c and r in cols & right_cols for l, r in node.keys))}
                right = {c for c in cols - left if c in right_cols and not any(
                    r == c and l in left for l, r in node.keys)}
                options.append((self.distinct(node.left, left) if left else 1.0)
                               * (self.distinct(node.right, right) if right else 1.0))
            return min(min(options), card)
        if isinstance(node, Project):
            sources = set()
            for name, e in node.expressions:
                if name in cols:
                    sources |= column_names(e)
            return min(self.distinct(node.input, sources), card)
        return min(self.distinct(node.inputs[0], cols), card)

    def selectivity(self, node: Node) -> float:
        found = self._selectivity.get(node)
        if found is not None:
            return found
        if isinstance(node, Select):
            found = self.predicate(node.predicate, node.input)
        elif isinstance(node, Join):
            found = 1.0
            if node.keys:
                # One tuple matches |w|/d tuples of the other input; System R takes the larger d.
                found = 1 / max(self.distinct(node.left, [l for l, _ in node.keys]),
                                self.distinct(node.right, [r for _, r in node.keys]), 1)
            if node.condition is not None:
                found *= self.predicate(node.condition, node)
        else:
            found = 1.0  # projections keep every row (Ji's footnote to Eq. 6.1)
        self._selectivity[node] = found
        return found

    def predicate(self, predicate: exp.Expression, node: Node) -> float:
        known = self.catalog.selectivity.get(predicate_key(predicate))
        if known is not None:
            return known
        if isinstance(predicate, exp.Paren):
            return self.predicate(predicate.this, node)
        if isinstance(predicate, exp.And):
            return self.predicate(predicate.left, node) * self.predicate(predicate.right, node)
        if isinstance(predicate, exp.Or):
            a, b = self.predicate(predicate.left, node), self.predicate(predicate.right, node)
            return a + b - a * b
        if isinstance(predicate, exp.Not):
            return 1 - self.predicate(predicate.this, node)
        if isinstance(predicate, exp.EQ):
            cols = column_names(predicate)
            if len(cols) == 1 and isinstance(predicate.expression, exp.Literal):
                return 1 / max(self.distinct(node, cols), 1)
            return DEFAULT_EQUALITY
        if isinstance(predicate, exp.NEQ):
            return 1 - DEFAULT_EQUALITY
        if isinstance(predicate, (exp.GT, exp.GTE, exp.LT, exp.LTE)):
            return DEFAULT_RANGE
        if isinstance(predicate, exp.Between):
            return DEFAULT_BETWEEN
        if isinstance(predicate, exp.In):
            return min(1.0, len(predicate.expressions) * DEFAULT_EQUALITY)
        return DEFAULT_OTHER
