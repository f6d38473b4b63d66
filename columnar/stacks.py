"""Two stacks per pane table: every window from two partial aggregates per group, not W.

A window of W panes ending at pane K = b·W + r (0 <= r < W) covers panes K − W + 1 … K: a
*prefix* of block b (its panes b·W … K) and, unless r = W − 1, a *suffix* of block b − 1 (its
panes K − W + 1 … b·W − 1). Partials that merge associatively (SUM, COUNT, MIN, MAX; AVG as a
SUM and a COUNT) therefore give every window from one prefix and one suffix per group. This is
the two-stacks algorithm (Tangwongsan, Hirzel, Schneider: "Sliding-window aggregation
algorithms", Encyclopedia of Big Data Technologies, 2019) with its flips at fixed block
boundaries, since a window's size is fixed:

* ``back_<aggregate>``, the back stack: per group, the prefix of the pane's block up to each
  pane, one cumulative step per pane; a row for every pane from the group's first in the block,
  so that a window finds its prefix by an equi-join on the pane.
* ``front_<aggregate>``, the front stack: per group, the suffix of a complete block from each
  pane up to the group's last pane in it; built once per W panes, when the first window ending
  in the next block is evaluated.

Only panes that no row can still reach are stacked: a window_end is evaluated once the
watermark has passed it, and a row behind the watermark is quarantined, so panes up to the last
window evaluated are final. The stacks are derived state: rows of a pane stacked twice (a batch
evaluated again after a restart) are the same rows, so extending is idempotent, and a plan that
a run migrates to builds its stacks from the pane table it takes over.

Why not subtract what leaves the window, where the aggregate is invertible (SUM, COUNT, AVG)?
It is the cheapest per window, but a float sum kept by adding and subtracting drifts with
everything it has seen: a plug off for five minutes sums to exactly 0 by merging, and to a
rounding residue of earlier loads by subtraction, 1.7e-9 after a day at 50 readings a second,
beyond the results' tolerance (docs/execution.md, bench/results/stacks.md). Prefixes and
suffixes restart every block, so their rounding is that of merging at most W partials, like the
direct merge's. MIN and MAX are not invertible at all; one rule
serves the five. DABA would spread the front's build over the block's panes (a bounded
latency per window instead of an amortised one); the build is one ordered scan of W panes per
group, measured in docs/execution.md.
"""

from __future__ import annotations

from dataclasses import dataclass

PANE = "_pane"
MERGES = ("SUM", "MIN", "MAX")  # how two partials of a column merge


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _merge(how: str, a: str, b: str) -> str:
    """Two partials merged as ``how`` merges them, a missing one (NULL) ignored, as an
    aggregate ignores NULLs."""
    if how == "SUM":
        return f"CASE WHEN {a} IS NULL THEN {b} WHEN {b} IS NULL THEN {a} ELSE {a} + {b} END"
    return f"{'least' if how == 'MIN' else 'greatest'}({a}, {b})"


