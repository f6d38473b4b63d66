-- Q2 in Flink SQL: a window join of every window's load readings with the window's mean per
-- plug, then a window aggregate of the readings above it.
SELECT house_id, household_id, plug_id, window_end, COUNT(*) AS above_average
FROM (
  SELECT l.house_id, l.household_id, l.plug_id, l.window_start, l.window_end, l.`value`,
         p.avg_load
  FROM (
    SELECT * FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
    WHERE property = 1
  ) AS l
  JOIN (
    SELECT house_id, household_id, plug_id, window_start, window_end, AVG(`value`) AS avg_load
    FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
    WHERE property = 1
    GROUP BY house_id, household_id, plug_id, window_start, window_end
  ) AS p
    ON l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
   AND l.window_start = p.window_start AND l.window_end = p.window_end
)
WHERE `value` > avg_load
GROUP BY house_id, household_id, plug_id, window_start, window_end
