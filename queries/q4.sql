-- Q4: as Q3, comparing only the average loads over the last 5 minutes and the last minute
-- (Ji line 2133).
WITH long AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_5m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
short AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_1m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, l.avg_5m, s.avg_1m,
       s.avg_1m - l.avg_5m AS avg_change
FROM long AS l
JOIN short AS s USING (house_id, household_id, plug_id, window_end)
