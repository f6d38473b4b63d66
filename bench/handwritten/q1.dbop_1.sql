-- Q1, the optimiser's DB-op, as an expert writes it over the tables the store keeps: each
-- plug's maximum per window from the per-second maxima, then the readings of each second (one
-- list per plug and second) above 90 % of it. The window's seconds are a range on the pane.
WITH w AS (
  SELECT window_end, epoch_us(window_end) // 1000000 AS last FROM window_ends
),
peaks AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end, w.last,
         max(p._max_load) AS max_load
  FROM panes_aggregate_1 AS p
  JOIN w ON p._pane > w.last - 300 AND p._pane <= w.last
  GROUP BY ALL
)
SELECT p.house_id, p.household_id, p.plug_id, r.window_end,
       sum(len(list_filter(p._rows, lambda x: x.value > 0.9 * r.max_load))) AS high_loads
FROM panes_aggregate_2 AS p
JOIN peaks AS r
  ON p.house_id = r.house_id AND p.household_id = r.household_id AND p.plug_id = r.plug_id
 AND p._pane > r.last - 300 AND p._pane <= r.last
GROUP BY ALL
HAVING high_loads > 0
