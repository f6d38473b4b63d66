-- Q2: as Q1, but counting load readings above the plug's average load in the last 5 minutes
-- (AVG is incremental, MAX is not: Ji lines 2131, 2140).
WITH loads AS (
  SELECT * FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
  WHERE property = 1
),
means AS (
  SELECT house_id, household_id, plug_id, window_end, AVG(value) AS avg_load
  FROM loads
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, COUNT(*) AS above_average
FROM loads AS l
JOIN means AS p
  ON l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
 AND l.window_end = p.window_end
WHERE l.value > p.avg_load
GROUP BY l.house_id, l.household_id, l.plug_id, l.window_end
