-- Q5 in Flink SQL: the window TVF aggregate per plug, then per household over its windows.
SELECT house_id, household_id, window_end, MAX(total_load) AS max_plug_total
FROM (
  SELECT house_id, household_id, plug_id, window_start, window_end, SUM(`value`) AS total_load
  FROM TABLE(HOP(TABLE plugs, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' MINUTES))
  WHERE property = 1
  GROUP BY house_id, household_id, plug_id, window_start, window_end
)
GROUP BY house_id, household_id, window_start, window_end
