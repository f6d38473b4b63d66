"""Errors the optimiser reports to users: one line, naming the construct and where it is."""

from __future__ import annotations


class TandemError(Exception):
    """A problem the user can fix; the CLI prints it on one line, never with a traceback."""


class QueryError(TandemError):
    """SQL that Tandem cannot run, with the 1-based line and column of the offending construct."""

    def __init__(self, message: str, line: int | None = None, col: int | None = None):
        self.message = message
        self.line = line
        self.col = col
        where = f"line {line}, column {col}: " if line is not None else ""
        super().__init__(f"{where}{message}")


class CatalogError(TandemError):
    """A catalog or calibration profile that is missing, malformed or lacks what a query needs."""