@dataclass(frozen=True)
class Stacks:
    """The two stacks of the pane table ``panes`` (partials per group and pane)."""

    panes: str  # panes_<aggregate id>
    keys: tuple[str, ...]  # the aggregate's group columns
    merges: tuple[tuple[str, str], ...]  # (partial column, one of MERGES)
    width: int  # W: panes per window, the blocks' size
    slice_us: int  # a pane's length

    def __post_init__(self):
        if self.width < 1 or any(m not in MERGES for _, m in self.merges):
            raise ValueError(f"stacks of {self.panes}: width {self.width}, merges {self.merges}")

    @property
    def back(self) -> str:
        return "back_" + self.panes.removeprefix("panes_")

    @property
    def front(self) -> str:
        return "front_" + self.panes.removeprefix("panes_")

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.keys, PANE, *(c for c, _ in self.merges))

    def windows(self, ends: str) -> str:
        """The stack rows of every window_end of ``ends`` (an alias with ``window_end`` and its
        last pane ``_last_pane``), at most two per group: its prefix and its suffix, to be
        merged like partials."""
        w, cols = self.width, ", ".join(f"s.{quoted(c)}" for c in self.columns)
        return (f"SELECT e.window_end, {cols} FROM {ends} JOIN {self.back} AS s "
                f"ON s.{PANE} = e._last_pane "
                f"UNION ALL SELECT e.window_end, {cols} FROM {ends} JOIN {self.front} AS s "
                f"ON s.{PANE} = e._last_pane - {w - 1} AND e._last_pane % {w} <> {w - 1}")

    def create(self, schema: str) -> list[str]:
        typed = f"SELECT {', '.join(map(quoted, self.columns))} FROM {schema}.{self.panes} LIMIT 0"
        return [f"CREATE TABLE IF NOT EXISTS {schema}.{t} AS {typed}"
                for t in (self.back, self.front)]

    def _partials(self, where: str) -> str:
        """The partials of the panes ``where`` selects, one row per group and pane (a pane
        gets a row per micro-batch that brought rows to it)."""
        merged = ", ".join(f"{m}({quoted(c)}) AS {quoted(c)}" for c, m in self.merges)
        keys = "".join(f"{quoted(k)}, " for k in self.keys)
        return (f"SELECT {keys}{PANE}, {merged} FROM {self.panes} WHERE {where} "
                f"GROUP BY {keys}{PANE}")

    def _on(self, left: str, right: str) -> str:
        return " AND ".join([f"{left}.{quoted(k)} IS NOT DISTINCT FROM {right}.{quoted(k)}"
                             for k in self.keys] + [f"{left}.{PANE} = {right}.{PANE}"])

    def _stack(self, grid: str, seeded: bool, order: str) -> str:
        """Cumulative merges along each group's ``grid`` of panes within a block, over the CTEs
        ``partials`` and (``seeded``) ``seeds``."""
        keys = "".join(f"{quoted(k)}, " for k in self.keys)
        values = ", ".join(
            f"coalesce(p.{quoted(c)}, s.{quoted(c)}) AS {quoted(c)}" if seeded
            else f"p.{quoted(c)}" for c, _ in self.merges)
        seeds = f" LEFT JOIN seeds AS s ON {self._on('g', 's')}" if seeded else ""
        stacked = ", ".join(f"{m}({quoted(c)}) OVER w AS {quoted(c)}" for c, m in self.merges)
        gkeys = "".join(f"g.{quoted(k)}, " for k in self.keys)
        return (f"SELECT {keys}{PANE}, {stacked} FROM (SELECT {gkeys}g.{PANE}, {values} "
                f"FROM ({grid}) AS g LEFT JOIN partials AS p ON {self._on('g', 'p')}{seeds}) "
                f"WINDOW w AS (PARTITION BY {keys}{PANE} // {self.width} ORDER BY {PANE} {order} "
                "ROWS UNBOUNDED PRECEDING)")

    def extend(self) -> str:
        """Insert the back stack's rows for panes $from … $to, seeded by its rows at pane
        $from − 1 where that pane is in the same block."""
        w, keys = self.width, "".join(f"{quoted(k)}, " for k in self.keys)
        seeds = (f"SELECT {', '.join(map(quoted, self.columns))} FROM {self.back} "
                 f"WHERE {PANE} = $from - 1 AND $from % {w} <> 0")
        firsts = (f"SELECT {keys}{PANE} // {w} AS _block, min({PANE}) AS _first FROM "
                  f"(SELECT {keys}{PANE} FROM partials UNION ALL SELECT {keys}{PANE} FROM seeds) "
                  f"GROUP BY {keys}_block")
        grid = (f"SELECT {keys}unnest(range(_first, least(_block * {w} + {w}, $to + 1))) "
                f"AS {PANE} FROM firsts")
        return (f"INSERT INTO {self.back} WITH partials AS "
                f"({self._partials(f'{PANE} BETWEEN $from AND $to')}), seeds AS ({seeds}), "
                f"firsts AS ({firsts}) SELECT * FROM ({self._stack(grid, True, 'ASC')}) "
                f"WHERE {PANE} >= $from")

    def step(self) -> str:
        """Insert the back stack's rows for the one pane $to: each group's prefix at $to − 1
        (where that pane is in the same block) merged with its partial, a join of two panes'
        rows instead of ``extend``'s cumulative window (a third of its cost)."""
        w = self.width
        keys = ", ".join(f"coalesce(p.{quoted(k)}, s.{quoted(k)})" for k in self.keys)
        values = ", ".join(_merge(m, f"s.{quoted(c)}", f"p.{quoted(c)}") for c, m in self.merges)
        seeds = (f"SELECT * FROM {self.back} WHERE {PANE} = $to - 1 AND $to % {w} <> 0")
        on = " AND ".join([f"p.{quoted(k)} IS NOT DISTINCT FROM s.{quoted(k)}" for k in self.keys]
                          or ["TRUE"])
        return (f"INSERT INTO {self.back} SELECT {keys}{', ' if keys else ''}$to, {values} "
                f"FROM ({self._partials(f'{PANE} = $to')}) AS p FULL JOIN ({seeds}) AS s ON {on}")

    def build_front(self) -> str:
        """Insert the front stack's rows for block $block from pane $low on."""
        w, keys = self.width, "".join(f"{quoted(k)}, " for k in self.keys)
        low = f"greatest($block * {w}, $low)"
        lasts = f"SELECT {keys}max({PANE}) AS _last FROM partials GROUP BY ALL"
        grid = f"SELECT {keys}unnest(range({low}, _last + 1)) AS {PANE} FROM lasts"
        where = f"{PANE} >= {low} AND {PANE} < $block * {w} + {w}"
        # In pane order, so that a window's lookup of one pane reads few row groups.
        return (f"INSERT INTO {self.front} WITH partials AS ({self._partials(where)}), "
                f"lasts AS ({lasts}) SELECT * FROM ({self._stack(grid, False, 'DESC')}) "
                f"ORDER BY {PANE}")

    def front_built(self) -> str:
        """Does the front stack hold block $block from pane $low on?"""
        return (f"SELECT count(*) > 0 FROM {self.front} WHERE {PANE} >= greatest($block * "
                f"{self.width}, $low) AND {PANE} < $block * {self.width} + {self.width}")

    def span(self, stacked: int | None, last_panes: list[int]) -> tuple[int, int] | None:
        """The panes to stack onto the back (first, last) so that it holds every window's
        prefix (``last_panes``: the window_ends' last panes), given the last pane it holds."""
        first, last = min(last_panes), max(last_panes)
        start = first // self.width * self.width  # the first window's block
        if stacked is not None and stacked >= start - 1:
            start = stacked + 1  # continue: its rows up to ``stacked`` are final
        return (start, last) if start <= last else None

    def fronts(self, last_panes: list[int]) -> list[tuple[int, int]]:
        """(block, first pane needed) of every front the windows read: block b − 1 for a
        window ending in block b, except one ending at b's last pane (block b alone)."""
        needed: dict[int, int] = {}
        for k in sorted(last_panes):
            if k % self.width != self.width - 1:
                needed.setdefault(k // self.width - 1, k - self.width + 1)
        return sorted(needed.items())

    def purge(self) -> list[tuple[str, str]]:
        """(table, condition on $last): the rows that no window ending at pane $last or later,
        and no extension after it, reads."""
        return [(self.back, f"{PANE} < $last - 1"), (self.front, f"{PANE} <= $last - {self.width}")]
