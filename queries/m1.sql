-- M1: a join between two streams. Per household and minute sliding by the second, the load
-- its meter measures against what its plugs draw, and the load no plug meters.
WITH plugged AS (
  SELECT house_id, household_id, window_end, SUM(value) / 60 AS plugs_w
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  WHERE property = 1
  GROUP BY house_id, household_id, window_end
),
metered AS (
  SELECT house_id, household_id, window_end, AVG(load) AS meter_w
  FROM HOP(meters, ts, INTERVAL '1' SECOND, INTERVAL '1' MINUTE)
  GROUP BY house_id, household_id, window_end
)
SELECT p.house_id, p.household_id, p.window_end, m.meter_w, p.plugs_w,
       m.meter_w - p.plugs_w AS unmetered_w
FROM plugged p
JOIN metered m USING (house_id, household_id, window_end)
