-- A correlated aggregate that reads no column of the rows: every load reading of the window
-- joined to its plug's maximum, counted (the lists only count their rows).
WITH loads AS (
  SELECT * FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES) WHERE property = 1
),
peaks AS (
  SELECT house_id, household_id, plug_id, window_end, MAX(value) AS max_load
  FROM loads
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, COUNT(*) AS readings
FROM loads AS l
JOIN peaks AS p
  ON l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
 AND l.window_end = p.window_end
GROUP BY l.house_id, l.household_id, l.plug_id, l.window_end
