"""Helpers over sqlglot scalar expressions whose columns are flat, unqualified names."""

from __future__ import annotations

import sqlglot
from sqlglot import exp


def column_names(expression: exp.Expression) -> set[str]:
    return {c.name for c in expression.find_all(exp.Column)}


def strip_qualifiers(expression: exp.Expression) -> exp.Expression:
    def strip(node):
        if isinstance(node, exp.Column) and node.table:
            return exp.column(node.name)
        return node

    return expression.copy().transform(strip)


def predicate_key(predicate: exp.Expression | str) -> str:
    """Normalised text of a predicate, the key of catalog selectivities ("property = 1")."""
    if isinstance(predicate, str):
        predicate = sqlglot.parse_one(predicate)
    return strip_qualifiers(predicate).sql().lower()


def conjuncts(expression: exp.Expression | None) -> list[exp.Expression]:
    if expression is None:
        return []
    if isinstance(expression, exp.Paren):
        return conjuncts(expression.this)
    if isinstance(expression, exp.And):
        return conjuncts(expression.left) + conjuncts(expression.right)
    return [expression]


def conjunction(parts: list[exp.Expression]) -> exp.Expression | None:
    if not parts:
        return None
    return exp.and_(*parts) if len(parts) > 1 else parts[0]
