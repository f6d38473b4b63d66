"""The result quality a query states, and the K-slack buffer that meets it (docs/design.md,
Disorder handling; Ji ch. 4).

A query states its quality in its SQL, as a hint anywhere in the text,

    /*+ QUALITY(max_error = 0.01, confidence = 0.95) */

or in its catalog entry, ``[queries.<name>]`` with the same keys; a run's options (the CLI's
``--max-error``, ``--confidence`` and ``--disorder``, a DAG's parameters) override both. Keys:
``max_error`` (ε_thr, an aggregate's relative error), ``confidence`` (1 − δ), ``min_recall``
(Γ, a join's recall, instead of ``max_error``), ``period`` (P_meas, the seconds over which the
recall is measured, 60 by default), and ``disorder``, how K is sized
(``kslack.manager.POLICIES``): by default AM-adt where a requirement is stated, else the
stream's fixed allowed lateness.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

from sqlglot import exp

from kslack.manager import Policy, Recall, Requirement, check
from optimizer.catalog import Stream
from optimizer.errors import TandemError
from optimizer.logical import Aggregate, LogicalPlan, post_order, source_window, windows
from optimizer.tomlfile import read_toml

HINT = re.compile(r"/\*\+\s*QUALITY\s*\((?P<body>[^)]*)\)\s*\*/", re.IGNORECASE)
# The aggregates whose error Eq. (4.1) models: a SUM's, an AVG's (a ratio of two SUMs, whose
# error the SUM's bounds) and a COUNT's (a SUM of ones). Another (MAX, MIN, MEDIAN) is sized as
# its window's COUNT: the share of the tuples it sees.
SUMMED = ("SUM", "AVG")
POINTS = 200  # the most points of K over time a run's summary keeps


@dataclass(frozen=True)
class Quality:
    """A query's quality requirement and how its buffer is sized; ``source`` says where each
    came from (as ``explain`` shows it)."""

    disorder: str = "fixed"
    max_error: float | None = None
    confidence: float = Requirement(0.0).confidence
    source: str = ""
    min_recall: float | None = None  # a join's
    period: float | None = None  # a join's recall's P_meas

    def __post_init__(self):
        if self.max_error is not None and self.min_recall is not None:
            raise TandemError(f"state max_error (an aggregate's) or min_recall (a join's), not "
                              f"both ({self.source})")
        if self.period is not None and self.min_recall is None:
            raise TandemError(f"period is the seconds over which a join's recall is measured: "
                              f"state it with min_recall ({self.source})")
        try:  # the checks of kslack, worded for where the quality was stated
            check(self.disorder, self.requirement)
        except ValueError as err:
            raise TandemError(f"{err} ({self.source})") from None

    @property
    def requirement(self) -> Requirement | Recall | None:
        if self.min_recall is not None:
            return (Recall(self.min_recall) if self.period is None
                    else Recall(self.min_recall, period=self.period))
        return None if self.max_error is None else Requirement(self.max_error, self.confidence)

    def describe(self) -> str:
        how = {"fixed": "K = the allowed lateness", "none": "No-K-slack (K = 0)",
               "max": "Max-K-slack (K = the largest delay so far)",
               "am": "K by AM-adt", "pd": "K by PD-adt"}[self.disorder]
        quality = self.requirement.describe() if self.requirement else "none stated"
        return f"{quality}; {how}" + (f" ({self.source})" if self.source else "")

    def to_json(self) -> dict:
        return {"disorder": self.disorder, "max_error": self.max_error,
                "confidence": self.confidence, "min_recall": self.min_recall,
                "period": self.period, "source": self.source}

    def overridden(self, *, disorder: str | None = None, max_error: float | None = None,
                   confidence: float | None = None, min_recall: float | None = None,
                   source: str = "the run's options") -> Quality:
        """This quality with a run's options over it; a requirement of one kind stated by
        the options replaces one of the other."""
        given = {k: v for k, v in (("disorder", disorder), ("max_error", max_error),
                                   ("confidence", confidence), ("min_recall", min_recall))
                 if v is not None}
        if not given:
            return self
        keys = self._keys()
        for one, other in (("max_error", "min_recall"), ("min_recall", "max_error")):
            if one in given:
                keys.pop(other, None)
        if "max_error" in given:
            keys.pop("period", None)
        return _quality({**keys, **given}, source)

    def _keys(self) -> dict:
        """The keys stated, where a fixed lateness is only the default."""
        stated = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "source"}
        for key in ("max_error", "min_recall", "period"):
            if stated[key] is None:
                del stated[key]
        if self.requirement is None and self.disorder == "fixed":
            del stated["disorder"]
        return stated


def _quality(keys: dict, source: str) -> Quality:
    """The quality of the keys a query states (module docstring): AM-adt where a requirement
    is, unless a way to size K is stated too."""
    unknown = set(keys) - {"disorder", "max_error", "confidence", "min_recall", "period"}
    if unknown:
        raise TandemError(f"{source}: unknown quality keys {', '.join(sorted(unknown))}: give "
                          "max_error, confidence, min_recall, period or disorder")
    try:
        values = {k: (str(v).strip().strip("'\"").lower() if k == "disorder" else float(v))
                  for k, v in keys.items()}
    except ValueError:
        raise TandemError(f"{source}: the quality keys but disorder are numbers, such as "
                          "max_error = 0.01, confidence = 0.95 or min_recall = 0.99") from None
    stated = "max_error" in values or "min_recall" in values
    disorder = values.pop("disorder", "am" if stated else "fixed")
    return Quality(disorder, source=source, **values)


def stated(query: Path, catalog: Path) -> Quality:
    """The quality ``query``'s SQL hint states, or else its catalog entry."""
    hints = HINT.findall(query.read_text())
    if len(hints) > 1:
        raise TandemError(f"{query}: state one QUALITY hint")
    if hints:
        keys = dict(_pair(part, query) for part in hints[0].split(",") if part.strip())
        return _quality(keys, f"{query.name}'s QUALITY hint")
    entry = read_toml(catalog, "catalog", "pass --catalog").get("queries", {}).get(query.stem)
    return _quality(entry, f"[queries.{query.stem}] in {catalog.name}") if entry else Quality()


