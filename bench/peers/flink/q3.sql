-- Q3 in Flink SQL: two window TVF aggregates (5 minutes and 1 minute) joined on the plug and
-- window_end. Their windows differ, so this is a regular inner join, not a window join.
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, l.max_5m, s.max_1m, l.avg_5m,
       s.avg_1m, s.max_1m - l.max_5m AS max_change, s.avg_1m - l.avg_5m AS avg_change
FROM (
  SELECT house_id, household_id, plug_id, window_end, MAX(`value`) AS max_5m,
         AVG(`value`) AS avg_5m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
) AS l
JOIN (
  SELECT house_id, household_id, plug_id, window_end, MAX(`value`) AS max_1m,
         AVG(`value`) AS avg_1m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
) AS s
  ON l.house_id = s.house_id AND l.household_id = s.household_id AND l.plug_id = s.plug_id
 AND l.window_end = s.window_end
