-- Q6, the optimiser's DB-op, as an expert writes it: the three windows' means from the
-- per-second sums and counts, each window's seconds a range on the pane, joined per plug.
WITH w AS (
  SELECT window_end, epoch_us(window_end) // 1000000 AS last FROM window_ends
),
m1 AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end,
         sum(p._avg_1m_sum) / sum(p._avg_1m_n) AS avg_1m
  FROM panes_aggregate_1 AS p
  JOIN w ON p._pane > w.last - 60 AND p._pane <= w.last
  GROUP BY ALL
),
m3 AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end,
         sum(p._avg_3m_sum) / sum(p._avg_3m_n) AS avg_3m
  FROM panes_aggregate_2 AS p
  JOIN w ON p._pane > w.last - 180 AND p._pane <= w.last
  GROUP BY ALL
),
m5 AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end,
         sum(p._avg_5m_sum) / sum(p._avg_5m_n) AS avg_5m
  FROM panes_aggregate_3 AS p
  JOIN w ON p._pane > w.last - 300 AND p._pane <= w.last
  GROUP BY ALL
)
SELECT m1.house_id, m1.household_id, m1.plug_id, m1.window_end, m1.avg_1m, m3.avg_3m, m5.avg_5m
FROM m1
JOIN m3 USING (house_id, household_id, plug_id, window_end)
JOIN m5 USING (house_id, household_id, plug_id, window_end)
