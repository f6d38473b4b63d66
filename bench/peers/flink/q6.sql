-- Q6 in Flink SQL: three window TVF aggregates (1, 3 and 5 minutes) joined on the plug and
-- window_end. Their windows differ, so these are regular inner joins, not window joins.
SELECT m1.house_id, m1.household_id, m1.plug_id, m1.window_end, m1.avg_1m, m3.avg_3m, m5.avg_5m
FROM (
  SELECT house_id, household_id, plug_id, window_end, AVG(`value`) AS avg_1m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
) AS m1
JOIN (
  SELECT house_id, household_id, plug_id, window_end, AVG(`value`) AS avg_3m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
) AS m3
  ON m1.house_id = m3.house_id AND m1.household_id = m3.household_id
 AND m1.plug_id = m3.plug_id AND m1.window_end = m3.window_end
JOIN (
  SELECT house_id, household_id, plug_id, window_end, AVG(`value`) AS avg_5m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
) AS m5
  ON m1.house_id = m5.house_id AND m1.household_id = m5.household_id
 AND m1.plug_id = m5.plug_id AND m1.window_end = m5.window_end
