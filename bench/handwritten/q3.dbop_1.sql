-- Q3, the optimiser's DB-op, as an expert writes it: both windows' maxima and means from the
-- per-second partials, each window's seconds a range on the pane, joined per plug.
WITH w AS (
  SELECT window_end, epoch_us(window_end) // 1000000 AS last FROM window_ends
),
long AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end, max(p._max_5m) AS max_5m,
         sum(p._avg_5m_sum) / sum(p._avg_5m_n) AS avg_5m
  FROM panes_aggregate_1 AS p
  JOIN w ON p._pane > w.last - 300 AND p._pane <= w.last
  GROUP BY ALL
),
short AS (
  SELECT p.house_id, p.household_id, p.plug_id, w.window_end, max(p._max_1m) AS max_1m,
         sum(p._avg_1m_sum) / sum(p._avg_1m_n) AS avg_1m
  FROM panes_aggregate_2 AS p
  JOIN w ON p._pane > w.last - 60 AND p._pane <= w.last
  GROUP BY ALL
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, l.max_5m, s.max_1m, l.avg_5m,
       s.avg_1m, s.max_1m - l.max_5m AS max_change, s.avg_1m - l.avg_5m AS avg_change
FROM long AS l
JOIN short AS s USING (house_id, household_id, plug_id, window_end)
