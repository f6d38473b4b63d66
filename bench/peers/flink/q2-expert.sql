-- Q2 in Flink SQL as an expert writes it, as q1-expert.sql writes Q1: an interval join of each
-- load reading with the HOP means of its plug whose windows hold it (window_time - 5 minutes
-- < ts <= window_time), so that Flink keeps each reading once instead of once per window (the
-- window join of q2.sql holds it 300 times); the matches are counted per 1-s TUMBLE of
-- window_time, whose end is the HOP window's end.
WITH means AS (
  SELECT house_id, household_id, plug_id, window_start, window_end, window_time,
         AVG(`value`) AS avg_load
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
),
aboves AS (
  SELECT p.house_id, p.household_id, p.plug_id, p.window_time AS mean_time
  FROM plugs AS l, means AS p
  WHERE l.property = 1
    AND l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
    AND l.ts > p.window_time - INTERVAL '5' MINUTE AND l.ts <= p.window_time
    AND l.`value` > p.avg_load
)
SELECT house_id, household_id, plug_id, window_end, COUNT(*) AS above_average
FROM TABLE(TUMBLE(TABLE aboves, DESCRIPTOR(mean_time), INTERVAL '1' SECOND))
GROUP BY house_id, household_id, plug_id, window_start, window_end
