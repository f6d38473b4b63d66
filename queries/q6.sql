-- Q6: per plug, the average load over the last 1, 3 and 5 minutes (a 3-way join; Ji line 2135).
WITH m1 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_1m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
m3 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_3m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '3' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
m5 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_5m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT m1.house_id, m1.household_id, m1.plug_id, m1.window_end, m1.avg_1m, m3.avg_3m, m5.avg_5m
FROM m1
JOIN m3 USING (house_id, household_id, plug_id, window_end)
JOIN m5 USING (house_id, household_id, plug_id, window_end)
