-- Q2, the optimiser's DB-op, as an expert writes it over the tables the store keeps: each
-- plug's mean per window from the per-second sums and counts, then the readings of each second
-- (one list per plug and second) above it.
WITH w AS (
  SELECT window_end, epoch_us(window_end) // 1000000 AS last FROM window_ends
),
means AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end, w.last,
         sum(p._avg_load_sum) / sum(p._avg_load_n) AS avg_load
  FROM panes_aggregate_1 AS p
  JOIN w ON p._pane > w.last - 300 AND p._pane <= w.last
  GROUP BY ALL
)
SELECT p.house_id, p.household_id, p.plug_id, r.window_end,
       sum(len(list_filter(p._rows, lambda x: x.value > r.avg_load))) AS above_average
FROM panes_aggregate_2 AS p
JOIN means AS r
  ON p.house_id = r.house_id AND p.household_id = r.household_id AND p.plug_id = r.plug_id
 AND p._pane > r.last - 300 AND p._pane <= r.last
GROUP BY ALL
HAVING above_average > 0
