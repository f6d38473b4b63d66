-- J8: join template of Ji Table 6.1 (8-way join): the average load per plug over
-- 1, 3, 5, 7, 9, 11, 13, 15 minute windows, joined per plug.
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
),
m7 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_7m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '7' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
m9 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_9m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '9' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
m11 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_11m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '11' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
m13 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_13m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '13' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
),
m15 AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_15m
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '15' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT m1.house_id, m1.household_id, m1.plug_id, m1.window_end, m1.avg_1m, m3.avg_3m, m5.avg_5m, m7.avg_7m, m9.avg_9m, m11.avg_11m, m13.avg_13m, m15.avg_15m
FROM m1
JOIN m3 USING (house_id, household_id, plug_id, window_end)
JOIN m5 USING (house_id, household_id, plug_id, window_end)
JOIN m7 USING (house_id, household_id, plug_id, window_end)
JOIN m9 USING (house_id, household_id, plug_id, window_end)
JOIN m11 USING (house_id, household_id, plug_id, window_end)
JOIN m13 USING (house_id, household_id, plug_id, window_end)
JOIN m15 USING (house_id, household_id, plug_id, window_end)
