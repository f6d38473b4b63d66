-- Q5, the optimiser's DB-op, as an expert writes it: each plug's total per window from the
-- per-second sums (the window's seconds a range on the pane), then the largest per household.
WITH w AS (
  SELECT window_end, epoch_us(window_end) // 1000000 AS last FROM window_ends
),
totals AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end, sum(p._total_load) AS total_load
  FROM panes_aggregate_1 AS p
  JOIN w ON p._pane > w.last - 300 AND p._pane <= w.last
  GROUP BY ALL
)
SELECT house_id, household_id, window_end, max(total_load) AS max_plug_total
FROM totals
GROUP BY ALL
