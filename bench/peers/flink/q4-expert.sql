-- Q4 in Flink SQL as an expert writes it, as q3-expert.sql writes Q3: the two window aggregates
-- joined on the plug and an interval of their window_time (both the window's end less 1 ms, so
-- the interval is one instant). An interval join keeps each side's rows until the watermark
-- passes them; the regular join of q4.sql keeps every window of both sides for ever.
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, l.avg_5m, s.avg_1m,
       s.avg_1m - l.avg_5m AS avg_change
FROM (
  SELECT house_id, household_id, plug_id, window_end, window_time, AVG(`value`) AS avg_5m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS l
JOIN (
  SELECT house_id, household_id, plug_id, window_time, AVG(`value`) AS avg_1m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS s
  ON l.house_id = s.house_id AND l.household_id = s.household_id AND l.plug_id = s.plug_id
 AND l.window_time BETWEEN s.window_time AND s.window_time
