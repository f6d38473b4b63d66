-- Q1 in Flink SQL as an expert writes it: an interval join of each load reading with the HOP
-- maxima of its plug whose windows hold it (window_time - 5 minutes < ts <= window_time, in
-- milliseconds), so that Flink keeps each reading once instead of once per window (the window
-- join of q1.sql holds it 300 times); the matches are counted per 1-s TUMBLE of window_time,
-- whose end is the HOP window's end.
WITH peaks AS (
  SELECT house_id, household_id, plug_id, window_start, window_end, window_time,
         MAX(`value`) AS max_load
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end, window_time
),
highs AS (
  SELECT p.house_id, p.household_id, p.plug_id, p.window_time AS peak_time
  FROM plugs AS l, peaks AS p
  WHERE l.property = 1
    AND l.house_id = p.house_id AND l.household_id = p.household_id AND l.plug_id = p.plug_id
    AND l.ts > p.window_time - INTERVAL '5' MINUTE AND l.ts <= p.window_time
    AND l.`value` > 0.9 * p.max_load
)
SELECT house_id, household_id, plug_id, window_end, COUNT(*) AS high_loads
FROM TABLE(TUMBLE(TABLE highs, DESCRIPTOR(peak_time), INTERVAL '1' SECOND))
GROUP BY house_id, household_id, plug_id, window_start, window_end
