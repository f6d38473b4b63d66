-- A correlated aggregate of another shape than Q1's: the window's rows on the join's right, a
-- condition in the join, a projection above it, keys fewer than the join's, and aggregates
-- other than COUNT(*).
WITH loads AS (
  SELECT * FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES) WHERE property = 1
),
bounds AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_load,
         MIN(value) AS min_load
  FROM loads
  GROUP BY house_id, household_id, plug_id, window_end
),
above AS (
  SELECT l.house_id, l.plug_id, l.window_end, l.value - b.avg_load AS excess, l.value
  FROM bounds AS b
  JOIN loads AS l
    ON l.house_id = b.house_id AND l.household_id = b.household_id AND l.plug_id = b.plug_id
   AND l.window_end = b.window_end AND l.value >= 1.5 * b.min_load
)
SELECT house_id, plug_id, window_end, COUNT(*) AS n, SUM(excess) AS total_excess,
       AVG(value) AS mean_value, MAX(excess) AS max_excess, COUNT(value) AS counted
FROM above
GROUP BY house_id, plug_id, window_end
