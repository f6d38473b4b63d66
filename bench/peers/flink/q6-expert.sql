-- Q6 in Flink SQL as an expert writes it, as q3-expert.sql writes Q3: the three window
-- aggregates joined on the plug and an interval of their window_time (each the window's end
-- less 1 ms, so the interval is one instant). An interval join keeps each side's rows until
-- the watermark passes them, and keeps the time attributes of both, so the second join is an
-- interval join too; the regular joins of q6.sql keep every window of every side for ever.
SELECT m1.house_id, m1.household_id, m1.plug_id, m1.window_end, m1.avg_1m, m3.avg_3m, m5.avg_5m
FROM (
  SELECT house_id, household_id, plug_id, window_end, window_time, AVG(`value`) AS avg_1m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '1' MINUTE))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS m1
JOIN (
  SELECT house_id, household_id, plug_id, window_time, AVG(`value`) AS avg_3m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS m3
  ON m1.house_id = m3.house_id AND m1.household_id = m3.household_id
 AND m1.plug_id = m3.plug_id AND m1.window_time BETWEEN m3.window_time AND m3.window_time
JOIN (
  SELECT house_id, household_id, plug_id, window_time, AVG(`value`) AS avg_5m
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
) AS m5
  ON m1.house_id = m5.house_id AND m1.household_id = m5.household_id
 AND m1.plug_id = m5.plug_id AND m1.window_time BETWEEN m5.window_time AND m5.window_time
