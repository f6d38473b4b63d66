-- Q1: per plug, the number of load readings in the last 5 minutes above 90 % of that plug's
-- maximum load in the last 5 minutes (a correlated aggregate; Ji lines 1924-1930, 2130).
WITH loads AS (
  SELECT * FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
  WHERE property = 1
),
peaks AS (
  SELECT house_id, household_id, plug_id, window_end, MAX(value) AS max_load
  FROM loads
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, COUNT(*) AS high_loads
FROM loads AS l
JOIN peaks AS p
  ON l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
 AND l.window_end = p.window_end
WHERE l.value > 0.9 * p.max_load
GROUP BY l.house_id, l.household_id, l.plug_id, l.window_end
