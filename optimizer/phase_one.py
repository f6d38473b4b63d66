"""Phase one: join ordering with every operator in the DSPS (Ji Sec. 6.3.3).

System R's dynamic programming over left-deep join trees (Selinger et al. 1979): the best plan
joining a set of inputs extends the best plan for one of its subsets by one more input. Plans are
compared by Definition 6.1; Ji proves the principle of optimality for that order. Selections have
been pushed to the join inputs by the front-end; the DP avoids cross products.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from itertools import combinations

from optimizer.cost import ZERO, CostModel, Objective, PlanCost
from optimizer.expressions import column_names, conjunction
from optimizer.logical import Join, Node, is_r2r, post_order


def phase_one(root: Node, model: CostModel, objective: Objective) -> Node:
    """The plan with every join block reordered; other operators are kept as they are."""
    return _rebuild(root, model, objective)


def _rebuild(node: Node, model: CostModel, objective: Objective) -> Node:
    if isinstance(node, Join):
        leaves, keys, theta = _flatten(node)
        leaves = [_rebuild(leaf, model, objective) for leaf in leaves]
        if _reorderable(leaves, keys):
            return _order_joins(leaves, keys, theta, node.columns, model, objective)
    return _relink(node, model, objective)


def _relink(node: Node, model: CostModel, objective: Objective) -> Node:
    fields = {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
    changed = {}
    for name, value in fields.items():
        if isinstance(value, Node):
            new = _rebuild(value, model, objective)
            if new is not value:
                changed[name] = new
    return dataclasses.replace(node, **changed) if changed else node


def _flatten(join: Join):
    """Leaves of a block of consecutive joins, its equi-key pairs as (leaf, column) pairs, and
    its theta conditions."""
    leaves: list[Node] = []
    keys: list[tuple[tuple[int, str], tuple[int, str]]] = []
    theta = []

    def owner(first: int, last: int, column: str) -> int:
        return next(i for i in range(first, last) if column in leaves[i].columns)

    def visit(n: Node) -> None:
        if not isinstance(n, Join):
            leaves.append(n)
            return
        start = len(leaves)
        visit(n.left)
        middle = len(leaves)
        visit(n.right)
        for l, r in n.keys:
            keys.append(((owner(start, middle, l), l), (owner(middle, len(leaves), r), r)))
        if n.condition is not None:
            theta.append(n.condition)

    visit(join)
    return leaves, keys, theta


def _reorderable(leaves: list[Node], keys) -> bool:
    """Reordering changes which input a shared column name comes from; that is harmless only when
    every shared name is equated across the inputs that have it (or is window_end)."""
    equated = {c for pair in keys for _, c in pair}
    seen: set[str] = set()
    for leaf in leaves:
        for c in leaf.columns:
            if c in seen and c not in equated and c != "window_end":
                return False
        seen |= set(leaf.columns)
    return True


def _order_joins(leaves, keys, theta, columns, model: CostModel, objective: Objective) -> Node:
    # Equi-keys are transitive: inputs that share an equivalence class can be joined directly.
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in keys:
        parent[find(a)] = find(b)
    classes: dict = {}
    for a, b in keys:
        for x in (a, b):
            classes.setdefault(find(x), set()).add(x)
    members = list(classes.values())

    def owners(condition) -> set[int]:
        names = column_names(condition)
        return {i for i, leaf in enumerate(leaves) if names & set(leaf.columns)}

    theta_owners = [(t, owners(t)) for t in theta]
    n = len(leaves)
    leaf_costs = [_cost(leaf, model) for leaf in leaves]
    best: dict[frozenset[int], tuple[Node, PlanCost, tuple[int, ...]]] = {
        frozenset([i]): (leaves[i], leaf_costs[i], (i,)) for i in range(n)}
    for size in range(2, n + 1):
        for subset in map(frozenset, combinations(range(n), size)):
            candidates = []
            for x in sorted(subset):
                rest = subset - {x}
                if rest not in best:
                    continue
                pairs = _key_pairs(members, rest, x)
                conditions = [t for t, o in theta_owners if x in o and o <= subset]
                if not pairs and not conditions:
                    continue  # a cross product
                left_node, left_cost, order = best[rest]
                right_node = leaves[x]
                join = Join(left_node.columns + tuple(c for c in right_node.columns
                                                      if c not in left_node.columns),
                            left=left_node, right=right_node, keys=tuple(pairs),
                            condition=conjunction(conditions))
                cost = left_cost.combine(leaf_costs[x]).add(model.dsps(join))
                candidates.append((objective.rank(cost), order + (x,), join, cost))
            if candidates:
                rank, order, join, cost = min(candidates, key=lambda c: (c[0], c[1]))
                best[subset] = (join, cost, order)
    full = frozenset(range(n))
    if full not in best:
        raise ValueError("join inputs are not connected by join predicates")
    node = best[full][0]
    return dataclasses.replace(node, columns=_ordered(node.columns, columns))


def _key_pairs(classes, rest: frozenset[int], x: int) -> list[tuple[str, str]]:
    """Equi-keys joining input x to the inputs in ``rest``, one per equivalence class. Where
    a class offers several left columns, take the columns of the input that shares the most
    classes with x: a multi-column key keeps the distinct count the catalog knows for it."""
    shared = [c for c in classes if any(i == x for i, _ in c) and any(i in rest for i, _ in c)]
    if not shared:
        return []
    counts = Counter(i for c in shared for i, _ in c if i in rest)
    partner = min(counts, key=lambda i: (-counts[i], i))
    pairs = []
    for c in shared:
        left = sorted(c, key=lambda ic: (ic[0] != partner, ic))
        left = [col for i, col in left if i in rest]
        right = sorted(col for i, col in c if i == x)
        pairs.append((left[0], right[0]))
    return pairs


def _ordered(actual: tuple[str, ...], wanted: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(c for c in wanted if c in actual) + tuple(c for c in actual if c not in wanted)


def _cost(node: Node, model: CostModel) -> PlanCost:
    """Cost of a subplan with every R2R operator in Spark."""
    cost = ZERO
    for op in post_order(node):
        if is_r2r(op):
            cost = cost.add(model.dsps(op))
    return cost
