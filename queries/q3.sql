-- Q3: per plug, the maximum and average load over the last 5 minutes against the maximum and
-- average load over the last minute (Ji line 2132).
WITH long AS (
  SELECT house_id, household_id, plug_id, window_end, MAX(value) AS max_5m, AVG(value) AS avg_5m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
short AS (
  SELECT house_id, household_id, plug_id, window_end, MAX(value) AS max_1m, AVG(value) AS avg_1m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end,
       l.max_5m, s.max_1m, l.avg_5m, s.avg_1m,
       s.max_1m - l.max_5m AS max_change, s.avg_1m - l.avg_5m AS avg_change
FROM long AS l
JOIN short AS s USING (house_id, household_id, plug_id, window_end)
