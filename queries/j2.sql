-- J2: join template of Ji Table 6.1 (2-way join): the average load per plug over
-- 1, 3 minute windows, joined per plug.
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
)
SELECT m1.house_id, m1.household_id, m1.plug_id, m1.window_end, m1.avg_1m, m3.avg_3m
FROM m1
JOIN m3 USING (house_id, household_id, plug_id, window_end)