def _pair(text: str, query: Path) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals:
        raise TandemError(f"{query}: write the QUALITY hint's keys as key = value, such as "
                          "/*+ QUALITY(max_error = 0.01, confidence = 0.95) */")
    return key.strip().lower(), value.strip()


def policy(quality: Quality, plan: LogicalPlan, stream: Stream, lateness: float
           ) -> tuple[Policy, str | None]:
    """The buffer's policy for ``stream`` in ``plan``, and the stream column whose values
    Eq. (4.1) reads (None: a COUNT's). An aggregate's requirement is on the plan's first
    aggregate over a window of the stream: its window and slide, and the groups its rows split
    into. A join's recall is shared by the windows the plan joins (``Recall``)."""
    mine = [w for w in windows(plan.root) if w.stream == stream.name]
    first = next((n for n in post_order(plan.root) if isinstance(n, Aggregate)
                  and not n.input.instantiated and source_window(n.input) in mine), None)
    window = source_window(first.input) if first else mine[0]
    keys = frozenset(k for k in (first.group_by if first else ()) if k != "window_end")
    value = None
    for call in first.aggregates if first else ():
        if (call.func in SUMMED and isinstance(call.arg, exp.Column)
                and call.arg.name.lower() in stream.columns):
            value = call.arg.name.lower()
            break
    requirement = quality.requirement
    if isinstance(requirement, Recall):
        requirement = replace(requirement, inputs=len(windows(plan.root)))
        value = None
    return Policy(quality.disorder, requirement, lateness, window.size, window.slide_seconds,
                  stream.distinct.get(keys, 1.0) if keys else 1.0), value


def slack_summary(quality: Quality, decisions: list[dict], state: dict | None = None) -> dict:
    """A run's K over time (its ``slack`` table's rows, in order): the quality stated, K's
    first, median, last and largest values, overall and per stream (a join's streams have a
    buffer each), how long a decision took, each stream's K against its high-water mark in at
    most ``POINTS`` steps, for a page to draw, and, from the buffers' ``state`` after the last
    batch, the files of a join's streams held for the stream behind (Same-K)."""
    seconds = sorted(d["seconds"] for d in decisions)
    measured = sorted(d["measured"] for d in decisions if d["measured"] is not None)
    streams: dict[str, list[dict]] = {}
    for d in decisions:
        streams.setdefault(d["stream"] or "", []).append(d)
    return {**quality.to_json(), "quality": quality.describe(), "decisions": len(decisions),
            "k": _ks(decisions),
            "k_by_stream": {name: _ks(mine) for name, mine in streams.items()},
            "decision_ms": ({"median": 1e3 * seconds[len(seconds) // 2],
                             "max": 1e3 * seconds[-1]} if seconds else None),
            "threshold": next((d["threshold"] for d in reversed(decisions)
                               if d["threshold"] is not None), None),
            "measured_coverage": measured[len(measured) // 2] if measured else None,
            "k_over_time": {name: [[d["high_water"].isoformat() if d["high_water"] else None,
                                    d["k"]] for d in mine[::max(len(mine) // POINTS, 1)]]
                            for name, mine in streams.items()},
            "held": {name: len(part["pending"]) for name, part in (state or {}).items()
                     if isinstance(part, dict) and part.get("pending")}}


def _ks(decisions: list[dict]) -> dict | None:
    ks = [d["k"] for d in decisions]
    return ({"first": ks[0], "median": sorted(ks)[len(ks) // 2], "last": ks[-1],
             "max": max(ks)} if ks else None)


def describe_slack(slack: dict) -> str:
    """A run's K in words (``slack_summary``)."""
    k = slack["k"]
    if k is None:
        return f"{slack['quality']}: no unit decided K"
    timing = slack["decision_ms"]
    streams = slack["k_by_stream"]
    each = ("; per stream, median and most: " + ", ".join(
        f"{name} {ks['median']:.3g} s and {ks['max']:.3g} s" for name, ks in streams.items())
            if len(streams) > 1 else "")
    return (f"{slack['quality']}: K {k['first']:.3g} s first, median {k['median']:.3g} s, "
            f"last {k['last']:.3g} s, at most {k['max']:.3g} s over {slack['decisions']:,} "
            f"decisions of {timing['median']:.2f} ms (median){each}"
            + (f"; the coverage measured {slack['measured_coverage']:.4f} against the threshold "
               f"{slack['threshold']:.4f}" if slack["measured_coverage"] is not None
               and slack["threshold"] is not None else "")
            + "".join(f"; {files:,} files of {name} wait for the stream behind (Same-K)"
                      for name, files in slack.get("held", {}).items()))
