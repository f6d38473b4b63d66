/*+ QUALITY(min_recall = 0.99) */
-- M2: a join of two streams' readings themselves (Ji's sliding-window join, Sec. 4.2): each
-- load reading of a plug with its household's meter readings of the same 5-second window
-- sliding by the second, where the plug draws over a fifth of what the meter measures. The
-- result quality is a recall: 99 % of the true pairs.
WITH loads AS (
  SELECT house_id, household_id, plug_id, window_end, ts AS plug_ts, value
  FROM HOP(plugs, ts, INTERVAL '1' SECOND, INTERVAL '5' SECONDS)
  WHERE property = 1
),
metered AS (
  SELECT house_id, household_id, window_end, ts AS meter_ts, load
  FROM HOP(meters, ts, INTERVAL '1' SECOND, INTERVAL '5' SECONDS)
)
SELECT l.house_id, l.household_id, l.plug_id, l.window_end, l.plug_ts, l.value, m.meter_ts,
       m.load
FROM loads l
JOIN metered m USING (house_id, household_id, window_end)
WHERE l.value > 0.2 * m.load
