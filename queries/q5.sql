-- Q5: per household, the maximum over its plugs of a plug's total load in the last 5 minutes
-- (Ji line 2134).
WITH plug_totals AS (
  SELECT house_id, household_id, plug_id, window_end, SUM(value) AS total_load
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' MINUTES)
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_end
)
SELECT house_id, household_id, window_end, MAX(total_load) AS max_plug_total
FROM plug_totals
GROUP BY house_id, household_id, window_end
